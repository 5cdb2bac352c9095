"""Training components."""
