"""Builds the optional native kernels (``smc_hmm/crypto/native.py``: Montgomery arithmetic
on AVX-512 IFMA; ``smc_hmm/gc/native.py``: garbling on AES-NI); everything else is in
pyproject.toml.  ``optional=True``: without a C compiler the install goes on without
them, and the gmpy2 and numpy paths run."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "smc_hmm.crypto._ifma",
            ["smc_hmm/crypto/_ifma.c"],
            extra_compile_args=["-O3", "-std=c11"],
            optional=True,
        ),
        Extension(
            "smc_hmm.gc._gcnative",
            ["smc_hmm/gc/_gcnative.c"],
            extra_compile_args=["-O3", "-std=c11"],
            optional=True,
        ),
    ]
)
