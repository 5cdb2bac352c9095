"""Data components."""
