"""Scripts of the GPU runs (``experiments/gpu/README.md``): ``python -m experiments.gpu.<script>``."""
