"""Train or load the joint source/target byte-pair-encoding vocabulary (paper section 5.1).

The paper encodes English-German with "byte-pair encoding, which has a shared source-target
vocabulary of about 37000 tokens". We train one SentencePiece BPE model on sentences of both
languages mixed, so source and target share token ids, which is what lets the model share one
embedding matrix between encoder, decoder and pre-softmax projection (section 3.4). The training
itself (sampling, the SentencePiece trainer) is :mod:`transformer.data.pipeline.bpe_training`.

Special ids are fixed for every model this module trains or accepts: ``PAD_ID = 0``,
``BOS_ID = 1``, ``EOS_ID = 2``, ``UNK_ID = 3`` (pieces ``<pad>``, ``<s>``, ``</s>``, ``<unk>``,
:mod:`transformer.data.pipeline.special_tokens`), matching the defaults of
:class:`transformer.model.config.TransformerConfig`.
"""

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import sentencepiece

from transformer.atomic_files import write_bytes_atomically
from transformer.data.pipeline.bpe_training import SAMPLING_SEED, sample_sentences, train_model_bytes
from transformer.data.pipeline.special_tokens import BOS_ID, EOS_ID, PAD_ID, SPECIAL_PIECES, UNK_ID


def parse_sentencepiece_model(model_bytes: bytes, origin: str) -> Any:
    """Parse a serialized SentencePiece model, whatever its special ids.

    Parameters
    ----------
    model_bytes : bytes
        The serialized ModelProto.
    origin : str
        Where the bytes came from (a path, or "serialized model"), for error messages.

    Returns
    -------
    sentencepiece.SentencePieceProcessor
        The loaded processor.

    Raises
    ------
    ValueError
        ``"ORIGIN: not a SentencePiece model"`` when the bytes do not parse.

    Notes
    -----
    SentencePiece raises a bare RuntimeError with its own internals' message; this names the file instead.
    Our own models go through :func:`_load_processor`, which also checks the special ids; Marian's models
    (:mod:`transformer.data.pipeline.marian_tokenizer`) number them their own way and use this alone.
    """
    processor = sentencepiece.SentencePieceProcessor()
    try:
        processor.LoadFromSerializedProto(model_bytes)
    except RuntimeError:
        raise ValueError(f"{origin}: not a SentencePiece model") from None
    return processor


def _load_processor(model_bytes: bytes, origin: str) -> Any:
    """Parse a serialized SentencePiece model and check its special ids.

    Parameters
    ----------
    model_bytes : bytes
        The serialized ModelProto.
    origin : str
        Where the bytes came from (a path, or "serialized model"), for error messages.

    Returns
    -------
    sentencepiece.SentencePieceProcessor
        The loaded processor.

    Notes
    -----
    Raises ValueError if the bytes are not a model, or if its special pieces are not the fixed ids
    ``PAD_ID``, ``BOS_ID``, ``EOS_ID``, ``UNK_ID`` (e.g. a model trained by another tool).
    """
    processor = parse_sentencepiece_model(model_bytes, origin)
    found = {
        "pad_id": (processor.pad_id(), PAD_ID),
        "bos_id": (processor.bos_id(), BOS_ID),
        "eos_id": (processor.eos_id(), EOS_ID),
        "unk_id": (processor.unk_id(), UNK_ID),
    }
    for name, (actual, expected) in found.items():
        if actual != expected:
            raise ValueError(
                f"{origin}: {name} is {actual}, expected {expected}; train the model with Tokenizer.train"
            )
    return processor


