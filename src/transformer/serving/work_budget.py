"""The work a translation request asks for, measured before anything is queued, and the server's budget for it.

Every field that makes a request cost more counts: the characters of its texts and of its prefixes, the
number of sentences (each at least :data:`MIN_SENTENCE_CHARS`, so 1,000 one-character sentences cost like a
50,000-character text) and ``min_length`` (steps every sentence must decode). The search width (beam, MBR
candidates, samples) is not in the cost: the request fields cap it at
:data:`~transformer.serving.config.MAX_BEAM_SIZE`, so it multiplies a request's work by at most 16, and a
wide search is time-sliced with the running batch rather than refused; counting it would have to divide the
budget by the width (a default beam of 4 over a 5,000-character text must still fit), which only moves the
limit. :func:`request_work` is a pure function of the parsed request, so the edge can refuse a request over
the budget (413 naming the fields and the limit, or LibreTranslate's 400) and a scheduler can weigh the
requests it admits by the same measure.
"""

from dataclasses import dataclass

from transformer.config.decode import DecodeConfig
from transformer.config.search_limits import MIN_SENTENCE_CHARS
from transformer.serving.sentence_splitting import keep_as_one_sentence, split_into_sentences

#: Characters one decoder step forced by ``min_length`` counts as: about one BPE token of European text.
CHARS_PER_TOKEN = 4
#: How :func:`work_over_budget` words a refusal: this server's own API, or LibreTranslate's.
BUDGET_WORDINGS = ("native", "libretranslate")


@dataclass(frozen=True)
class RequestWork:
    """The work of one request, in the units the server's limits count.

    Parameters
    ----------
    text_chars : int
        Characters of all texts together, markup included (LibreTranslate's ``format: html`` counts it).
    prefix_chars : int
        Characters of all target prefixes together (forced decoder steps, one per token).
    sentences : int
        Sentences the texts split into: batch rows and queue places.
    cost : int
        Characters counted against ``--max-chars``: ``text_chars + prefix_chars``, plus, for each sentence
        shorter than :attr:`sentence_floor`, the difference.
    sentence_floor : int
        The least a sentence costs in this request: :data:`MIN_SENTENCE_CHARS`, or ``min_length`` times
        :data:`CHARS_PER_TOKEN` when that is more.

    Notes
    -----
    ``cost`` never falls below the characters sent, so a request of ordinary sentences costs exactly its
    length, as ``--max-chars`` always counted; only many short sentences or a large ``min_length`` cost more.
    """

    text_chars: int
    prefix_chars: int
    sentences: int
    cost: int
    sentence_floor: int


def request_work(
    texts: list[str],
    config: DecodeConfig,
    language: str,
    split: bool = True,
    prefixes: list[str] | None = None,
    markup_chars: int = 0,
) -> RequestWork:
    """Measure a request's work from its parsed fields, splitting its texts as the translation will.

    Parameters
    ----------
    texts : list of str
        The texts to translate.
    config : DecodeConfig
        The request's search (the model's settings with the request's options applied).
    language : str
        The model's source language, for the sentence splitter.
    split : bool
        Whether texts are split into sentences (a string ``text``) or each is one sentence (a list).
    prefixes : list of str or None
        One target prefix per text; each text is then one sentence, as
        :func:`~transformer.serving.translation_service.translate_texts` takes it.
    markup_chars : int
        Characters of markup taken out of ``texts`` before they came here: counted as text, split as
        nothing.

    Returns
    -------
    RequestWork
        Characters, sentences and cost.

    Notes
    -----
    Pure: it reads no server state, so the same request always costs the same. It splits with the function
    the translation uses, so ``sentences`` is exactly the number of queue places the request will take.
    """
    split = split and prefixes is None
    prefixes = prefixes or [""] * len(texts)
    floor = max(MIN_SENTENCE_CHARS, config.min_length * CHARS_PER_TOKEN)
    sentences = top_up = 0
    for text, prefix in zip(texts, prefixes, strict=True):
        pieces = split_into_sentences(text, language) if split else keep_as_one_sentence(text)
        for piece in pieces:
            if piece.sentence:
                sentences += 1
                top_up += max(0, floor - len(piece.sentence) - len(prefix))
    text_chars, prefix_chars = sum(map(len, texts)) + markup_chars, sum(map(len, prefixes))
    return RequestWork(text_chars, prefix_chars, sentences, text_chars + prefix_chars + top_up, floor)


