"""One-off CPU measurements beside the suite's reports: ``python -m experiments.benchmarks.<script>``."""
