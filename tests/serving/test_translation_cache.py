"""The translation cache: least recently used first out, bounded in entries and bytes, and through the server a
cached answer equal to the computed one, keyed by every setting that shapes it."""

import re

import pytest

from transformer.decoding.candidate import Candidate
from transformer.serving.config import ServeConfig
from transformer.serving.translation_cache import TranslationCache, candidates_size


def candidate(text: str, tokens: int = 3) -> Candidate:
    return Candidate(text, -1.0, -2.0, list(range(tokens)), confidence=0.5)


def test_the_least_recently_used_goes_first_past_the_entries_bound() -> None:
    cache = TranslationCache(max_entries=2, max_bytes=10**6)
    cache.put("a", [candidate("A")])
    cache.put("b", [candidate("B")])
    assert cache.get("a") == [candidate("A")]  # a is now the most recent
    cache.put("c", [candidate("C")])
    assert cache.get("b") is None and cache.get("a") is not None and cache.get("c") is not None
    stats = cache.stats
    assert (stats.entries, stats.hits, stats.misses) == (2, 3, 1)


def test_the_bytes_bound_evicts_and_an_entry_too_big_alone_is_not_kept() -> None:
    one = candidates_size("k0", [candidate("x" * 100)])
    cache = TranslationCache(max_entries=100, max_bytes=2 * one + 10)
    for index in range(3):
        cache.put(f"k{index}", [candidate("x" * 100)])
    assert cache.stats.entries == 2 and cache.get("k0") is None and cache.stats.bytes <= 2 * one + 10
    cache.put("huge", [candidate("y" * 10_000)])
    assert cache.get("huge") is None and cache.stats.entries == 2
    # Replacing a key counts its bytes once.
    before = cache.stats.bytes
    cache.put("k2", [candidate("x" * 100)])
    assert cache.stats.bytes == before
    # What is handed out is a copy: changing it does not change the entry.
    found = cache.get("k2")
    assert found is not None
    found.append(candidate("z"))
    assert cache.get("k2") == [candidate("x" * 100)]
    with pytest.raises(ValueError, match="needs room"):
        TranslationCache(0, 10)


def _hits_and_misses(client) -> tuple[float, float]:
    text = client.get("/metrics").text
    values = dict(re.findall(r'cache_lookups_total\{model="default",result="(\w+)"\} (\S+)', text))
    return float(values.get("hit", 0)), float(values.get("miss", 0))


def test_a_cached_answer_equals_the_computed_one_and_settings_are_part_of_the_key(
    make_client, valid_sentences
) -> None:
    text = f"{valid_sentences[0]} {valid_sentences[1]}"
    plain = make_client().post("/v1/translate", json={"text": text, "nbest": 2, "beam": 2}).json()
    client = make_client(cache_size=100)
    first = client.post("/v1/translate", json={"text": text, "nbest": 2, "beam": 2}).json()
    assert _hits_and_misses(client) == (0, 2)
    second = client.post("/v1/translate", json={"text": text, "nbest": 2, "beam": 2}).json()
    assert _hits_and_misses(client) == (2, 2)
    for reply in (first, second):
        assert reply["translation"] == plain["translation"] and reply["sentences"] == plain["sentences"]
    # Another search, flags, alignments: other keys, so computed (misses), each as asked.
    client.post("/v1/translate", json={"text": valid_sentences[0], "beam": 3})
    flagged = client.post("/v1/translate", json={"text": valid_sentences[0], "flags": True}).json()
    again = client.post("/v1/translate", json={"text": valid_sentences[0]}).json()
    assert "flags" in flagged["sentences"][0][0] and "flags" not in again["sentences"][0][0]
    assert _hits_and_misses(client) == (2, 5)
    assert "transformer_serve_cache_entries 5.0" in client.get("/metrics").text
    # LibreTranslate's endpoint shares the cache: its search (the model's beam, one candidate) was the last one's.
    reply = client.post("/translate", json={"q": valid_sentences[0], "source": "en", "target": "de"})
    assert reply.json()["translatedText"] == again["translation"] and _hits_and_misses(client) == (3, 5)


def test_cache_settings_are_checked(tmp_path) -> None:
    with pytest.raises(ValueError, match="cache_size=-1"):
        ServeConfig(checkpoints={"m": tmp_path}, cache_size=-1)
    with pytest.raises(ValueError, match="cache_bytes=0"):
        ServeConfig(checkpoints={"m": tmp_path}, cache_bytes=0)
