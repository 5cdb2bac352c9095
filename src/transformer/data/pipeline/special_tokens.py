"""The special token ids every vocabulary of this project has: padding, start, end and unknown.

``PAD_ID = 0``, ``BOS_ID = 1``, ``EOS_ID = 2``, ``UNK_ID = 3`` (pieces ``<pad>``, ``<s>``, ``</s>``, ``<unk>``),
matching the defaults of :class:`transformer.model.config.TransformerConfig`. The BPE trainer
(:mod:`transformer.data.pipeline.bpe_training`) gives them to SentencePiece, the tokenizer
(:mod:`transformer.data.pipeline.tokenizer`) refuses a model with other ids, and collation pads with ``PAD_ID``
and frames targets with ``BOS_ID``/``EOS_ID``: fixed in one place, so a checkpoint, its tokenizer and its
batches agree.
"""

PAD_ID = 0
BOS_ID = 1
EOS_ID = 2
UNK_ID = 3
SPECIAL_PIECES = {PAD_ID: "<pad>", BOS_ID: "<s>", EOS_ID: "</s>", UNK_ID: "<unk>"}
