"""Benchmarks behind ``smc-hmm bench``: side-by-side runs that print medians and ratios."""
