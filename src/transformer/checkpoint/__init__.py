"""The checkpoint, the product's central artifact: weights, model config, tokenizer files and search settings.

A checkpoint is a directory::

    step-00001000/
      model.safetensors      weights; the model config, the SHA-256 of the weights, of the config and of
                             each tokenizer file (and, for weights-only checkpoints, the search settings)
                             in the file's metadata
      tokenizer.model        the SentencePiece model, so the directory alone can translate
                             (or source.spm, target.spm and vocab.json for an imported Marian model)
      optimizer.safetensors  training checkpoints only: Adam moments and random-number-generator states
      trainer_state.json     training checkpoints only: step, data position, schedule, experiment config
      averaged_from.json     averages only: the checkpoints averaged

This package reads and writes what translating, converting, scoring and averaging need, and depends only on
the model, its config and the tokenizers; what only training needs (the optimizer and trainer state, the
manager of the last-K and best checkpoints) is in :mod:`transformer.training.checkpoint`. Nothing is ever
unpickled: only safetensors and JSON are read, so a checkpoint cannot execute code. Directories are assembled
in a hidden sibling and renamed into place (:func:`transformer.atomic_files.staged_directory`), so a crash
(even SIGKILL) leaves the old checkpoint or the new one, never a half-written directory.

- :mod:`transformer.checkpoint.layout`: the names of the files, and which checkpoint a run directory means
- :mod:`transformer.checkpoint.weights`: a model's tensors, their checksum and their checks
- :mod:`transformer.checkpoint.integrity`: the checksums of the model config and the tokenizer files, checked
  at every load
- :mod:`transformer.checkpoint.model_checkpoint`: ``Checkpoint``, ``save_checkpoint``, ``load_checkpoint`` and
  the tokenizer stored beside the weights
"""
