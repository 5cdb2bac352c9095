"""A cache of sentence translations: a repeated sentence (a UI string, boilerplate) is translated once.

Sound here because a sentence's translation does not depend on what it is batched with (tested for greedy,
beam, sampling with its per-sentence seed, MBR and the shortlist): the same model, search and sentence give the
same candidates, so an entry is keyed by everything that shapes them: the model's name, the request's full
:class:`~transformer.config.decode.DecodeConfig`, the forced prefix, whether and where alignments and flags were
computed, whether omissions were retried, and the sentence itself. The value is the sentence's candidates as
the request would have answered them (alignments and flags included).

Least recently used entries go first once either bound is passed: ``max_entries`` sentences or ``max_bytes``
of their estimated size. The cache lives on the event loop (``translate_texts`` reads and fills it there), so
it needs no lock. ``transformer serve --cache-size N`` turns it on; ``/metrics`` counts hits and misses.
"""

import sys
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass

from transformer.decoding.candidate import Candidate


@dataclass(frozen=True)
class CacheStats:
    """How a cache stands.

    Parameters
    ----------
    entries : int
        Sentences held.
    bytes : int
        Their estimated size.
    hits, misses : int
        Lookups answered from it, and not.

    Notes
    -----
    The hit rate is ``hits / (hits + misses)``.
    """

    entries: int
    bytes: int
    hits: int
    misses: int


def candidates_size(key: Hashable, candidates: list[Candidate]) -> int:
    """Estimate the memory an entry holds.

    Parameters
    ----------
    key : hashable
        The entry's key (its sentence is most of it).
    candidates : list of Candidate
        Its value.

    Returns
    -------
    int
        Bytes: the key's and texts' characters, 8 per token id and per alignment pair, and a fixed 200 per
        candidate and per entry for the objects around them.

    Notes
    -----
    An estimate, not ``sys.getsizeof`` of the whole graph: it bounds memory in proportion, which is what the
    byte limit is for, at a cost independent of Python's object layout.
    """
    size = 200 + sys.getsizeof(repr(key))
    for candidate in candidates:
        size += 200 + len(candidate.text.encode("utf-8")) + 8 * len(candidate.tokens)
        size += 16 * len(candidate.alignment or []) + 100 * len(candidate.flags or ())
    return size


class TranslationCache:
    """A least-recently-used map from a sentence's key to its candidates, bounded in entries and bytes.

    Parameters
    ----------
    max_entries : int
        Sentences held at most (at least 1).
    max_bytes : int
        Their estimated size at most (at least 1); an entry larger than this alone is not stored.

    Notes
    -----
    Candidates are frozen dataclasses and lists are copied in and out, so a caller cannot change an entry.
    """

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        if max_entries < 1 or max_bytes < 1:
            raise ValueError(
                f"a translation cache needs room: max_entries={max_entries}, max_bytes={max_bytes}"
            )
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._entries: OrderedDict[Hashable, tuple[list[Candidate], int]] = OrderedDict()
        self._bytes = self._hits = self._misses = 0

    def get(self, key: Hashable) -> list[Candidate] | None:
        """Look a sentence up, marking it recently used.

        Parameters
        ----------
        key : hashable
            The sentence's key.

        Returns
        -------
        list of Candidate or None
            A copy of its candidates, or None (a miss).

        Notes
        -----
        Counts the hit or the miss.
        """
        found = self._entries.get(key)
        if found is None:
            self._misses += 1
            return None
        self._entries.move_to_end(key)
        self._hits += 1
        return list(found[0])

    def put(self, key: Hashable, candidates: list[Candidate]) -> None:
        """Store a sentence's candidates, evicting the least recently used past either bound.

        Parameters
        ----------
        key : hashable
            The sentence's key.
        candidates : list of Candidate
            Its candidates (copied).

        Returns
        -------
        None

        Notes
        -----
        Storing a key again replaces its entry.
        """
        size = candidates_size(key, candidates)
        if key in self._entries:
            self._bytes -= self._entries.pop(key)[1]
        if size > self.max_bytes:
            return
        self._entries[key] = (list(candidates), size)
        self._bytes += size
        while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
            _, (_, evicted) = self._entries.popitem(last=False)
            self._bytes -= evicted

    @property
    def stats(self) -> CacheStats:
        """Report the cache's size and its hits and misses so far.

        Returns
        -------
        CacheStats
            Entries, bytes, hits, misses.

        Notes
        -----
        ``/metrics`` reads it for its gauges.
        """
        return CacheStats(len(self._entries), self._bytes, self._hits, self._misses)
