"""Issue #28's decoding options through ``POST /v1/translate``: each equals ``transformer translate``'s result.

Sampling, MBR, prefixes, n-gram blocking and ensembles take the worker's request-batching path (the offline
search) even under continuous batching; length bounds run in the step-level batch; alignments are computed
after the search. Each is compared with the offline ``Translator`` given the same settings.
"""

import dataclasses
import threading
from pathlib import Path

import pytest

from transformer.decoding.alignment import format_pharaoh
from transformer.decoding.candidate import Candidate
from transformer.decoding.quality_flags import FlagThresholds
from transformer.decoding.translator import Translator


@pytest.fixture(scope="module")
def translator(served_run: Path) -> Translator:
    """The offline translator of the served model."""
    return Translator.from_checkpoint(served_run, device="cpu")


def offline(translator: Translator, sentences: list[str], prefixes: list[str] | None = None, **settings):
    """Candidates of ``sentences`` with the model's settings changed by ``settings``."""
    settings.setdefault("nbest", 1)
    model_settings = translator.decode_config
    translator.decode_config = dataclasses.replace(model_settings, **settings)
    try:
        return translator.translate_nbest(sentences, prefixes=prefixes)
    finally:
        translator.decode_config = model_settings


def texts_of(reply: dict) -> list[list[str]]:
    """Per text, its sentence's n-best translations."""
    return [[item["translation"] for item in text[0]["nbest"]] for text in reply["sentences"]]


@pytest.mark.parametrize("batching", ["continuous", "request"])
def test_seeded_sampling_is_the_offline_samples_whatever_the_batch(
    make_client, translator: Translator, valid_sentences: list[str], batching: str
) -> None:
    client = make_client(batching=batching)
    sentences = valid_sentences[:4]
    request = {"text": sentences, "sampling": True, "nbest": 3, "seed": 7, "top_k": 20, "temperature": 1.3}
    expected = offline(translator, sentences, sampling=True, nbest=3, seed=7, top_k=20, temperature=1.3)
    first = client.post("/v1/translate", json=request).json()
    alone = client.post("/v1/translate", json={**request, "text": sentences[2:3]}).json()
    assert texts_of(first) == [[item.text for item in found] for found in expected]
    assert texts_of(alone)[0] == texts_of(first)[2]  # its batch mates change nothing
    other_seed = client.post("/v1/translate", json={**request, "seed": 8}).json()
    assert texts_of(other_seed) != texts_of(first)


def test_mbr_is_the_offline_mbr_with_its_expected_utility(
    make_client, translator: Translator, valid_sentences: list[str]
) -> None:
    client = make_client()
    sentences = valid_sentences[4:7]
    reply = client.post(
        "/v1/translate", json={"text": sentences, "mbr": 6, "nbest": 2, "seed": 3, "mbr_utility": "bleu"}
    )
    assert reply.status_code == 200, reply.text
    expected = offline(translator, sentences, mbr=6, nbest=2, seed=3, mbr_utility="bleu")
    for text, found in zip(reply.json()["sentences"], expected, strict=True):
        assert [item["translation"] for item in text[0]["nbest"]] == [item.text for item in found]
        utilities = [item["expected_utility"] for item in text[0]["nbest"]]
        assert utilities == pytest.approx([item.expected_utility for item in found])
        assert utilities[0] >= utilities[1]


def test_a_prefix_is_forced_and_the_text_is_not_split(
    make_client, translator: Translator, valid_sentences: list[str]
) -> None:
    client = make_client()
    two_sentences = f"{valid_sentences[0]} {valid_sentences[1]}"
    plain = client.post("/v1/translate", json={"text": valid_sentences[2]}).json()["translation"]
    prefix = plain.split()[0] + " " + plain.split()[-1]  # a start the model would not choose
    texts, prefixes = [valid_sentences[2], two_sentences, ""], [prefix, "", "ignored"]
    reply = client.post("/v1/translate", json={"text": texts, "prefix": prefixes}).json()
    expected = offline(translator, texts, prefixes=prefixes)
    assert reply["translation"] == [found[0].text if found else "" for found in expected]
    assert reply["translation"][0].startswith(prefix)
    assert len(reply["sentences"][1]) == 1  # with prefixes each text is one sentence
    single = client.post("/v1/translate", json={"text": valid_sentences[2], "prefix": prefix}).json()
    assert single["translation"] == reply["translation"][0]


