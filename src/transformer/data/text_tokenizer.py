"""What the translator needs from a tokenizer, whichever toolkit's vocabulary it wraps."""

from typing import Protocol, runtime_checkable


@runtime_checkable
class TextTokenizer(Protocol):
    """Turns raw text into model token ids and back.

    Notes
    -----
    :class:`transformer.data.tokenizer.Tokenizer` (this project's joint BPE) and the Marian vocabulary adapter
    in :mod:`transformer.interop` both satisfy it. Ids exclude BOS/EOS: the caller adds them.
    """

    @property
    def vocab_size(self) -> int:
        """Number of token ids."""

    def encode(self, text: str) -> list[int]:
        """Encode one source sentence into token ids (no BOS/EOS)."""

    def encode_target(self, text: str) -> list[int]:
        """Encode one target sentence (a reference) into token ids (no BOS/EOS)."""

    def decode(self, ids: list[int]) -> str:
        """Decode target token ids into detokenised text, skipping special tokens."""

    def id_to_piece(self, token_id: int) -> str:
        """Return the subword string of one target id (for attention plots)."""

    def source_id_to_piece(self, token_id: int) -> str:
        """Return the subword string of one source id (for attention plots)."""
