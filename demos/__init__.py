"""The demos behind ``smc-hmm demo NAME``: parties running protocols on bundled inputs.

Each demo is ``fn(args, output) -> exit code`` (``output``: result lines on standard
output, tables and progress on ``output.err``, the report through ``output.finish``)
registered in the ``smc_hmm.demos`` entry-point group (``pyproject.toml``), with an
``add_arguments(parser)`` for its own options. Demos may import the parties, the
protocols and the core; nothing imports them (the core finds them by name).
"""