def test_constraints_equal_the_offline_search(
    make_client, translator: Translator, valid_sentences: list[str]
) -> None:
    client = make_client()
    sentences = valid_sentences[:5]
    for settings in (
        {"no_repeat_ngram": 1},
        {"min_length": 12},
        {"max_length": 3},
        {"beam": 1, "max_length": 4},
    ):
        reply = client.post("/v1/translate", json={"text": sentences, **settings})
        assert reply.status_code == 200, (settings, reply.text)
        decode = {"beam_size" if name == "beam" else name: value for name, value in settings.items()}
        expected = offline(translator, sentences, **decode)
        assert reply.json()["translation"] == [found[0].text for found in expected], settings
    short = client.post("/v1/translate", json={"text": sentences, "max_length": 3}).json()
    assert all(len(translator.tokenizer.encode_target(text)) <= 3 for text in short["translation"])


def test_alignments_are_the_offline_alignments(
    make_client, translator: Translator, valid_sentences: list[str]
) -> None:
    client = make_client()
    sentences = valid_sentences[5:8]
    reply = client.post("/v1/translate", json={"text": sentences, "alignments": True, "beam": 2, "nbest": 2})
    assert reply.status_code == 200, reply.text
    model_settings = translator.decode_config
    translator.decode_config = dataclasses.replace(model_settings, beam_size=2, nbest=2)
    try:
        expected = translator.translate_nbest(sentences, alignment_layer=-1)
    finally:
        translator.decode_config = model_settings
    for text, found in zip(reply.json()["sentences"], expected, strict=True):
        assert text[0]["alignment"] == format_pharaoh(found[0].alignment or [])
        assert [item["alignment"] for item in text[0]["nbest"]] == [
            format_pharaoh(item.alignment or []) for item in found
        ]
    assert any(text[0]["alignment"] for text in reply.json()["sentences"])
    first_layer = client.post(
        "/v1/translate", json={"text": sentences[0], "alignments": True, "alignment_layer": 0}
    )
    assert first_layer.status_code == 200 and "alignment" in first_layer.json()["sentences"][0][0]


def test_flags_are_the_offline_flags(make_client, translator: Translator, valid_sentences: list[str]) -> None:
    client = make_client()
    sentences = valid_sentences[5:9]
    reply = client.post("/v1/translate", json={"text": sentences, "flags": True, "beam": 2, "nbest": 2})
    assert reply.status_code == 200, reply.text
    model_settings = translator.decode_config
    translator.decode_config = dataclasses.replace(model_settings, beam_size=2, nbest=2)
    try:
        expected = translator.translate_nbest(sentences, flags=FlagThresholds())
    finally:
        translator.decode_config = model_settings

    def as_json(candidate: Candidate) -> list[dict]:
        return [
            {"kind": flag.kind, "score": pytest.approx(flag.score, abs=1e-4),
             "source_span": list(flag.source_span) if flag.source_span else None,
             "target_span": list(flag.target_span) if flag.target_span else None}
            for flag in candidate.flags or ()
        ]  # fmt: skip

    for text, found in zip(reply.json()["sentences"], expected, strict=True):
        assert text[0]["flags"] == as_json(found[0])
        assert [item["flags"] for item in text[0]["nbest"]] == [as_json(item) for item in found]
    # The tiny model's outputs are poor: some flag fires, so the comparison above compared something.
    assert any(text[0]["flags"] for text in reply.json()["sentences"])
    plain = client.post("/v1/translate", json={"text": sentences[0]}).json()
    assert "flags" not in plain["sentences"][0][0] and "flags" not in plain["sentences"][0][0]["nbest"][0]


