"""The work budget of a request: what each field costs, and the one line that refuses a request over it."""

import pytest

from transformer.config.decode import DecodeConfig
from transformer.config.search_limits import MIN_SENTENCE_CHARS
from transformer.serving.work_budget import (
    CHARS_PER_TOKEN,
    RequestWork,
    request_work,
    work_over_budget,
)


def test_ordinary_sentences_cost_their_characters() -> None:
    text = "A man in a blue shirt is standing on a ladder and smiling. Two young children are building a castle in the sand by the sea."
    work = request_work([text], DecodeConfig(), "en")
    assert work == RequestWork(
        text_chars=len(text), prefix_chars=0, sentences=2, cost=len(text), sentence_floor=50
    )
    assert work_over_budget(work, max_chars=len(text), max_queue=2) is None


def test_each_sentence_costs_at_least_the_minimum() -> None:
    work = request_work(["a"] * 1000, DecodeConfig(), "en", split=False)
    assert (work.text_chars, work.sentences, work.cost) == (1000, 1000, 1000 * MIN_SENTENCE_CHARS)
    assert work_over_budget(work, max_chars=5000, max_queue=1024) == (
        "text: 1000 characters in 1000 sentences count as 50000 (each at least 50), over the limit of 5000 "
        "(--max-chars)"
    )
    # A string is split as the translation splits it: three sentences, three minimums and the two spaces.
    assert request_work(["Run. Stop. Go."], DecodeConfig(), "en").cost == 3 * MIN_SENTENCE_CHARS + 2


def test_prefixes_count_and_keep_each_text_one_sentence() -> None:
    work = request_work(["x" * 100], DecodeConfig(), "en", prefixes=["y" * 13_500])
    assert (work.prefix_chars, work.sentences, work.cost) == (13_500, 1, 13_600)
    assert work_over_budget(work, max_chars=5000, max_queue=1024) == (
        "text and prefix: 13600 characters, over the limit of 5000 (--max-chars)"
    )
    # Two sentences, but one row: a text with a prefix is not split.
    assert request_work(["A. B."], DecodeConfig(), "en", prefixes=[""]).sentences == 1


def test_min_length_raises_the_floor_of_every_sentence() -> None:
    work = request_work(["a", "b"], DecodeConfig(min_length=1000), "en", split=False)
    assert work.sentence_floor == 1000 * CHARS_PER_TOKEN and work.cost == 2 * 4000
    assert work_over_budget(work, max_chars=5000, max_queue=1024) == (
        "text and min_length: 2 characters in 2 sentences count as 8000 (each at least 4000: min_length x 4), "
        "over the limit of 5000 (--max-chars)"
    )


@pytest.mark.parametrize(
    "config",
    [
        DecodeConfig(beam_size=16),
        DecodeConfig(mbr=16, mbr_candidates="beam"),
        DecodeConfig(sampling=True, nbest=16),
    ],
)
def test_the_search_width_is_capped_by_the_fields_not_counted(config: DecodeConfig) -> None:
    """A beam of 16 over one sentence costs what a beam of 1 does: the fields cap the width (module notes)."""
    text = "A dog sleeps in the sun beside the old red barn."
    assert request_work([text], config, "en") == request_work([text], DecodeConfig(beam_size=1), "en")


def test_libretranslate_wording_is_the_same_check_in_its_words() -> None:
    tiny = request_work(["a"] * 9, DecodeConfig(), "en", split=False)
    assert work_over_budget(tiny, 450, 9, "libretranslate") is None
    assert work_over_budget(tiny, 400, 1024, "libretranslate") == (
        "Invalid request: request (450; 9 sentences, each at least 50) exceeds text limit (400)"
    )
    assert work_over_budget(tiny, 1000, 8, "libretranslate") == (
        "Invalid request: request (9 sentences) exceeds the queue (8, --max-queue)"
    )
    long = request_work(["x" * 600], DecodeConfig(), "en")
    assert work_over_budget(long, 500, 8, "libretranslate") == (
        "Invalid request: request (600) exceeds text limit (500)"
    )
    for wording in ("native", "libretranslate"):  # one check: the two APIs agree on what fits
        assert (work_over_budget(long, 600, 8, wording) is None) and work_over_budget(long, 599, 8, wording)
    with pytest.raises(ValueError, match="wording='deepl' is not one of native, libretranslate"):
        work_over_budget(long, 600, 8, "deepl")


def test_markup_counts_as_text_and_splits_as_nothing() -> None:
    work = request_work(["Hello there, my friend."], DecodeConfig(), "en", markup_chars=7)  # <b></b>
    # 30 characters sent, and the 23-character sentence topped up to the minimum of 50: 57.
    assert (work.text_chars, work.sentences, work.cost) == (23 + 7, 1, 30 + MIN_SENTENCE_CHARS - 23)
    assert work_over_budget(work, 56, 8, "libretranslate") == (
        "Invalid request: request (57; 1 sentences, each at least 50) exceeds text limit (56)"
    )


def test_more_sentences_than_the_queue_holds_can_never_be_queued() -> None:
    work = request_work(["a"] * 9, DecodeConfig(), "en", split=False)
    assert work_over_budget(work, max_chars=10_000, max_queue=9) is None
    assert work_over_budget(work, max_chars=10_000, max_queue=8) == (
        "text: 9 sentences, more than the queue holds (8, --max-queue); send them in several requests"
    )
    both = work_over_budget(work, max_chars=100, max_queue=8)
    assert both is not None and "--max-chars" in both and "--max-queue" in both and "\n" not in both


def test_empty_texts_cost_nothing() -> None:
    work = request_work(["", "   "], DecodeConfig(), "en")
    assert (work.sentences, work.cost) == (0, 3)
