"""Defaults chosen by measurement on the machine at hand: precision, attention path, thread count.

Each probe times a few small products at the model's shapes (well under a second), and its answer is cached
per machine (CPU model and flags or GPU name, torch version, threads) in the user's cache directory, so it runs
once per machine and model shape.
"""
