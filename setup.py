"""Builds the optional native kernel (``smc_hmm/crypto/native.py``); everything else is in
pyproject.toml.  ``optional=True``: without a C compiler the install goes on without it,
and the gmpy2 path runs."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "smc_hmm.crypto._ifma",
            ["smc_hmm/crypto/_ifma.c"],
            extra_compile_args=["-O3", "-std=c11"],
            optional=True,
        )
    ]
)
