"""``python3 -m smc_hmm.cli ...``: the same as the ``smc-hmm`` console script."""

import sys

from smc_hmm.cli import main

sys.exit(main())
