"""Data: the input pipeline, the corpora, and the preparation that joins them.

:mod:`transformer.data.pipeline` turns text into batches, :mod:`transformer.data.corpora` provides the text, and
:mod:`transformer.data.prepare` builds a run's training data from its data config with both.
"""
