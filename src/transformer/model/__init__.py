"""Model components."""
