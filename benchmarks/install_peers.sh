#!/usr/bin/env bash
# Install the benchmark peers (benchmarks/requirements-peers.txt) into the active environment, keeping its
# torch: the requirement is pinned to the installed version, so pip cannot swap in another (CUDA) build.
# fairseq-fixed also pulls torchaudio, which fairseq's text models never import and whose binary is built
# for another torch (importing it fails, and transformers then fails on import): it is removed again.
set -euo pipefail
cd "$(dirname "$0")/.."
torch_version=$(python -c "import torch; print(torch.__version__.split('+')[0])")
python -m pip install --quiet -r benchmarks/requirements-peers.txt "torch==${torch_version}"
python -m pip uninstall --quiet --yes torchaudio || true
python -c "from fairseq.models.transformer import TransformerModel" 2>/dev/null \
    && echo "benchmark peers installed: fairseq $(python -c 'import fairseq; print(fairseq.__version__)' 2>/dev/null)"
