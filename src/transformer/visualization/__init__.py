"""Visualization components."""
