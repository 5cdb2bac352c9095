"""The benchmark suite: the model against its peers on this machine (see ``benchmarks/README.md``).

A package run from the repository root, not installed: ``python -m benchmarks.run --quick``. Its modules import
each other as ``benchmarks.bench_*``, and its worker processes run as ``python -m benchmarks.bench_* --worker``.
"""
