"""Garbled circuits and OT extension (docs/garbled.md)."""
