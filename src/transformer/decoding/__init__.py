"""Decoding components."""
