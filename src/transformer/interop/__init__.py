"""Bring models in from other toolkits and take ours out to them.

* :mod:`transformer.interop.marian`: HuggingFace MarianMT directories (OPUS-MT) to and from our checkpoints
  (:func:`~transformer.interop.marian.import_marian`, :func:`~transformer.interop.marian.export_marian`).
* Marian's vocabulary (two SentencePiece models and ``vocab.json``) is a tokenizer like ours:
  :mod:`transformer.data.pipeline.marian_tokenizer`, so a converted checkpoint translates without this package.
* :mod:`transformer.interop.marian_config` and :mod:`transformer.interop.marian_weights`: the config fields
  and tensor names of the two formats, and the change of basis between sinusoidal layouts.
* :mod:`transformer.interop.ctranslate2`: export to CTranslate2 and translate with it
  (:func:`~transformer.interop.ctranslate2.export_ctranslate2`,
  :class:`~transformer.interop.ctranslate2.CTranslate2Translator`); the model description it writes is built
  in :mod:`transformer.interop.ctranslate2_spec`.
* :mod:`transformer.interop.export_checks`: what both exports check first (a Transformer checkpoint, attention
  as the paper computes it), each refusal naming the target.
* :mod:`transformer.interop.output_directory`: converted models are written to a temporary directory and
  renamed into place, replacing only an earlier conversion of the same kind (an export's
  ``converted_from.json`` lists what it wrote).

Nothing here needs ``transformers``; ``ctranslate2`` is needed only by the CTranslate2 module's functions
(``pip install 'transformer[interop]'``).
"""
