#!/usr/bin/env bash
# The README's test command: install the package with its development tools, lint, type-check, test.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install --quiet -e ".[dev]"
ruff check .
ruff format --check .
mypy
python -m pytest -q
