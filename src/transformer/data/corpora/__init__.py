"""The corpora: where parallel text comes from, as plain line-aligned files for the input pipeline to read.

The built-in synthetic grammar, the known corpora (Multi30k, WMT14) with their downloads, checksums and
archive extraction, large corpora recombined from Multi30k, and back-translated corpora.
"""