def combined_work(works: list[RequestWork]) -> RequestWork:
    """Add up the work of a request's parts (LibreTranslate's texts translated by different models).

    Parameters
    ----------
    works : list of RequestWork
        Each part's work (none for an empty request: no work).

    Returns
    -------
    RequestWork
        Their sums, and the highest sentence floor.

    Notes
    -----
    The budget is the whole request's, however many models share it.
    """
    return RequestWork(
        sum(work.text_chars for work in works),
        sum(work.prefix_chars for work in works),
        sum(work.sentences for work in works),
        sum(work.cost for work in works),
        max((work.sentence_floor for work in works), default=MIN_SENTENCE_CHARS),
    )


def work_over_budget(
    work: RequestWork, max_chars: int, max_queue: int, wording: str = "native"
) -> str | None:
    """Say why a request can never be served within the server's limits, or None when it can.

    Parameters
    ----------
    work : RequestWork
        The request's work (:func:`request_work`).
    max_chars : int
        ``--max-chars``: the cost a request may have.
    max_queue : int
        ``--max-queue``: the sentences the queue holds, so the most one request can have queued.
    wording : {"native", "libretranslate"}
        This server's words naming the fields, or LibreTranslate's ("Invalid request: request (N) exceeds
        text limit (M)"), which its clients show as they are.

    Returns
    -------
    str or None
        One line naming the fields and the limit, such as "text: 1000 sentences count as 50000 characters
        (each at least 50), over the limit of 5000 (--max-chars)"; None within the budget.

    Raises
    ------
    ValueError
        For a wording not in :data:`BUDGET_WORDINGS`.

    Notes
    -----
    A request with more sentences than the whole queue holds would get 503 and ``Retry-After`` even from an
    idle server, and a client that obeys would retry forever: it is over the budget (413), not early. The
    two wordings word one check, so the two APIs never disagree on what fits.
    """
    if wording not in BUDGET_WORDINGS:
        raise ValueError(f"wording={wording!r} is not one of {', '.join(BUDGET_WORDINGS)}")
    over_chars, over_queue = work.cost > max_chars, work.sentences > max_queue
    if wording == "libretranslate":
        return _libretranslate_refusal(work, max_chars, max_queue, over_chars, over_queue)
    problems = []
    if over_chars:
        fields = "text and prefix" if work.prefix_chars else "text"
        sent = work.text_chars + work.prefix_chars
        if work.cost == sent:
            problems.append(f"{fields}: {sent} characters, over the limit of {max_chars} (--max-chars)")
        else:
            floor = f"each at least {work.sentence_floor}"
            if work.sentence_floor > MIN_SENTENCE_CHARS:
                fields += " and min_length"
                floor += f": min_length x {CHARS_PER_TOKEN}"
            problems.append(
                f"{fields}: {sent} characters in {work.sentences} sentences count as {work.cost} ({floor}), "
                f"over the limit of {max_chars} (--max-chars)"
            )
    if over_queue:
        problems.append(
            f"text: {work.sentences} sentences, more than the queue holds ({max_queue}, --max-queue); "
            "send them in several requests"
        )
    return "; ".join(problems) or None


def _libretranslate_refusal(
    work: RequestWork, max_chars: int, max_queue: int, over_chars: bool, over_queue: bool
) -> str | None:
    """Word the first limit a request passes as LibreTranslate words its character and batch limits."""
    if over_chars:
        sent = work.text_chars + work.prefix_chars
        why = (
            "" if work.cost == sent else f"; {work.sentences} sentences, each at least {work.sentence_floor}"
        )
        return f"Invalid request: request ({work.cost}{why}) exceeds text limit ({max_chars})"
    if over_queue:  # never queued, so not a 503 to retry
        return (
            f"Invalid request: request ({work.sentences} sentences) exceeds the queue "
            f"({max_queue}, --max-queue)"
        )
    return None
