#!/usr/bin/env bash
# The README's test command: install the package with its development tools and the optional integrations,
# then lint, type-check and test. (Tests of an optional integration skip themselves if it is missing.)
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install --quiet -e ".[dev,interop,tensorboard,serve]"
ruff check .
ruff format --check .
mypy
python -m pytest -q
