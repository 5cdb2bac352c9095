"""HuggingFace Marian's vocabulary: SentencePiece pieces mapped to model ids through ``vocab.json``.

An OPUS-MT directory holds ``source.spm`` and ``target.spm`` (SentencePiece models that only *split* text)
and ``vocab.json`` (piece -> model id; the SentencePiece models' own ids are not the model's). With
``separate_vocabs`` in ``tokenizer_config.json``, target ids come from ``target_vocab.json`` instead. This
adapter reproduces ``transformers.MarianTokenizer``'s ids without importing ``transformers``. It lives with
the project's own tokenizer because a converted checkpoint carries it and must translate without
:mod:`transformer.interop`, which only converts.
"""

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from transformer.data.pipeline.tokenizer import parse_sentencepiece_model

SOURCE_SPM_FILE = "source.spm"
TARGET_SPM_FILE = "target.spm"
VOCAB_FILE = "vocab.json"
TARGET_VOCAB_FILE = "target_vocab.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
REQUIRED_FILES = (SOURCE_SPM_FILE, TARGET_SPM_FILE, VOCAB_FILE)
OPTIONAL_FILES = (TARGET_VOCAB_FILE, TOKENIZER_CONFIG_FILE)
WORD_BOUNDARY = "▁"  # SentencePiece's word-start mark


def parse_vocabulary(data: bytes, origin: str) -> list[str]:
    """Read a Marian ``vocab.json`` into the list of pieces indexed by model id.

    Parameters
    ----------
    data : bytes
        The JSON file: an object mapping each piece to its id.
    origin : str
        The file name, for error messages.

    Returns
    -------
    list of str
        ``pieces[i]`` is the piece of id ``i``.

    Raises
    ------
    ValueError
        Naming the file when it is not a JSON object of integer ids, or the ids are not exactly
        ``0 .. len - 1``, each once.

    Notes
    -----
    The ids must be exactly ``0 .. len - 1``, each once: the list is indexed by id, so a gap or a repeat would
    shift every later piece onto the wrong id without an error.
    """
    try:
        mapping = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise ValueError(f"{origin}: not valid JSON ({error})") from None
    if not isinstance(mapping, dict) or not all(
        isinstance(token_id, int) and not isinstance(token_id, bool) for token_id in mapping.values()
    ):
        raise ValueError(f"{origin}: expected a JSON object mapping pieces to integer ids")
    pieces: list[str | None] = [None] * len(mapping)
    for piece, token_id in mapping.items():
        if not 0 <= token_id < len(mapping) or pieces[token_id] is not None:
            raise ValueError(
                f"{origin}: ids must be 0 .. {len(mapping) - 1}, each used once; "
                f"piece {piece!r} has id {token_id}"
            )
        pieces[token_id] = piece
    return [piece for piece in pieces if piece is not None]


def _special_token(settings: Mapping[str, Any], key: str, default: str) -> str:
    """Read a special token from ``tokenizer_config.json``, written as a string or an AddedToken dict."""
    value = settings.get(key, default)
    if isinstance(value, dict):
        value = value.get("content", default)
    return str(value) if value is not None else default


