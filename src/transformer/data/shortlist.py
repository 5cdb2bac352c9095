"""A vocabulary shortlist: for each source piece, the target pieces a translation of it is likely to use.

Built from the training pairs by co-occurrence counts (:func:`build_shortlist`) and stored as one safetensors
file beside the checkpoint (:data:`SHORTLIST_FILE`). Decoding with it (:mod:`transformer.decoding.shortlist`)
scores, for each sentence, only the union of its source pieces' candidates, the most frequent target pieces
and the special tokens, instead of the whole vocabulary: Marian's, Sockeye's and CTranslate2's lexical
shortlists, computed here from the same training data the model learned from.

Why co-occurrence and not word alignments: the shortlist only has to *contain* the next token, not to say
which source word it translates, and the frequent pieces (function words, punctuation, subword glue) are added
to every sentence anyway. Counting, for every source piece s, the sentence pairs in which a target piece t
appears with it gives ``p(t | s) = c(s, t) / c(s)``; the candidates of s are its ``per_source`` most likely
targets *outside* the frequent set, whose places would otherwise go to pieces every sentence already has.
The build is one pass over the pairs and a sort (seconds for Multi30k's 29k pairs), with no dependency. An
aligner's table was measured too and covered fewer decoder steps at every size (eflomal on Multi30k: 93.1% at
455 pieces a sentence against 96.3% at 393; docs/shortlist.md): it links a piece only to the source piece it
translates, while the steps a shortlist misses are the pieces with no such partner.
"""

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load, save
from torch import Tensor

from transformer.atomic_files import write_bytes_atomically
from transformer.data.pipeline.text_tokenizer import TextTokenizer

#: The shortlist's file in a checkpoint directory (not a tokenizer file: the checkpoint code skips it).
SHORTLIST_FILE = "shortlist.safetensors"
#: The ``format`` metadata value that marks a file as written by :func:`save_shortlist`.
SHORTLIST_FORMAT = "transformer-vocabulary-shortlist-1"


class ShortlistError(ValueError):
    """A shortlist file that is missing, damaged, of another format, or built for another vocabulary.

    Notes
    -----
    The message is one line naming the file, as every other input error of the command line.
    """


@dataclass(frozen=True)
class Shortlist:
    """Target candidates per source piece, plus target pieces every sentence may use.

    Parameters
    ----------
    vocabulary : str
        Fingerprint of the vocabulary it was built for (:func:`vocabulary_fingerprint`).
    tgt_vocab_size : int
        Target vocabulary size; every id stored is below it.
    offsets : torch.Tensor, shape (src_vocab_size + 1,), int64
        Source piece ``s`` has candidates ``candidates[offsets[s]:offsets[s + 1]]``.
    candidates : torch.Tensor, shape (num_candidates,), int64
        Target ids, grouped by source piece, most likely first.
    always : torch.Tensor, shape (num_always,), int64
        Target ids in every sentence's shortlist: the frequent pieces and the special tokens.

    Notes
    -----
    A compressed sparse row table (as ``scipy.sparse.csr_matrix`` lays one out), so lookup is one slice per
    source piece and the file holds three integer arrays.
    """

    vocabulary: str
    tgt_vocab_size: int
    offsets: Tensor
    candidates: Tensor
    always: Tensor

    @property
    def src_vocab_size(self) -> int:
        """Source vocabulary size the table covers.

        Returns
        -------
        int
            ``len(offsets) - 1``.

        Notes
        -----
        A source id at or above it has no candidates (it cannot occur with the vocabulary it was built for).
        """
        return self.offsets.numel() - 1

    def sentence_tokens(self, src_ids: Sequence[int] | Tensor) -> Tensor:
        """List the target ids a sentence's translation may use: its pieces' candidates and the common ones.

        Parameters
        ----------
        src_ids : sequence of int or torch.Tensor, shape (src_len,), int64
            The sentence's source ids (padding may be included: its candidates are the padding's, none).

        Returns
        -------
        torch.Tensor, shape (num_tokens,), int64
            Sorted, distinct target ids.

        Notes
        -----
        Depends on the sentence alone, never on the other sentences of its batch, so a translation is the
        same in any batch, offline or in the server's continuous batch.
        """
        ids = sorted(set(torch.as_tensor(src_ids, dtype=torch.long).tolist()))
        offsets = self.offsets.tolist() if len(ids) > 64 else None
        pieces = [self.always]
        for source_id in ids:
            if 0 <= source_id < self.src_vocab_size:
                start, end = (
                    (offsets[source_id], offsets[source_id + 1])
                    if offsets is not None
                    else (int(self.offsets[source_id]), int(self.offsets[source_id + 1]))
                )
                pieces.append(self.candidates[start:end])
        return torch.unique(torch.cat(pieces))  # sorted


