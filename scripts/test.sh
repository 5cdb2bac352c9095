#!/usr/bin/env bash
# The README's test command: install the package with its development tools and the optional integrations,
# then lint, type-check and test. (Tests of an optional integration skip themselves if it is missing.)
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install --quiet -e ".[dev,interop,onnx,tensorboard,serve]"
ruff check .
ruff format --check .
mypy
# The slowest tests are listed: they differ by CPU kind (the suite takes about 6.5 minutes on the AVX-512 CPUs,
# 12.4 on the AVX2-only one).
python -m pytest -q --durations=15
