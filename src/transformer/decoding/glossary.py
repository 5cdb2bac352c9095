"""Glossaries: source terms and the target terms their translations must use.

A glossary is a list of (source term, target term) pairs, read from a tab-separated file
(``transformer translate --glossary FILE``) or given in a request (``"glossary": {"dog": "Hund"}``). Each source
sentence is searched for its source terms (whole words, case-insensitive, the longest term first where terms
overlap); every match adds its target term to the sentence's constraints, which
:func:`~transformer.decoding.constrained_beam_search.constrained_beam_search` makes the translation contain.
The target term is used exactly as written: inflection ("Hunde", "Hundes") is the entry's business.
"""

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from transformer.data.pipeline.text_tokenizer import TextTokenizer

#: SentencePiece's mark of a piece that begins a word.
WORD_START = "\u2581"


class GlossaryError(ValueError):
    """A glossary file or field that cannot be read as (source term, target term) pairs.

    Notes
    -----
    The message names the file and line (or the request field) and what is wrong with it, on one line.
    """


@dataclass(frozen=True)
class GlossaryEntry:
    """One glossary pair.

    Parameters
    ----------
    source : str
        The source term, as matched in source sentences (whole words, any case).
    target : str
        The target term the translation must contain, exactly as written.
    origin : str
        Where it was given, for messages: ``FILE line N`` or ``glossary entry N``.

    Notes
    -----
    Both terms are stripped of surrounding white space; inner white space is matched as any run of spaces.
    """

    source: str
    target: str
    origin: str


@dataclass(frozen=True)
class TermMatch:
    """A source term found in a sentence.

    Parameters
    ----------
    entry : GlossaryEntry
        The glossary pair.
    start : int
        Character offset of the match in the sentence.
    end : int
        Character offset just past it.

    Notes
    -----
    Matches never overlap; the search reports them left to right.
    """

    entry: GlossaryEntry
    start: int
    end: int