def vocabulary_fingerprint(tokenizer: TextTokenizer, src_vocab_size: int) -> str:
    """Fingerprint a tokenizer's source and target pieces, which a shortlist's ids refer to.

    Parameters
    ----------
    tokenizer : TextTokenizer
        The checkpoint's tokenizer.
    src_vocab_size : int
        The model's source vocabulary size (the target's is ``tokenizer.vocab_size``).

    Returns
    -------
    str
        The first 16 hex digits of a SHA-256 over every piece in id order, e.g. ``"3f9a0c1d2e4b5a68"``.

    Notes
    -----
    Computed from the pieces, not the tokenizer file's bytes, so the same vocabulary stored by another
    tokenizer layout (a re-saved SentencePiece model) keeps its fingerprint, while two vocabularies of the
    same size but other pieces differ.
    """
    digest = hashlib.sha256()
    for token_id in range(src_vocab_size):
        digest.update(tokenizer.source_id_to_piece(token_id).encode("utf-8") + b"\n")
    digest.update(b"\x00target\n")
    for token_id in range(tokenizer.vocab_size):
        digest.update(tokenizer.id_to_piece(token_id).encode("utf-8") + b"\n")
    return digest.hexdigest()[:16]


def build_shortlist(
    pairs: Iterable[tuple[Sequence[int], Sequence[int]]],
    src_vocab_size: int,
    tgt_vocab_size: int,
    special_ids: Sequence[int],
    vocabulary: str,
    per_source: int,
    frequent: int,
) -> Shortlist:
    """Count source-target co-occurrences over sentence pairs and keep each source piece's best targets.

    Parameters
    ----------
    pairs : iterable of (sequence of int, sequence of int)
        Source and target ids of each training pair (EOS and padding may be included).
    src_vocab_size, tgt_vocab_size : int
        Vocabulary sizes; ids outside them are refused.
    special_ids : sequence of int
        Target ids added to every sentence (padding, BOS, EOS, UNK).
    vocabulary : str
        The vocabulary's fingerprint, stored with the table.
    per_source : int
        Candidates kept per source piece (at least 0).
    frequent : int
        Most frequent target pieces (by token count, special tokens not counted) added to every sentence (at
        least 0); the whole vocabulary when it is at least its size.

    Returns
    -------
    Shortlist
        The table.

    Raises
    ------
    ValueError
        For a negative ``per_source`` or ``frequent``, no pairs, or an id outside its vocabulary.

    Notes
    -----
    ``c(s, t)`` counts the pairs holding both pieces (once per pair, however often each occurs), so a
    sentence repeating a piece does not outweigh many sentences; within a source piece, ranking by
    ``p(t | s) = c(s, t) / c(s)`` is ranking by ``c(s, t)``. Ties go to the lower target id, so the table is
    a function of the pairs alone. Frequent and special pieces are left out of the candidates: every
    sentence has them already.
    """
    if per_source < 0 or frequent < 0:
        raise ValueError(f"per_source and frequent must be at least 0, got {per_source} and {frequent}")
    keys: list[np.ndarray] = []
    target_counts = np.zeros(tgt_vocab_size, dtype=np.int64)
    for src_ids, tgt_ids in pairs:
        sources = np.unique(np.asarray(src_ids, dtype=np.int64))
        targets = np.asarray(tgt_ids, dtype=np.int64)
        if sources.size and (sources[0] < 0 or sources[-1] >= src_vocab_size):
            raise ValueError(f"a source id is outside the source vocabulary [0, {src_vocab_size})")
        if targets.size and (targets.min() < 0 or targets.max() >= tgt_vocab_size):
            raise ValueError(f"a target id is outside the target vocabulary [0, {tgt_vocab_size})")
        target_counts += np.bincount(targets, minlength=tgt_vocab_size)
        keys.append((sources[:, None] * tgt_vocab_size + np.unique(targets)[None, :]).ravel())
    if not keys:
        raise ValueError("no sentence pairs to build a shortlist from")
    special = np.asarray(special_ids, dtype=np.int64)
    target_counts[special] = -1  # special tokens are added anyway: --frequent counts real pieces
    order = np.lexsort((np.arange(tgt_vocab_size), -target_counts))  # most frequent first, ties by id
    always = np.union1d(order[: min(frequent, tgt_vocab_size - special.size)], special)
    pair_keys, pair_counts = np.unique(np.concatenate(keys), return_counts=True)
    sources, targets = pair_keys // tgt_vocab_size, pair_keys % tgt_vocab_size
    keep = ~np.isin(targets, always)
    sources, targets, pair_counts = sources[keep], targets[keep], pair_counts[keep]
    ranked = np.lexsort((targets, -pair_counts, sources))  # by source, then most co-occurring, then id
    sources, targets = sources[ranked], targets[ranked]
    per_piece = np.bincount(sources, minlength=src_vocab_size)
    starts = np.concatenate([[0], np.cumsum(per_piece)[:-1]])
    kept = (np.arange(sources.size) - starts[sources]) < per_source
    offsets = np.concatenate([[0], np.cumsum(np.minimum(per_piece, per_source))])
    return Shortlist(
        vocabulary=vocabulary,
        tgt_vocab_size=tgt_vocab_size,
        offsets=torch.from_numpy(offsets.astype(np.int64)),
        candidates=torch.from_numpy(targets[kept].astype(np.int64)),
        always=torch.from_numpy(always.astype(np.int64)),
    )


