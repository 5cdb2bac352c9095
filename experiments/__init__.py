"""Recorded experiments and the scripts that made them, run from the repository root with ``python -m``."""
