"""What the translator needs from a tokenizer, whichever toolkit's vocabulary it wraps."""

from typing import Protocol, runtime_checkable


@runtime_checkable
class TextTokenizer(Protocol):
    """Turns raw text into model token ids and back.

    Notes
    -----
    :class:`transformer.data.pipeline.tokenizer.Tokenizer` (this project's joint BPE) and the Marian vocabulary adapter
    in :mod:`transformer.interop` both satisfy it. Ids exclude BOS/EOS: the caller adds them.
    """

    @property
    def vocab_size(self) -> int:
        """Number of target token ids, the size of the decoder's output layer.

        Returns
        -------
        int
            Target ids run from 0 to ``vocab_size - 1``.

        Notes
        -----
        The translator refuses a tokenizer whose ``vocab_size`` differs from the model's ``tgt_vocab_size``:
        a mismatch would decode logits into the wrong pieces without any error. For a joint vocabulary it is
        the source size as well.
        """

    def encode(self, text: str) -> list[int]:
        """Encode one source sentence into token ids.

        Parameters
        ----------
        text : str
            One source-language sentence.

        Returns
        -------
        list[int]
            Source token ids, without BOS or EOS.

        Notes
        -----
        The caller appends ``config.eos_id``: keeping the special ids out lets one tokenizer serve models
        whose ids for them differ (this project's fixed ids, Marian's ``vocab.json``).
        """

    def encode_target(self, text: str) -> list[int]:
        """Encode one target sentence (e.g. a reference) into token ids.

        Parameters
        ----------
        text : str
            One target-language sentence.

        Returns
        -------
        list[int]
            Target token ids, without BOS or EOS.

        Notes
        -----
        Separate from :meth:`encode` because a model with separate vocabularies (Marian's
        ``separate_vocabs``) splits and numbers target text differently; encoding a reference with the
        source vocabulary would give ids the decoder does not predict.
        """

    def decode(self, ids: list[int]) -> str:
        """Decode target token ids into detokenised text, skipping special tokens.

        Parameters
        ----------
        ids : list[int]
            Target token ids, e.g. a model output that may still hold BOS, EOS or padding.

        Returns
        -------
        str
            The detokenised sentence.

        Raises
        ------
        ValueError
            For an id outside ``[0, vocab_size)``.

        Notes
        -----
        Padding, BOS and EOS are dropped, so a hypothesis can be passed as the decoder produced it. ``<unk>``
        differs: this project's tokenizer writes it as " ⁇ ", Marian's drops it as ``transformers`` does.
        """

    def id_to_piece(self, token_id: int) -> str:
        """Return the subword string of one target id.

        Parameters
        ----------
        token_id : int
            A target id in ``[0, vocab_size)``.

        Returns
        -------
        str
            The piece, e.g. ``"▁Haus"``; special ids give their piece (``"</s>"``), not an empty string.

        Notes
        -----
        Attention plots label the decoder axis with it, and the CTranslate2 export reads the target vocabulary
        through it, so it must cover every id, special ones included.
        """

    def source_id_to_piece(self, token_id: int) -> str:
        """Return the subword string of one source id.

        Parameters
        ----------
        token_id : int
            A source id.

        Returns
        -------
        str
            The source piece of that id.

        Notes
        -----
        With separate vocabularies the same id names different source and target pieces, so attention plots
        must label the encoder axis with this and not :meth:`id_to_piece`.
        """