def save_shortlist(shortlist: Shortlist, path: Path) -> None:
    """Write a shortlist file atomically, replacing only a shortlist file.

    Parameters
    ----------
    shortlist : Shortlist
        The table.
    path : Path
        Destination, usually ``CHECKPOINT/shortlist.safetensors``.

    Returns
    -------
    None

    Raises
    ------
    ShortlistError
        When ``path`` exists and is not a shortlist file (or is a directory): it is left as it was.

    Notes
    -----
    Written to a temporary sibling and renamed (:func:`~transformer.atomic_files.write_bytes_atomically`),
    so a reader sees the old file or the new one, never a part. A file this function wrote (its ``format``
    metadata says so) is replaced: rebuilding with other options is the normal way to change a shortlist.
    """
    check_shortlist_destination(path)
    tensors = {"offsets": shortlist.offsets, "candidates": shortlist.candidates, "always": shortlist.always}
    metadata = {
        "format": SHORTLIST_FORMAT,
        "vocabulary": shortlist.vocabulary,
        "tgt_vocab_size": str(shortlist.tgt_vocab_size),
    }
    write_bytes_atomically(
        path, save({name: tensor.contiguous() for name, tensor in tensors.items()}, metadata)
    )


def check_shortlist_destination(path: Path) -> None:
    """Refuse to write a shortlist over anything but a shortlist file.

    Parameters
    ----------
    path : Path
        Where a shortlist would be written.

    Returns
    -------
    None

    Raises
    ------
    ShortlistError
        When ``path`` exists and is not a regular file (a directory, a FIFO, a device), or is a file whose
        metadata does not mark it as a shortlist.

    Notes
    -----
    Called before the pairs are counted as well as by :func:`save_shortlist`, so a wrong ``--output`` fails at
    once rather than after the whole corpus has been read.
    """
    # is_file first: a FIFO or a device is refused unread (opening it to read the header would block or eat it).
    if path.exists() and (not path.is_file() or _file_format(path) != SHORTLIST_FORMAT):
        raise ShortlistError(
            f"{path}: exists and is not a shortlist file written by `transformer shortlist`; not replacing it "
            f"(move it away or choose another --output)"
        )


