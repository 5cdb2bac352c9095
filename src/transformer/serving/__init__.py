"""``transformer serve``: an HTTP translation server with step-level continuous batching (docs/serving.md)."""