def test_an_ensemble_is_served_under_one_name(
    make_client, served_run: Path, trained_run: Path, valid_sentences: list[str]
) -> None:
    client = make_client(checkpoints={"pair": (served_run, trained_run), "single": served_run})
    models = client.get("/v1/models").json()["models"]
    assert [model["name"] for model in models] == ["pair", "single"]
    ensemble = Translator.from_checkpoints([served_run, trained_run], device="cpu")
    sentences = valid_sentences[:4]
    reply = client.post("/v1/translate", json={"text": sentences, "model": "pair"}).json()
    assert reply["translation"] == ensemble.translate(sentences)
    single = client.post("/v1/translate", json={"text": sentences, "model": "single"}).json()
    assert single["translation"] == Translator.from_checkpoint(served_run, device="cpu").translate(sentences)


def test_offline_searches_and_step_batching_share_the_worker(
    make_client, translator: Translator, valid_sentences: list[str]
) -> None:
    """Plain requests keep their offline result while MBR and sampling requests run between their steps."""
    client = make_client(max_batch_tokens=64)
    sentences = valid_sentences[:12]
    expected_plain = translator.translate(sentences)
    expected_mbr = [found[0].text for found in offline(translator, sentences[:3], mbr=4, seed=1)]
    replies: dict[str, list[str]] = {}

    def send(name: str, body: dict) -> None:
        replies[name] = client.post("/v1/translate", json=body).json()["translation"]

    threads = [
        threading.Thread(target=send, args=("plain", {"text": sentences})),
        threading.Thread(target=send, args=("mbr", {"text": sentences[:3], "mbr": 4, "seed": 1})),
        threading.Thread(target=send, args=("sampled", {"text": sentences[:3], "sampling": True, "seed": 5})),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert replies["plain"] == expected_plain
    assert replies["mbr"] == expected_mbr
    assert replies["sampled"] == [
        found[0].text for found in offline(translator, sentences[:3], sampling=True, seed=5)
    ]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"text": "a", "prefix": ["x"]}, "prefix: give a string for a string text"),
        ({"text": ["a", "b"], "prefix": ["x"]}, "prefix: 1 prefixes for 2 texts"),
        ({"text": "a", "alignment_layer": 0}, "alignment_layer: only used with alignments"),
        ({"text": "a", "alignments": True, "alignment_layer": 99}, "alignment_layer"),
        ({"text": "a", "mbr": 1}, "mbr=1 must be 0 (off) or at least 2"),
        ({"text": "a", "mbr": 65}, "mbr"),
        # The search width stops where beam does (16); the other bounds are the command line's.
        ({"text": "a", "mbr": 64, "mbr_candidates": "beam"}, "mbr: Input should be less than or equal to 16"),
        ({"text": "a", "sampling": True, "nbest": 17}, "nbest: Input should be less than or equal to 16"),
        (
            {"text": "a", "sampling": True, "temperature": 1e-300},
            "temperature: Input should be greater than or equal to 0.01",
        ),
        ({"text": "a", "top_p": 0.001}, "top_p: Input should be greater than or equal to 0.01"),
        ({"text": "a", "epsilon": 0.9}, "epsilon: Input should be less than or equal to 0.5"),
        ({"text": "a", "top_k": 10**7}, "top_k: Input should be less than or equal to 1000000"),
        ({"text": "a", "no_repeat_ngram": 33}, "no_repeat_ngram: Input should be less than or equal to 32"),
        ({"text": "a", "mbr": 4, "nbest": 5}, "nbest=5 must be between 1 and mbr=4"),
        ({"text": "a", "temperature": 0}, "temperature"),
        ({"text": "a", "top_p": 1.5}, "top_p"),
        ({"text": "a", "epsilon": 1}, "epsilon"),
        ({"text": "a", "mbr_utility": "ter"}, "mbr_utility"),
        ({"text": "a", "min_length": 5, "max_length": 2}, "max_length=2 must be at least"),
        ({"text": "a", "sampling": "yes"}, "sampling"),
    ],
)
def test_bad_decoding_options_are_422_naming_the_field(make_client, body: dict, message: str) -> None:
    client = make_client()
    reply = client.post("/v1/translate", json=body)
    assert reply.status_code == 422, reply.text
    detail = reply.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail and message in detail
    assert client.post("/v1/translate", json={"text": "a"}).status_code == 200
