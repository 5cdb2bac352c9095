"""The ``glossary`` field in ``POST /v1/translate`` and LibreTranslate's ``/translate``: the offline result, errors."""

from pathlib import Path

import pytest

from tests.conftest import write_tiny_config
from transformer.cli import main
from transformer.decoding.glossary import Glossary
from transformer.decoding.translator import Translator

TEXTS = ["the dog sees a cat.", "a small house stands there.", "nothing to match here."]
TERMS = {"dog": "Hund", "small house": "Häuschen"}


@pytest.fixture(scope="module")
def translator(served_run: Path) -> Translator:
    """The offline translator of the served model."""
    return Translator.from_checkpoint(served_run, device="cpu")


def test_the_translations_use_the_terms_as_the_offline_search_does(
    make_client, translator: Translator
) -> None:
    client = make_client(cache_size=100)
    expected = translator.translate(TEXTS, glossary=Glossary.from_pairs(TERMS.items()))
    assert "Hund" in expected[0] and "Häuschen" in expected[1]
    for glossary in (TERMS, [list(pair) for pair in TERMS.items()], "dog\tHund\nsmall house\tHäuschen\n"):
        reply = client.post("/v1/translate", json={"text": TEXTS, "glossary": glossary})
        assert reply.status_code == 200, reply.text
        assert reply.json()["translation"] == expected
    plain = client.post("/v1/translate", json={"text": TEXTS}).json()["translation"]
    assert plain == translator.translate(TEXTS)  # the cache keeps the two apart
    assert plain[2] == expected[2] and "Häuschen" not in plain[1]


def test_libretranslate_takes_a_glossary_in_json_and_in_a_form(make_client, translator: Translator) -> None:
    client = make_client()
    expected = translator.translate(TEXTS[:2], glossary=Glossary.from_pairs(TERMS.items()))
    reply = client.post(
        "/translate", json={"q": TEXTS[:2], "source": "en", "target": "de", "glossary": TERMS}
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["translatedText"] == expected
    form = {"q": TEXTS[0], "source": "en", "target": "de", "glossary": "dog\tHund"}
    assert client.post("/translate", data=form).json()["translatedText"] == expected[0]
    bad = client.post("/translate", json={"q": "x", "source": "en", "target": "de", "glossary": {"dog": ""}})
    assert bad.status_code == 400
    assert bad.json() == {"error": "Invalid request: glossary entry 1: the target term is empty"}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"glossary": {"dog": "Hund"}, "beam": 1},
            "glossary: a glossary needs beam search with a beam size of 2",
        ),
        ({"glossary": {"dog": "Hund"}, "sampling": True, "beam": 1}, "not sampling"),
        ({"glossary": {"dog": " "}}, "glossary entry 1: the target term is empty"),
        ({"glossary": [["dog", "Hund", "x"]]}, "glossary entry 1: expected a source term and a target term"),
        ({"glossary": "dog Hund"}, "glossary line 1: expected 'source term<TAB>target term', found 1"),
        ({"glossary": {"dog": "Hund", "DOG": "Köter"}}, "glossary entry 2: source term 'DOG' has target"),
        ({"glossary": 3}, "glossary"),
    ],
)
def test_bad_glossaries_are_422_naming_the_entry(make_client, extra: dict, message: str) -> None:
    reply = make_client().post("/v1/translate", json={"text": "the dog", **extra})
    assert reply.status_code == 422, reply.text
    assert message in str(reply.json()["detail"])


def test_a_glossary_needs_beam_search_on_libretranslate_too(make_client, tmp_path: Path) -> None:
    config = write_tiny_config(tmp_path, decode={"beam_size": 1}, train={"max_steps": 2})
    assert main(["train", "--config", str(config), "--output-dir", str(tmp_path / "greedy")]) == 0
    client = make_client(checkpoints={"greedy": (tmp_path / "greedy",)})
    reply = client.post(
        "/translate", json={"q": "the dog", "source": "en", "target": "de", "glossary": TERMS}
    )
    assert reply.status_code == 400
    assert reply.json() == {
        "error": "Invalid request: glossary needs beam search; model 'greedy' is served with greedy search"
    }


def test_a_text_matching_more_terms_than_a_search_should_carry_is_refused(make_client) -> None:
    from transformer.serving.request_glossary import MAX_TERMS_PER_TEXT

    client = make_client()
    many = " ".join(["dog"] * (MAX_TERMS_PER_TEXT + 1))
    reply = client.post("/v1/translate", json={"text": ["a dog", many], "glossary": TERMS})
    assert reply.status_code == 422
    assert reply.json()["detail"] == (
        f"glossary: text[1] matches {MAX_TERMS_PER_TEXT + 1} glossary terms; a text may use at most "
        f"{MAX_TERMS_PER_TEXT}"
    )
    body = {"q": many, "source": "en", "target": "de", "glossary": TERMS}
    reply = client.post("/translate", json=body)
    assert reply.status_code == 400 and "matches 65 glossary terms" in reply.json()["error"]
    within = " ".join(["dog"] * 3)
    assert client.post("/v1/translate", json={"text": within, "glossary": TERMS}).status_code == 200