class Tokenizer:
    """A joint source/target SentencePiece BPE vocabulary with fixed special ids.

    Parameters
    ----------
    model_bytes : bytes
        A serialized SentencePiece model whose special ids are ``PAD_ID``, ``BOS_ID``, ``EOS_ID``
        and ``UNK_ID``.
    model_path : pathlib.Path or None
        The file the model was read from or written to; None for a model that came from a
        checkpoint (:meth:`from_serialized`).

    Notes
    -----
    Build one with :meth:`train`, :meth:`load` or :meth:`from_serialized`. ``fingerprint`` is the
    SHA-256 of the model bytes: two tokenizers with equal fingerprints map text to the same ids.
    Text is normalized with SentencePiece's default ``nmt_nfkc`` rule (NFKC plus whitespace
    clean-up), so ``decode(encode(text))`` returns ``text`` for NFKC-normal, single-spaced text.
    Characters unseen in training map to ``UNK_ID`` and decode as " ⁇ ".
    """

    def __init__(self, model_bytes: bytes, model_path: Path | None = None) -> None:
        origin = str(model_path) if model_path is not None else "serialized model"
        self._processor = _load_processor(model_bytes, origin)
        self._model_bytes = model_bytes
        self.model_path = model_path
        self.fingerprint = hashlib.sha256(model_bytes).hexdigest()

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        model_path: Path,
        vocab_size: int,
        *,
        seed_sentences: int = 2_000_000,
        character_coverage: float = 1.0,
        user_symbols: Sequence[str] = (),
    ) -> "Tokenizer":
        """Learn a joint BPE vocabulary from sentences of both languages and save it.

        Parameters
        ----------
        texts : Iterable[str]
            Source and target sentences mixed, one sentence per item; empty items are skipped.
        model_path : pathlib.Path
            Where to write the model (its directory is created if missing).
        vocab_size : int
            Number of pieces including the four special ones (the paper: about 37000).
        seed_sentences : int
            At most this many sentences, drawn uniformly with a fixed seed, are used for training.
        character_coverage : float
            Fraction of characters the vocabulary must cover, in (0, 1]; 1.0 suits European languages.
        user_symbols : sequence of str
            Pieces that are always one token wherever they appear, e.g. the tag of tagged back-translation
            (``data.backtranslation_tag``); they take ids right after the special pieces.

        Returns
        -------
        Tokenizer
            The trained tokenizer, with ``model_path`` set.

        Notes
        -----
        Deterministic: the same sentences give a byte-identical model on any machine with the same
        SentencePiece version (sampling uses :func:`sample_sentences`, seeded). Training runs
        in memory and the file is replaced atomically, so a failure (empty corpus, ``vocab_size``
        larger than the corpus supports, for which the error states the maximum) leaves an existing
        ``model_path`` untouched. SentencePiece skips sentences over 4192 bytes.
        """
        if vocab_size <= len(SPECIAL_PIECES):
            raise ValueError(f"Tokenizer.train: vocab_size={vocab_size} must exceed {len(SPECIAL_PIECES)}")
        if seed_sentences <= 0:
            raise ValueError(f"Tokenizer.train: seed_sentences={seed_sentences} must be positive")
        if not 0.0 < character_coverage <= 1.0:
            raise ValueError(f"Tokenizer.train: character_coverage={character_coverage} must be in (0, 1]")
        sentences, _ = sample_sentences(texts, seed_sentences, SAMPLING_SEED)
        model_bytes = train_model_bytes(sentences, vocab_size, character_coverage, user_symbols)
        tokenizer = cls(model_bytes, Path(model_path))
        write_bytes_atomically(Path(model_path), model_bytes)
        return tokenizer

    @classmethod
    def load(cls, model_path: Path) -> "Tokenizer":
        """Read a model written by :meth:`train`.

        Parameters
        ----------
        model_path : pathlib.Path
            A SentencePiece ``.model`` file.

        Returns
        -------
        Tokenizer
            The loaded tokenizer.

        Raises
        ------
        FileNotFoundError
            For a missing file.
        OSError
            For a file that cannot be read.
        ValueError
            For a file that is not a SentencePiece model or whose special ids differ from the fixed ones.

        Notes
        -----
        The special ids are checked on load, since a model trained elsewhere with other ids would silently
        shift padding, BOS and EOS.
        """
        try:
            model_bytes = Path(model_path).read_bytes()
        except FileNotFoundError:
            raise FileNotFoundError(f"tokenizer model {model_path} does not exist") from None
        except OSError as error:
            raise OSError(f"cannot read tokenizer model {model_path}: {error.strerror}") from None
        return cls(model_bytes, Path(model_path))

    @classmethod
    def from_serialized(cls, data: bytes) -> "Tokenizer":
        """Rebuild a tokenizer from :meth:`serialized` bytes, e.g. embedded in a checkpoint.

        Parameters
        ----------
        data : bytes
            The serialized SentencePiece model.

        Returns
        -------
        Tokenizer
            The tokenizer, with ``model_path`` None.

        Notes
        -----
        The fingerprint equals that of the tokenizer the bytes came from.
        """
        return cls(bytes(data))

    def serialized(self) -> bytes:
        """Return the model as bytes, for embedding in a checkpoint.

        Returns
        -------
        bytes
            The serialized SentencePiece model; its SHA-256 is ``fingerprint``.

        Notes
        -----
        Identical to the content of ``model_path`` when the tokenizer came from a file.
        """
        return self._model_bytes

    @property
    def vocab_size(self) -> int:
        """Number of pieces, special pieces included.

        Returns
        -------
        int
            Token ids run from 0 to ``vocab_size - 1``; the four special ids are the lowest.

        Notes
        -----
        The vocabulary is joint, so this is both the source and the target size, which lets the two
        embeddings and the pre-softmax projection share one weight matrix (Section 3.4). Data preparation and
        training refuse a mismatch with ``model.vocab_size``, e.g. a run directory's tokenizer trained for
        another size.
        """
        return int(self._processor.get_piece_size())

    def encode(self, text: str) -> list[int]:
        """Split a sentence into subword ids.

        Parameters
        ----------
        text : str
            One sentence.

        Returns
        -------
        list[int]
            Token ids, without BOS or EOS.

        Notes
        -----
        An empty or whitespace-only text gives an empty list.
        """
        return list(self._processor.encode(text))

    def encode_target(self, text: str) -> list[int]:
        """Encode a target sentence; the vocabulary is joint, so this is :meth:`encode`.

        Parameters
        ----------
        text : str
            One target-language sentence.

        Returns
        -------
        list of int
            Token ids without BOS/EOS.

        Notes
        -----
        Exists for the ``TextTokenizer`` protocol, which also covers separate source/target vocabularies.
        """
        return self.encode(text)

    def encode_batch(self, texts: Sequence[str], num_threads: int | None = None) -> list[list[int]]:
        """Split many sentences into subword ids, using all CPU cores.

        Parameters
        ----------
        texts : Sequence[str]
            Sentences.
        num_threads : int or None
            SentencePiece's worker threads for this call; None for its default (all cores).

        Returns
        -------
        list[list[int]]
            Token ids per sentence, without BOS or EOS.

        Notes
        -----
        Same result as ``[encode(text) for text in texts]``.
        """
        if not texts:
            return []
        if num_threads is None:
            return [list(ids) for ids in self._processor.encode(list(texts))]
        return [list(ids) for ids in self._processor.encode(list(texts), num_threads=num_threads)]

    def decode(self, ids: Sequence[int]) -> str:
        """Turn token ids back into detokenized text.

        Parameters
        ----------
        ids : Sequence[int]
            Token ids, e.g. a model output; padding, BOS and EOS are dropped.

        Returns
        -------
        str
            The text, with SentencePiece's word-boundary marks turned back into spaces.

        Raises
        ------
        ValueError
            For an id outside ``[0, vocab_size)``.

        Notes
        -----
        PAD, BOS and EOS are dropped before decoding. ``UNK_ID`` decodes as " ⁇ ".
        """
        kept = [self._check_id(token_id) for token_id in ids]
        kept = [token_id for token_id in kept if token_id not in (PAD_ID, BOS_ID, EOS_ID)]
        return str(self._processor.decode(kept))

    def pieces(self, text: str) -> list[str]:
        """Split a sentence into subword pieces, e.g. to label attention plots.

        Parameters
        ----------
        text : str
            One sentence.

        Returns
        -------
        list[str]
            One piece per id of ``encode(text)``; "▁" marks the start of a word.

        Notes
        -----
        ``[id_to_piece(i) for i in encode(text)]`` gives the same list.
        """
        return list(self._processor.encode(text, out_type=str))

    def id_to_piece(self, token_id: int) -> str:
        """Return the piece of one token id.

        Parameters
        ----------
        token_id : int
            An id in ``[0, vocab_size)``.

        Returns
        -------
        str
            The piece, e.g. "▁Haus", or "<pad>" for ``PAD_ID``.

        Raises
        ------
        ValueError
            For an id outside the vocabulary.

        Notes
        -----
        Special ids are not dropped here, unlike in :meth:`decode`: PAD, BOS and EOS have pieces of their own.
        """
        return str(self._processor.id_to_piece(self._check_id(token_id)))

    def source_id_to_piece(self, token_id: int) -> str:
        """Return the piece of one source token id; the vocabulary is joint, so this is :meth:`id_to_piece`.

        Parameters
        ----------
        token_id : int
            An id in ``[0, vocab_size)``.

        Returns
        -------
        str
            The piece.

        Notes
        -----
        Part of the :class:`~transformer.data.pipeline.text_tokenizer.TextTokenizer` protocol, for models whose source
        and target vocabularies differ (imported Marian models): attention plots label the source axis with it.
        """
        return self.id_to_piece(token_id)

    def _check_id(self, token_id: int) -> int:
        token_id = int(token_id)
        if not 0 <= token_id < self.vocab_size:
            raise ValueError(f"token id {token_id} is outside the vocabulary [0, {self.vocab_size})")
        return token_id

    def __reduce__(self) -> tuple[type["Tokenizer"], tuple[bytes, Path | None]]:
        # The SentencePiece processor is a C++ object: pickle (e.g. for DataLoader workers) the bytes.
        return (Tokenizer, (self._model_bytes, self.model_path))

    def __repr__(self) -> str:
        return f"Tokenizer(vocab_size={self.vocab_size}, model_path={self.model_path}, fingerprint={self.fingerprint[:12]})"
