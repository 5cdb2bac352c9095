"""The vocabulary and special-token spec every architecture shares, for its config and for its step model.

Token batches, the loss, checkpoints, the tokenizers' checks and the searches read a model's vocabulary sizes
and special ids through one set of names (``vocab_size``, ``tgt_vocab_size``, ``pad_id``, ``start_id``,
``eos_id``, ...), whatever the architecture. :class:`SpecialTokens` holds their checks and derived values once
for both configs (:class:`~transformer.model.config.TransformerConfig` and
:class:`~transformer.baselines.rnn_config.RNNConfig`), and :class:`SpecialTokenIds` gives both step models the
ids the searches ask for.
"""

from typing import Protocol


class SpecialTokens:
    """Checks and derived values of a config's vocabulary sizes and special ids (a mixin of the configs).

    Notes
    -----
    A mixin: the config dataclass declares the fields ``vocab_size``, ``target_vocab_size``, ``pad_id``,
    ``bos_id``, ``eos_id``, ``unk_id``, ``decoder_start_id`` and ``share_embeddings``. Not a dataclass itself, so the configs keep their own field order (which their stored JSON follows: a
    checkpoint written today and one written before carry the same keys in the same order).
    """

    vocab_size: int
    target_vocab_size: int | None
    pad_id: int
    bos_id: int
    eos_id: int
    unk_id: int
    decoder_start_id: int | None
    share_embeddings: bool

    def check_special_tokens(self) -> None:
        """Refuse special ids outside the vocabularies, ids that must differ and do not, and bad sharing.

        Returns
        -------
        None

        Raises
        ------
        ValueError
            Naming the config class and the field, e.g. ``TransformerConfig.pad_id=40 is outside the
            vocabulary [0, 40)``.

        Notes
        -----
        BOS may equal EOS and the decoder may start from PAD (HuggingFace Marian does both); padding, EOS
        and UNK must differ from each other and padding from BOS, or masks and stopping would confuse them.
        Shared embeddings need one vocabulary size on both sides.
        """
        owner = type(self).__name__
        special = {"pad_id": self.pad_id, "bos_id": self.bos_id, "eos_id": self.eos_id, "unk_id": self.unk_id}
        if self.decoder_start_id is not None:
            special["decoder_start_id"] = self.decoder_start_id
        smallest = min(self.vocab_size, self.tgt_vocab_size)
        for name, value in special.items():
            if not 0 <= value < smallest:
                raise ValueError(f"{owner}.{name}={value} is outside the vocabulary [0, {smallest})")
        for first, second in (
            ("pad_id", "eos_id"),
            ("pad_id", "unk_id"),
            ("eos_id", "unk_id"),
            ("pad_id", "bos_id"),
        ):
            if special[first] == special[second]:
                raise ValueError(f"{owner}.{first} and {second} must differ, both are {special[first]}")
        if self.share_embeddings and self.tgt_vocab_size != self.vocab_size:
            raise ValueError(
                f"{owner}.share_embeddings needs equal vocabularies, got vocab_size={self.vocab_size} "
                f"and target_vocab_size={self.target_vocab_size}"
            )

    @property
    def start_id(self) -> int:
        """The first decoder input token: ``decoder_start_id``, else ``bos_id``.

        Returns
        -------
        int
            The id every target's decoder input, and every search, starts with.

        Notes
        -----
        Token batches, perplexity and the searches read this and never ``bos_id`` directly. A model must be
        decoded from the id it was trained with: a model converted from HuggingFace Marian was trained
        starting from its pad token, and decoding it from BOS would give poor output without any error.
        """
        return self.decoder_start_id if self.decoder_start_id is not None else self.bos_id

    @property
    def src_vocab_size(self) -> int:
        """Source vocabulary size.

        Returns
        -------
        int
            ``vocab_size``: the source embedding's rows.

        Notes
        -----
        An alias that reads symmetrically with :attr:`tgt_vocab_size`; ``vocab_size`` stays the stored field
        so that configs with one shared vocabulary, the paper's case, need only one number.
        """
        return self.vocab_size

    @property
    def tgt_vocab_size(self) -> int:
        """Target vocabulary size (``target_vocab_size`` or else ``vocab_size``).

        Returns
        -------
        int
            The target embedding's rows and the width of the output logits.

        Notes
        -----
        Read this, never ``target_vocab_size`` directly, which is None for a shared vocabulary. The special
        ids must lie below both vocabulary sizes (:meth:`check_special_tokens`).
        """
        return self.target_vocab_size if self.target_vocab_size is not None else self.vocab_size


class HasSpecialTokens(Protocol):
    """A model whose config carries the spec (both architectures' models do).

    Notes
    -----
    ``config`` is a read-only member here, so a model whose config is a subclass of :class:`SpecialTokens`
    satisfies the protocol.
    """

    @property
    def config(self) -> SpecialTokens:
        """The model's config.

        Returns
        -------
        SpecialTokens
            ``TransformerConfig`` or ``RNNConfig``.

        Notes
        -----
        Only the spec's names are read through this protocol.
        """
        ...


class SpecialTokenIds:
    """The ids a search needs, read from a wrapped model's config (a mixin of the step models).

    Notes
    -----
    A mixin: the step model sets ``self.model`` to the model it adapts. The step-model protocol (:class:`transformer.decoding.step_model.StepModel`) asks every architecture for
    the same three ids; both adapters answer from the model's config through this one class.
    """

    model: HasSpecialTokens

    @property
    def pad_id(self) -> int:
        """Id of the padding token (``model.config.pad_id``).

        Returns
        -------
        int
            ``model.config.pad_id``.

        Notes
        -----
        The same id marks source padding for the model's masks and for the searches' length limits, so both
        agree on what padding is.
        """
        return self.model.config.pad_id

    @property
    def bos_id(self) -> int:
        """Id of the first decoder input (``model.config.start_id``: ``decoder_start_id``, else ``bos_id``).

        Returns
        -------
        int
            ``model.config.start_id``.

        Notes
        -----
        Not necessarily the tokenizer's BOS: training starts every decoder input with ``start_id`` (an
        imported Marian model's is its pad token), and the search must feed what the model learned from.
        """
        return self.model.config.start_id

    @property
    def eos_id(self) -> int:
        """Id of the end-of-sentence token (``model.config.eos_id``).

        Returns
        -------
        int
            ``model.config.eos_id``.

        Notes
        -----
        The id the model was trained to end targets with; a search that stopped on another id would run to
        the length limit on every sentence.
        """
        return self.model.config.eos_id
