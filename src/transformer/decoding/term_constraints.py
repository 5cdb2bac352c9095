"""Target terms a translation must contain, and the bookkeeping of how far each hypothesis has got.

Lexically constrained decoding with dynamic beam allocation (Post and Vilar, 2018): every sentence brings
a list of target phrases (token ids) that must appear in its output, in any order, each once per time it is
listed. A hypothesis's :class:`TermProgress` records which phrases it has completed and the one it is in
the middle of; a token that does not continue that phrase abandons it (the tokens it had matched stop
counting), so a phrase counts only when its tokens are generated one after another. The search groups its
candidates into banks by the number of constraint tokens met (:func:`allocate_banks`) so that hypotheses
that have begun a term are not crowded out by the ones that have not.
"""

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TermProgress:
    """How far one hypothesis has got through its sentence's target phrases.

    Parameters
    ----------
    phrases : tuple of tuple of int
        The sentence's target phrases (token ids), shared by all its hypotheses.
    met : tuple of bool
        Per phrase, whether the hypothesis contains it already.
    current : int or None
        The phrase whose first ``position`` tokens the hypothesis ends with, or None.
    position : int
        Tokens of ``current`` matched so far (0 when ``current`` is None).
    just_met : bool
        Whether the last token completed a phrase: the next token must then begin a new word, so that the term
        stays a word of its own ("Baum", not "Baums"; the search forbids the pieces that continue a word).

    Notes
    -----
    Immutable: :meth:`advance` returns a new record, so beams that share a history can share its progress.
    When two unmet phrases start with the same token, the first listed is begun; the other can still be
    met later. A phrase inside another (``Hund`` and ``Hundehütte``) is met when either is generated.
    """

    phrases: tuple[tuple[int, ...], ...]
    met: tuple[bool, ...]
    current: int | None = None
    position: int = 0
    just_met: bool = False

    @classmethod
    def start(cls, phrases: Sequence[Sequence[int]]) -> "TermProgress":
        """Begin a hypothesis that has met nothing.

        Parameters
        ----------
        phrases : sequence of sequence of int
            The target phrases; each non-empty.

        Returns
        -------
        TermProgress
            No phrase met, none begun.

        Raises
        ------
        ValueError
            For an empty phrase, which no hypothesis could be said to contain.

        Notes
        -----
        An empty list of phrases gives a progress that is always complete: the search then behaves as plain
        beam search.
        """
        packed = tuple(tuple(int(token) for token in phrase) for phrase in phrases)
        if any(not phrase for phrase in packed):
            raise ValueError("a target term encodes to no tokens")
        return cls(packed, (False,) * len(packed))

    @property
    def total_tokens(self) -> int:
        """The number of constraint tokens of the sentence.

        Returns
        -------
        int
            The summed length of the phrases.

        Notes
        -----
        A hypothesis's bank is the number it has met, from 0 to this.
        """
        return sum(len(phrase) for phrase in self.phrases)

    @property
    def tokens_met(self) -> int:
        """Constraint tokens this hypothesis has met: its completed phrases and the begun one's prefix.

        Returns
        -------
        int
            Between 0 and :attr:`total_tokens`; the hypothesis's bank.

        Notes
        -----
        Counting tokens rather than phrases (as Post and Vilar do) lets a hypothesis half-way through a long
        term rank above one that has not begun it.
        """
        done = sum(len(phrase) for phrase, met in zip(self.phrases, self.met, strict=True) if met)
        return done + self.position

    @property
    def complete(self) -> bool:
        """Whether every phrase has been met, so the hypothesis may end.

        Returns
        -------
        bool
            True when no phrase is left.

        Notes
        -----
        The search forbids EOS to incomplete hypotheses; only the length limit ends them.
        """
        return all(self.met)

    def next_tokens(self) -> list[int]:
        """List the tokens that would bring this hypothesis closer to its constraints.

        Returns
        -------
        list of int
            The begun phrase's next token, and the first token of every other unmet phrase (distinct, in
            phrase order).

        Notes
        -----
        The search adds each as a candidate extension whatever its probability, so that a term the model
        finds unlikely can still enter the beam (its bank keeps it there).
        """
        tokens: list[int] = []
        if self.current is not None:
            tokens.append(self.phrases[self.current][self.position])
        for index, (phrase, met) in enumerate(zip(self.phrases, self.met, strict=True)):
            if not met and index != self.current and phrase[0] not in tokens:
                tokens.append(phrase[0])
        return tokens

    def advance(self, token: int) -> "TermProgress":
        """Return the progress after generating ``token``.

        Parameters
        ----------
        token : int
            The new token.

        Returns
        -------
        TermProgress
            Continuing the begun phrase when ``token`` is its next token (and marking it met when it is the
            last); otherwise abandoning it and beginning (or meeting, for a one-token phrase) the first unmet
            phrase that starts with ``token``.

        Notes
        -----
        An abandoned phrase's tokens may be where another phrase starts, so ``token`` is always tried as a
        new beginning once the current phrase fails.
        """
        if self.current is not None:
            phrase = self.phrases[self.current]
            if phrase[self.position] == token:
                if self.position + 1 < len(phrase):
                    return TermProgress(self.phrases, self.met, self.current, self.position + 1)
                return TermProgress(self.phrases, _with_met(self.met, self.current), just_met=True)
        for index, (phrase, met) in enumerate(zip(self.phrases, self.met, strict=True)):
            if not met and phrase[0] == token:
                if len(phrase) == 1:
                    return TermProgress(self.phrases, _with_met(self.met, index), just_met=True)
                return TermProgress(self.phrases, self.met, index, 1)
        if self.current is None and not self.just_met:
            return self
        return TermProgress(self.phrases, self.met)