class MarianTokenizer:
    """Text to HuggingFace Marian model ids and back, as ``transformers.MarianTokenizer`` does it.

    Parameters
    ----------
    files : mapping of str to bytes
        ``source.spm``, ``target.spm`` and ``vocab.json``; optionally ``target_vocab.json`` and
        ``tokenizer_config.json``.
    origin : str
        Where the files came from (a directory), for error messages.

    Notes
    -----
    Satisfies :class:`transformer.data.pipeline.text_tokenizer.TextTokenizer`: :meth:`encode` is the source side,
    :meth:`encode_target`, :meth:`decode`, :meth:`id_to_piece` and :attr:`vocab_size` the target side. Like
    ``transformers.MarianTokenizer``, encoding first splits off special tokens written literally in the text
    (``</s>``, ``<unk>``, ``<pad>`` and the config's additional special tokens) and a leading language code
    such as ``>>fra<<``, encodes the rest with ``source.spm`` (``target.spm`` for targets) into pieces, and
    maps each piece through ``vocab.json`` (``target_vocab.json`` for separate targets; a piece missing from
    it becomes ``<unk>``). Decoding drops every special token (as
    ``skip_special_tokens=True`` does, ``<unk>`` included) and joins the pieces with the SentencePiece model
    of the target side (``source.spm`` when the vocabulary is shared, as ``transformers`` does).
    """

    def __init__(self, files: Mapping[str, bytes], origin: str = "Marian tokenizer") -> None:
        missing = [name for name in REQUIRED_FILES if name not in files]
        if missing:
            raise ValueError(f"{origin}: missing Marian tokenizer file(s) {missing}")
        self.origin = origin
        self._files = {
            name: bytes(files[name]) for name in (*REQUIRED_FILES, *OPTIONAL_FILES) if name in files
        }
        settings = self._read_settings()
        self.separate_vocabs = bool(settings.get("separate_vocabs", False))
        self._source_pieces = parse_vocabulary(self._files[VOCAB_FILE], f"{origin}/{VOCAB_FILE}")
        self._target_pieces = self._source_pieces
        if self.separate_vocabs:
            if TARGET_VOCAB_FILE not in self._files:
                raise ValueError(f"{origin}: separate_vocabs is true but {TARGET_VOCAB_FILE} is missing")
            self._target_pieces = parse_vocabulary(
                self._files[TARGET_VOCAB_FILE], f"{origin}/{TARGET_VOCAB_FILE}"
            )
        self._source_ids = {piece: token_id for token_id, piece in enumerate(self._source_pieces)}
        self._target_ids = {piece: token_id for token_id, piece in enumerate(self._target_pieces)}
        self.unk_token = _special_token(settings, "unk_token", "<unk>")
        self.eos_token = _special_token(settings, "eos_token", "</s>")
        self.pad_token = _special_token(settings, "pad_token", "<pad>")
        for name, token in (("unk_token", self.unk_token), ("eos_token", self.eos_token)):
            if token not in self._source_ids:
                raise ValueError(f"{origin}/{VOCAB_FILE}: the {name} {token!r} is not in the vocabulary")
        self._source_spm = parse_sentencepiece_model(
            self._files[SOURCE_SPM_FILE], f"{origin}/{SOURCE_SPM_FILE}"
        )
        self._target_spm = parse_sentencepiece_model(
            self._files[TARGET_SPM_FILE], f"{origin}/{TARGET_SPM_FILE}"
        )
        # transformers joins decoded pieces with the source model unless the vocabularies are separate.
        self._decoding_spm = self._target_spm if self.separate_vocabs else self._source_spm
        self._special_tokens = self._collect_special_tokens(settings)
        self._special_pattern = re.compile(
            "("
            + "|".join(re.escape(token) for token in sorted(self._special_tokens, key=len, reverse=True))
            + ")"
        )
        self.fingerprint = self._compute_fingerprint()

    @classmethod
    def load(cls, directory: Path) -> "MarianTokenizer":
        """Read a Marian tokenizer from a directory.

        Parameters
        ----------
        directory : Path
            A HuggingFace Marian model directory, or a checkpoint converted from one.

        Returns
        -------
        MarianTokenizer
            The tokenizer.

        Raises
        ------
        ValueError
            Naming the directory and the missing or malformed file.

        Notes
        -----
        Every file is read into memory here, so the tokenizer does not depend on the directory once loaded.
        """
        directory = Path(directory)
        files = {}
        for name in (*REQUIRED_FILES, *OPTIONAL_FILES):
            path = directory / name
            if path.is_file():
                files[name] = path.read_bytes()
        return cls(files, origin=str(directory))

    def _read_settings(self) -> dict[str, Any]:
        if TOKENIZER_CONFIG_FILE not in self._files:
            return {}
        try:
            settings = json.loads(self._files[TOKENIZER_CONFIG_FILE].decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as error:
            raise ValueError(f"{self.origin}/{TOKENIZER_CONFIG_FILE}: not valid JSON ({error})") from None
        if not isinstance(settings, dict):
            raise ValueError(f"{self.origin}/{TOKENIZER_CONFIG_FILE}: expected a JSON object")
        return settings

    def _collect_special_tokens(self, settings: Mapping[str, Any]) -> dict[str, int]:
        """Map every token that ``transformers`` splits off before SentencePiece to its source id."""
        tokens = [self.eos_token, self.unk_token, self.pad_token]
        tokens += [
            token if isinstance(token, str) else str(token.get("content", ""))
            for token in settings.get("additional_special_tokens") or []
        ]
        special = {token: self._source_id(token) for token in tokens if token}
        for token_id, token in (settings.get("added_tokens_decoder") or {}).items():
            if isinstance(token, dict) and token.get("content"):
                special[str(token["content"])] = int(token_id)
        return special

    def _compute_fingerprint(self) -> str:
        digest = hashlib.sha256()
        for name in sorted(self._files):
            digest.update(name.encode("utf-8") + b"\0" + len(self._files[name]).to_bytes(8, "little"))
            digest.update(self._files[name])
        return digest.hexdigest()

    def files(self) -> dict[str, bytes]:
        """Return the tokenizer's files, to store them beside converted weights.

        Returns
        -------
        dict of str to bytes
            File name to contents, as given to the constructor (known names only).

        Notes
        -----
        ``MarianTokenizer(tokenizer.files())`` rebuilds an identical tokenizer (same fingerprint).
        """
        return dict(self._files)

    @property
    def vocab_size(self) -> int:
        """Number of target ids, the decoder's vocabulary.

        Returns
        -------
        int
            Length of ``target_vocab.json`` with ``separate_vocabs``, else of ``vocab.json``.

        Notes
        -----
        The target side because :class:`~transformer.data.pipeline.text_tokenizer.TextTokenizer` means the output
        layer's size: the translator checks it against ``tgt_vocab_size`` and the import against
        ``config.json``'s ``decoder_vocab_size``.
        """
        return len(self._target_pieces)

    @property
    def source_vocab_size(self) -> int:
        """Number of source ids, the encoder's vocabulary.

        Returns
        -------
        int
            Length of ``vocab.json``.

        Notes
        -----
        Differs from :attr:`vocab_size` only with ``separate_vocabs``; the import checks it against
        ``config.json``'s ``vocab_size`` so that no source id can index past the encoder's embedding.
        """
        return len(self._source_pieces)

    @property
    def pad_id(self) -> int:
        """Id of the padding token in the source vocabulary.

        Returns
        -------
        int
            The id of ``pad_token`` (``"<pad>"`` by default), or :attr:`unk_id` if the vocabulary lacks it.

        Notes
        -----
        Marian models usually start decoding from this token (``config.json``'s ``decoder_start_token_id``
        is the pad id), where our own models start from BOS. The fallback to ``<unk>`` is how
        ``transformers`` looks up any token missing from the vocabulary.
        """
        return self._source_id(self.pad_token)

    @property
    def eos_id(self) -> int:
        """Id of the end-of-sentence token in the source vocabulary.

        Returns
        -------
        int
            The id of ``eos_token`` (``"</s>"`` by default).

        Notes
        -----
        :meth:`encode` leaves EOS for the caller to append, as with our own tokenizer. The import refuses a
        model whose ``config.json`` ``eos_token_id`` differs, since EOS ends both the source and the search.
        """
        return self._source_ids[self.eos_token]

    @property
    def unk_id(self) -> int:
        """Id of the unknown token in the source vocabulary.

        Returns
        -------
        int
            The id of ``unk_token`` (``"<unk>"`` by default).

        Notes
        -----
        ``config.json`` has no ``unk_token_id``, so the import takes the model config's ``unk_id`` from here.
        The constructor refuses a vocabulary without it, because every unknown piece maps to it.
        """
        return self._source_ids[self.unk_token]

    def source_pieces(self) -> list[str]:
        """Return the source pieces in id order.

        Returns
        -------
        list of str
            ``pieces[i]`` is the piece of source id ``i``.

        Notes
        -----
        The vocabulary CTranslate2 registers for the encoder. CTranslate2 takes tokens as strings and maps them
        back to ids by position in this list, so it must hold every id, special ones included, in order.
        """
        return list(self._source_pieces)

    def target_pieces(self) -> list[str]:
        """Return the target pieces in id order.

        Returns
        -------
        list of str
            ``pieces[i]`` is the piece of target id ``i``.

        Notes
        -----
        The vocabulary CTranslate2 registers for the decoder. Equal to :meth:`source_pieces` unless
        ``separate_vocabs``, in which case the same id names different pieces on the two sides.
        """
        return list(self._target_pieces)

    def _source_id(self, piece: str) -> int:
        return self._source_ids.get(piece, self._source_ids[self.unk_token])

    def encode(self, text: str) -> list[int]:
        """Split a source sentence into Marian source ids.

        Parameters
        ----------
        text : str
            One sentence, optionally starting with a target-language code such as ``>>fra<<``.

        Returns
        -------
        list of int
            Source ids without the final EOS (``transformers`` appends it; so does our translator).

        Notes
        -----
        Equal to ``transformers.MarianTokenizer(text)["input_ids"][:-1]`` (tested). A leading language code
        is looked up whole in the vocabulary, not split by SentencePiece; a multilingual model reads it as
        the target language.
        """
        return self._encode(text, self._source_spm, self._source_ids)

    def encode_target(self, text: str) -> list[int]:
        """Split a target sentence (e.g. a reference) into Marian target ids.

        Parameters
        ----------
        text : str
            One target-language sentence.

        Returns
        -------
        list of int
            Target ids without the final EOS: ``target.spm`` pieces mapped through the target vocabulary.

        Notes
        -----
        Equal to ``transformers.MarianTokenizer(text_target=text)["input_ids"][:-1]`` (tested). A special
        token written in the text keeps its source-vocabulary id even with ``separate_vocabs``, because
        ``transformers`` looks special tokens up once, in the source vocabulary.
        """
        return self._encode(text, self._target_spm, self._target_ids)

    def _encode(self, text: str, processor: Any, vocabulary: dict[str, int]) -> list[int]:
        """Split off special tokens and a language code, then map SentencePiece pieces through ``vocabulary``."""
        unk_id = vocabulary.get(self.unk_token, self.unk_id)
        ids: list[int] = []
        for segment in self._special_pattern.split(text):
            if not segment:
                continue
            if segment in self._special_tokens:
                # transformers looks special tokens up once, in the source vocabulary.
                ids.append(self._special_tokens[segment])
                continue
            code_end = segment.find("<<") if segment.startswith(">>") else -1
            if code_end != -1:
                ids.append(vocabulary.get(segment[: code_end + 2], unk_id))
                segment = segment[code_end + 2 :]
            ids.extend(vocabulary.get(piece, unk_id) for piece in processor.encode(segment, out_type=str))
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        """Turn target ids into detokenised text, dropping special tokens.

        Parameters
        ----------
        ids : sequence of int
            Target ids, e.g. a model output.

        Returns
        -------
        str
            The text; equal to ``transformers.MarianTokenizer.decode(ids, skip_special_tokens=True)``.

        Raises
        ------
        ValueError
            For an id outside ``[0, vocab_size)``.

        Notes
        -----
        The pieces are joined with ``source.spm`` unless ``separate_vocabs``, as ``transformers`` does, even
        though they are target pieces.
        """
        special_ids = {self._target_ids[token] for token in self._special_tokens if token in self._target_ids}
        pieces = [self.id_to_piece(token_id) for token_id in ids if int(token_id) not in special_ids]
        return str(self._decoding_spm.decode_pieces(pieces)).replace(WORD_BOUNDARY, " ").strip()

    def id_to_piece(self, token_id: int) -> str:
        """Return the target piece of one id.

        Parameters
        ----------
        token_id : int
            An id in ``[0, vocab_size)``.

        Returns
        -------
        str
            The piece, e.g. "▁Haus" or "</s>".

        Raises
        ------
        ValueError
            For an id outside the target vocabulary.

        Notes
        -----
        A target piece: with ``separate_vocabs`` a source id must go through :meth:`source_id_to_piece`
        instead.
        """
        token_id = int(token_id)
        if not 0 <= token_id < self.vocab_size:
            raise ValueError(f"token id {token_id} is outside the vocabulary [0, {self.vocab_size})")
        return self._target_pieces[token_id]

    def source_id_to_piece(self, token_id: int) -> str:
        """Return the source piece of one id.

        Parameters
        ----------
        token_id : int
            An id in ``[0, source_vocab_size)``.

        Returns
        -------
        str
            The piece, e.g. "▁house".

        Raises
        ------
        ValueError
            For an id outside the source vocabulary.

        Notes
        -----
        With ``separate_vocabs`` a source id names a different piece than the same target id, so attention
        plots must label the encoder axis with this, not :meth:`id_to_piece`.
        """
        token_id = int(token_id)
        if not 0 <= token_id < len(self._source_pieces):
            raise ValueError(
                f"source token id {token_id} is outside the source vocabulary [0, {len(self._source_pieces)})"
            )
        return self._source_pieces[token_id]

    def __repr__(self) -> str:
        return (
            f"MarianTokenizer(origin={self.origin!r}, vocab_size={self.vocab_size}, "
            f"separate_vocabs={self.separate_vocabs}, fingerprint={self.fingerprint[:12]})"
        )