def load_shortlist(path: Path, vocabulary: str | None = None) -> Shortlist:
    """Read a shortlist file, refusing a damaged one or one built for another vocabulary.

    Parameters
    ----------
    path : Path
        The file.
    vocabulary : str or None
        The fingerprint the caller's model needs; None accepts any.

    Returns
    -------
    Shortlist
        The table.

    Raises
    ------
    ShortlistError
        One line naming the file: missing, not a shortlist, damaged (ids out of range, offsets that do not
        add up), or ``built for vocabulary X, the checkpoint's is Y``.

    Notes
    -----
    Every invariant :meth:`Shortlist.sentence_tokens` relies on is checked here, once, so a file edited by
    hand fails at load with its name rather than mid-translation.
    """
    if not path.is_file():
        raise ShortlistError(f"{path}: no such shortlist file (build one with `transformer shortlist`)")
    try:
        tensors = load(path.read_bytes())
        metadata = _file_metadata(path)
    except (SafetensorError, OSError, ValueError) as error:
        raise ShortlistError(f"{path}: not a readable shortlist file ({error})") from None
    if metadata.get("format") != SHORTLIST_FORMAT:
        raise ShortlistError(f"{path}: not a shortlist file (no format {SHORTLIST_FORMAT!r} in its metadata)")
    built_for = metadata.get("vocabulary", "")
    if vocabulary is not None and built_for != vocabulary:
        raise ShortlistError(
            f"{path}: built for vocabulary {built_for}, the checkpoint's is {vocabulary}; rebuild it with "
            f"`transformer shortlist`"
        )
    shortlist = _checked_shortlist(path, tensors, metadata)
    return shortlist


def _checked_shortlist(path: Path, tensors: dict[str, Tensor], metadata: dict[str, str]) -> Shortlist:
    """Build a :class:`Shortlist` from a file's tensors, refusing any that break its invariants."""
    names = {"offsets", "candidates", "always"}
    if set(tensors) != names or any(tensors[name].dtype != torch.int64 for name in names):
        raise ShortlistError(f"{path}: damaged shortlist (expected int64 tensors {sorted(names)})")
    offsets, candidates, always = tensors["offsets"], tensors["candidates"], tensors["always"]
    try:
        tgt_vocab_size = int(metadata.get("tgt_vocab_size", ""))
    except ValueError:
        raise ShortlistError(f"{path}: damaged shortlist (no target vocabulary size)") from None
    ids = torch.cat([candidates, always])
    if (
        offsets.dim() != 1
        or offsets.numel() < 1
        or int(offsets[0]) != 0
        or int(offsets[-1]) != candidates.numel()
        or bool((offsets[1:] < offsets[:-1]).any())
        or (ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= tgt_vocab_size))
    ):
        raise ShortlistError(f"{path}: damaged shortlist (offsets or ids out of range)")
    return Shortlist(metadata["vocabulary"], tgt_vocab_size, offsets, candidates, always)


def _file_metadata(path: Path) -> dict[str, str]:
    """Read a safetensors file's string metadata from its header (``{}`` when it has none)."""
    with path.open("rb") as file:
        length = int.from_bytes(file.read(8), "little")
        if length <= 0 or length > 100_000_000:
            raise ValueError("no safetensors header")
        header = json.loads(file.read(length))
    metadata = header.get("__metadata__", {}) if isinstance(header, dict) else {}
    return {str(key): str(value) for key, value in metadata.items()} if isinstance(metadata, dict) else {}


def _file_format(path: Path) -> str | None:
    """Read a file's ``format`` metadata; None when it is not a safetensors file with one."""
    try:
        return _file_metadata(path).get("format")
    except (OSError, ValueError):
        return None