def _with_met(met: tuple[bool, ...], index: int) -> tuple[bool, ...]:
    """Copy ``met`` with phrase ``index`` marked met."""
    return tuple(value or position == index for position, value in enumerate(met))


def allocate_banks(banks: Sequence[int], scores: Sequence[float], beam_size: int) -> list[int]:
    """Choose the candidates that continue, dividing the beam between banks (dynamic beam allocation).

    Parameters
    ----------
    banks : sequence of int
        Per candidate, its bank: the constraint tokens it has met.
    scores : sequence of float
        Per candidate, its summed log-probability (``-inf`` for an impossible one, never chosen).
    beam_size : int
        How many to choose.

    Returns
    -------
    list of int
        Indices of the chosen candidates, best score first; fewer than ``beam_size`` only when fewer are
        possible.

    Notes
    -----
    Post and Vilar (2018), section 3, divide the beam over all ``C + 1`` banks of ``C`` constraint tokens.
    With more constraint tokens than beam slots that leaves the banks just above 0 without a slot (4 // 11 is
    0), so a hypothesis that has begun a long term competes by score alone and loses to those that have
    not: the term is never met. Here the beam is divided over the banks that hold a candidate: each gets
    ``beam_size // occupied`` slots, the remainder going to the banks that have met the most, and a bank with
    fewer candidates than slots gives the unused ones to the best remaining candidates of any bank, by score.
    With no constraints there is one bank and this is plain top-``beam_size`` selection.
    """
    possible = [index for index, score in enumerate(scores) if score != float("-inf")]
    by_score = sorted(possible, key=lambda index: (-scores[index], index))
    occupied = sorted({banks[index] for index in possible}, reverse=True)  # most met first
    chosen: list[int] = []
    for rank, bank in enumerate(occupied):
        slots = beam_size // len(occupied) + (rank < beam_size % len(occupied))
        chosen.extend([index for index in by_score if banks[index] == bank][:slots])
    taken = set(chosen)
    chosen.extend([index for index in by_score if index not in taken][: beam_size - len(chosen)])
    return sorted(chosen, key=lambda index: (-scores[index], index))
