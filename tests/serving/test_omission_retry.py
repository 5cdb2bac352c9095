"""``serve --retry-omissions``: where a flagged sentence is split, how the pieces' translations join, when a
retry is kept, and the server doing it for real (its answers, its /metrics counts)."""

import asyncio
import math
import re

import pytest

from transformer.decoding.candidate import Candidate, QualityFlag
from transformer.decoding.quality_flags import FlagThresholds
from transformer.decoding.translator import Translator
from transformer.serving.config import ServeConfig
from transformer.serving.omission_retry import (
    joined_candidate,
    omission_pieces,
    omitted_words,
    retry_omissions,
)
from transformer.serving.worker_errors import QueueFullError


def test_a_sentence_splits_where_its_unread_words_start_or_after_them_at_the_start() -> None:
    assert omission_pieces("a man rides a red bike", (3, 6)) == ["a man rides", "a red bike"]
    assert omission_pieces("a man rides a red bike", (0, 2)) == ["a man", "rides a red bike"]
    assert omission_pieces("two  spaces here", (1, 2)) == ["two", "spaces here"]
    assert omission_pieces("all of it", (0, 3)) is None


def test_joined_pieces_sum_their_scores_and_average_their_steps_confidence() -> None:
    first = Candidate("ein Mann", -1.0, -2.0, [5, 6], confidence=0.5)
    second = Candidate("fährt", -0.5, -1.0, [7], confidence=0.8)
    joined = joined_candidate([first, second], [5, 6, 7], "ein Mann fährt")
    assert (joined.text, joined.tokens, joined.score, joined.log_prob) == (
        "ein Mann fährt",
        [5, 6, 7],
        -1.5,
        -3.0,
    )
    # Three steps at 0.5 and two at 0.8: the geometric mean over the five.
    assert joined.confidence == pytest.approx(math.exp((3 * math.log(0.5) + 2 * math.log(0.8)) / 5))
    assert joined_candidate([first, Candidate("x", 0, 0, [8])], [5, 6, 8], "x").confidence is None
    assert (
        joined_candidate([first, Candidate("x", 0, 0, [8], confidence=0.0)], [5, 6, 8], "x").confidence == 0
    )
    assert omitted_words([QualityFlag("repetition", 2.0, target_span=(0, 2))]) == 0
    assert omitted_words([QualityFlag("omission", 3.0, source_span=(2, 6))]) == 3  # its content words
    assert omitted_words(None) == 0


def _flagged(text: str, tokens: list[int], unread: tuple[int, int] | None) -> Candidate:
    flags = (QualityFlag("omission", float(unread[1] - unread[0]), source_span=unread),) if unread else ()
    return Candidate(text, -1.0, -1.0, tokens, confidence=0.5, flags=flags)


def test_a_retry_is_kept_only_when_it_leaves_fewer_words_unread() -> None:
    sentences = ["a b c d", "e f g h", "i j", "k l m"]
    candidates = [
        [_flagged("A", [1], (1, 4)), _flagged("A2", [2], None)],  # retried and better: replaced, rank 2 kept
        [_flagged("E", [3], (2, 4))],  # retried, no better: kept
        [_flagged("I", [4], None)],  # not flagged: not retried
        [_flagged("K", [5], (0, 3))],  # all unread: nothing to split, counted as kept
    ]
    asked: list[list[str]] = []

    async def translate(texts: list[str]) -> list[list[Candidate]]:
        asked.append(texts)
        return [[Candidate(text.upper(), -0.5, -0.5, [ord(text[0])], confidence=0.9)] for text in texts]

    async def add_flags(found: list[list[Candidate]], sources: list[list[int]]) -> list[list[Candidate]]:
        assert sources == [[10], [20]]  # flagged against the whole sentence's source
        unread = {"A B C D": None, "E F G H": (2, 4)}
        return [[_flagged(c.text, c.tokens, unread[c.text]) for c in row] for row in found]

    sources = [[10], [20], [30], [40]]
    result, outcomes = asyncio.run(retry_omissions(sentences, candidates, sources, translate, add_flags))

    async def full(texts: list[str]) -> list[list[Candidate]]:
        raise QueueFullError("the queue is full")

    kept, skipped = asyncio.run(retry_omissions(sentences, candidates, sources, full, add_flags))
    assert kept == candidates and skipped == {"replaced": 0, "kept": 0, "unsplit": 1, "skipped": 2}
    assert asked == [["a", "b c d", "e f", "g h"]]
    assert [[c.text for c in found] for found in result] == [["A B C D", "A2"], ["E"], ["I"], ["K"]]
    assert result[0][0].tokens == [ord("a"), ord("b")] and result[0][0].flags == ()
    assert outcomes == {"replaced": 1, "kept": 1, "unsplit": 1}


def test_the_server_retries_flagged_sentences_and_counts_them(
    make_client, served_run, valid_sentences
) -> None:
    translator = Translator.from_checkpoint(served_run, device="cpu")
    # Two validation sentences per row: the tiny model leaves part of such a long input unread on every CPU
    # kind tried (the first 16 sentences alone had an omission on the AVX-512 EPYC, none of them on the AMX Xeon).
    sentences = [
        f"{first} {second}"
        for first, second in zip(valid_sentences[0:16:2], valid_sentences[1:16:2], strict=True)
    ]
    offline = translator.translate_nbest(sentences, flags=FlagThresholds())
    flagged = [
        index for index, [best] in enumerate(offline)
        if omitted_words(best.flags) and omission_pieces(sentences[index], next(
            f.source_span for f in best.flags or () if f.kind == "omission")) is not None  # type: ignore[arg-type]
    ]  # fmt: skip
    assert flagged, "the tiny model should omit something in 8 two-sentence rows"
    client = make_client(retry_omissions=True)
    reply = client.post("/v1/translate", json={"text": sentences}).json()
    assert "flags" not in reply["sentences"][0][0]  # computed for the retry, not asked for
    for index, (sentence, [best]) in enumerate(zip(sentences, offline, strict=True)):
        if index not in flagged:
            assert reply["translation"][index] == best.text
        else:
            span = next(f.source_span for f in best.flags or () if f.kind == "omission")
            pieces = omission_pieces(sentence, span)  # type: ignore[arg-type]
            assert pieces is not None
            joined = " ".join(translator.translate(pieces))
            assert reply["translation"][index] in (best.text, joined)
    metrics = client.get("/metrics").text
    counts = {
        outcome: float(value)
        for outcome, value in re.findall(
            r'omission_retries_total\{model="default",outcome="(\w+)"\} (\S+)', metrics
        )
    }
    assert counts["replaced"] + counts["kept"] == len(flagged)  # retried; the others were unsplit
    changed = sum(reply["translation"][i] != offline[i][0].text for i in flagged)
    assert counts["replaced"] >= changed
    asked = client.post("/v1/translate", json={"text": sentences[flagged[0]], "flags": True}).json()
    assert "flags" in asked["sentences"][0][0]


def test_retry_omissions_is_refused_for_ctranslate2(tmp_path) -> None:
    with pytest.raises(ValueError, match="--engine ctranslate2 --retry-omissions"):
        ServeConfig(
            checkpoints={"m": tmp_path}, engine="ctranslate2", batching="request", retry_omissions=True
        )