class Glossary:
    """A checked list of glossary pairs and the pattern that finds their source terms.

    Parameters
    ----------
    entries : iterable of GlossaryEntry
        The pairs; the same source term twice (in any case) must have the same target term.

    Raises
    ------
    GlossaryError
        For an empty term, a term with a control character, or one source term with two target terms
        (naming both places).

    Notes
    -----
    One regular expression holds every source term, longest first, so at each position the longest term
    wins ("New York City" over "New York"); look-arounds for word characters and hyphens on both sides keep a
    term from matching inside a word ("cat" in "category", "four" in "four-wheeler"), in any script Python's
    ``re`` knows word characters of.
    """

    def __init__(self, entries: Iterable[GlossaryEntry]) -> None:
        self.entries: list[GlossaryEntry] = []
        by_key: dict[str, GlossaryEntry] = {}
        for entry in entries:
            _check_term(entry.source, "source", entry.origin)
            _check_term(entry.target, "target", entry.origin)
            key = _key(entry.source)
            earlier = by_key.get(key)
            if earlier is not None:
                if earlier.target != entry.target:
                    raise GlossaryError(
                        f"{entry.origin}: source term {entry.source!r} has target {entry.target!r} here and "
                        f"{earlier.target!r} at {earlier.origin}"
                    )
                continue
            by_key[key] = entry
            self.entries.append(entry)
        self._by_key = by_key
        terms = sorted(by_key, key=len, reverse=True)
        alternatives = "|".join(r"\s+".join(map(re.escape, term.split())) for term in terms)
        self._pattern = (
            re.compile(rf"(?<![\w-])(?:{alternatives})(?![\w-])", re.IGNORECASE) if terms else None
        )

    def __len__(self) -> int:
        """Count the distinct pairs.

        Returns
        -------
        int
            Entries kept (a repeated identical pair counts once).

        Notes
        -----
        An empty glossary is allowed and changes nothing.
        """
        return len(self.entries)

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[str, str]], name: str = "glossary") -> "Glossary":
        """Build a glossary from (source, target) pairs, e.g. a request's field.

        Parameters
        ----------
        pairs : iterable of (str, str)
            The pairs, in order.
        name : str
            What messages call them: entry N of ``name``.

        Returns
        -------
        Glossary
            The checked glossary.

        Raises
        ------
        GlossaryError
            As for the constructor, naming ``name`` and the entry (from 1).

        Notes
        -----
        Terms are stripped of surrounding white space, as the file reader does.
        """
        return cls(
            GlossaryEntry(str(source).strip(), str(target).strip(), f"{name} entry {number}")
            for number, (source, target) in enumerate(pairs, start=1)
        )

    @classmethod
    def from_file(cls, path: str | Path) -> "Glossary":
        """Read a tab-separated glossary: ``source term<TAB>target term`` per line.

        Parameters
        ----------
        path : str or pathlib.Path
            The file (UTF-8; blank lines are skipped).

        Returns
        -------
        Glossary
            Its pairs in file order.

        Raises
        ------
        GlossaryError
            For a file that does not exist, is a directory, cannot be read or is not UTF-8, and for a line that
            is not two non-empty tab-separated fields, naming the file and the line.

        Notes
        -----
        No quoting and no comments: a term may hold any character but a tab or a line break, so a line
        starting with ``#`` is an entry like any other.
        """
        path = Path(path)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise GlossaryError(f"--glossary {path}: no such file") from None
        except IsADirectoryError:
            raise GlossaryError(f"--glossary {path}: is a directory, not a tab-separated file") from None
        except OSError as error:  # unreadable: permissions, a broken link, a device that fails
            raise GlossaryError(f"--glossary {path}: cannot read it ({error.strerror or error})") from None
        lines = []
        for number, raw in enumerate(data.split(b"\n"), start=1):
            try:
                lines.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                raise GlossaryError(f"--glossary {path} line {number}: not UTF-8") from None
        return cls.from_lines(lines, f"--glossary {path}")

    @classmethod
    def from_lines(cls, lines: Iterable[str], name: str) -> "Glossary":
        """Parse lines of ``source term<TAB>target term`` (a file's, or a request field's text).

        Parameters
        ----------
        lines : iterable of str
            The lines, with or without their line ends (CRLF or LF).
        name : str
            What messages call the lines' origin: ``NAME line N``.

        Returns
        -------
        Glossary
            The pairs in order.

        Raises
        ------
        GlossaryError
            For a line that is not two non-empty tab-separated fields, naming ``name`` and the line.

        Notes
        -----
        Blank lines are skipped (and still counted, so line numbers are the file's).
        """
        entries = []
        for number, raw in enumerate(lines, start=1):
            line = raw.removesuffix("\n").removesuffix("\r")
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != 2:
                raise GlossaryError(
                    f"{name} line {number}: expected 'source term<TAB>target term', found "
                    f"{len(fields)} tab-separated field{'s' if len(fields) != 1 else ''}"
                )
            entries.append(GlossaryEntry(fields[0].strip(), fields[1].strip(), f"{name} line {number}"))
        return cls(entries)

    def matches(self, sentence: str) -> list[TermMatch]:
        """Find the glossary's source terms in a sentence.

        Parameters
        ----------
        sentence : str
            A raw source sentence.

        Returns
        -------
        list of TermMatch
            Non-overlapping matches, left to right.

        Notes
        -----
        Matching is on the raw text, not the model's subwords, so it does not depend on how the tokenizer
        splits a term.
        """
        if self._pattern is None:
            return []
        return [
            TermMatch(self._entry_for(found.group()), found.start(), found.end())
            for found in self._pattern.finditer(sentence)
        ]

    def _entry_for(self, text: str) -> GlossaryEntry:
        """Return the entry whose source term matched ``text``.

        Looked up by the case-folded key; where ``re``'s case-insensitive matching and ``str.casefold``
        disagree (a few letters, such as the dotted capital I), by matching each term against ``text``.
        """
        entry = self._by_key.get(_key(text))
        if entry is not None:
            return entry
        for candidate in self.entries:
            pattern = r"\s+".join(map(re.escape, candidate.source.split()))
            if re.fullmatch(pattern, text, re.IGNORECASE):
                return candidate
        raise AssertionError(f"no glossary entry matches {text!r}")

    def target_terms(self, sentence: str) -> list[str]:
        """List the target terms a sentence's translation must contain, one per match.

        Parameters
        ----------
        sentence : str
            A raw source sentence.

        Returns
        -------
        list of str
            Target terms in the order their source terms appear; a term matched twice is listed twice.

        Notes
        -----
        What the term-use measurement checks for (``benchmarks.glossary``).
        """
        return [match.entry.target for match in self.matches(sentence)]

    def constraints(self, sentence: str, tokenizer: TextTokenizer) -> list[list[int]]:
        """Encode the target terms a sentence needs as token ids, for the constrained search.

        Parameters
        ----------
        sentence : str
            A raw source sentence.
        tokenizer : TextTokenizer
            The model's tokenizer; each term is encoded as target text on its own.

        Returns
        -------
        list of list of int
            One phrase per match (terms that encode to nothing are left out).

        Notes
        -----
        A term encoded alone begins with the word-start piece (``▁Hund``), as it would after a space in a
        sentence; a term glued to what precedes it (after a hyphen, say) would be spelled otherwise there.
        """
        phrases = [tokenizer.encode_target(term) for term in self.target_terms(sentence)]
        return [phrase for phrase in phrases if phrase]


def word_continuation_ids(tokenizer: TextTokenizer) -> list[int]:
    """List the target pieces that continue the word before them rather than begin one.

    Parameters
    ----------
    tokenizer : TextTokenizer
        The model's tokenizer (SentencePiece pieces: a word-initial piece starts with ``▁``).

    Returns
    -------
    list of int
        Ids of the pieces without the word-start mark whose first character is a letter or a digit.

    Notes
    -----
    The constrained search forbids them right after a term, so ``▁Baum`` is not followed by ``s`` into
    "Baums": before this rule most of the terms the Multi30k model missed with a glossary (38 of 1,561
    matches) were met as tokens and lost as words that way. Punctuation pieces (``.``, ``,``) continue a
    word too and stay allowed.
    """
    ids = []
    for token_id in range(tokenizer.vocab_size):
        piece = tokenizer.id_to_piece(token_id)
        if piece and not piece.startswith(WORD_START) and piece[0].isalnum():
            ids.append(token_id)
    return ids


def _key(term: str) -> str:
    """Return the case- and spacing-insensitive form a term is looked up by."""
    return " ".join(term.casefold().split())


def _check_term(term: str, side: str, origin: str) -> None:
    """Refuse an empty term, or one with a control character or an unpaired surrogate (no file line holds one)."""
    if not term.strip():
        raise GlossaryError(f"{origin}: the {side} term is empty")
    for position, character in enumerate(term, start=1):
        if unicodedata.category(character) in ("Cc", "Cs"):
            raise GlossaryError(
                f"{origin}: the {side} term holds U+{ord(character):04X} at character {position} (a control "
                "character or unpaired surrogate)"
            )
