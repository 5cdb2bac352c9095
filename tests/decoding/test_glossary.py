"""Glossaries: the file format and its errors, term matching, and the translator's constrained search."""

import dataclasses
import re
from pathlib import Path

import pytest

from transformer.config.decode import DecodeConfig
from transformer.decoding.glossary import Glossary, GlossaryError
from transformer.decoding.translator import Translator

SENTENCES = ["the cat sees the dog", "a small house", "", "the dog runs to the small cat"]


def test_a_file_is_read_line_by_line_skipping_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "terms.tsv"
    path.write_bytes(b"dog\tHund\r\n\n  New York \t New York\ncat\tKatze\ndog\tHund\n")
    glossary = Glossary.from_file(path)
    assert [(entry.source, entry.target) for entry in glossary.entries] == [
        ("dog", "Hund"),
        ("New York", "New York"),
        ("cat", "Katze"),
    ]  # the repeated identical pair counts once
    assert glossary.entries[2].origin == f"--glossary {path} line 4"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"dog\tHund\ncat\n", "line 2: expected 'source term<TAB>target term', found 1 tab-separated field$"),
        (b"dog\tHund\tHunde\n", "line 1: expected .* found 3 tab-separated fields"),
        (b"dog\t \n", "line 1: the target term is empty"),
        (b"\tHund\n", "line 1: the source term is empty"),
        (
            b"dog\tHund\nDOG\tK\xc3\xb6ter\n",
            "line 2: source term 'DOG' has target 'Köter' here and 'Hund' at .* line 1",
        ),
        (b"dog\tHund\ncat\tKatze\xff\n", "line 2: not UTF-8"),
        (b"do\x1bg\tHund\n", "line 1: the source term holds U\\+001B at character 3"),
    ],
)
def test_a_bad_line_is_refused_naming_the_file_and_line(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "terms.tsv"
    path.write_bytes(content)
    with pytest.raises(GlossaryError, match=f"^--glossary {path} {message}"):
        Glossary.from_file(path)


def test_a_missing_file_a_directory_or_a_broken_link_is_refused(tmp_path: Path) -> None:
    with pytest.raises(GlossaryError, match="no such file"):
        Glossary.from_file(tmp_path / "absent.tsv")
    with pytest.raises(GlossaryError, match="is a directory"):
        Glossary.from_file(tmp_path)
    loop = tmp_path / "loop.tsv"
    loop.symlink_to(loop)  # readable by nobody, root included
    with pytest.raises(GlossaryError, match=rf"^--glossary {loop}: cannot read it \("):
        Glossary.from_file(loop)


def test_terms_match_whole_words_in_any_case_longest_first() -> None:
    glossary = Glossary.from_pairs(
        [("dog", "Hund"), ("New York", "New York"), ("new york city", "NYC"), ("hot dog", "Hotdog")]
    )
    sentence = "A DOG in New  York City eats a hot dog; hotdogs, dogs, dog-food and New Yorker are no match."
    found = [(sentence[match.start : match.end], match.entry.target) for match in glossary.matches(sentence)]
    assert found == [("DOG", "Hund"), ("New  York City", "NYC"), ("hot dog", "Hotdog")]
    assert [match.entry.target for match in glossary.matches("the dog's bowl, (dog)")] == ["Hund", "Hund"]
    assert glossary.target_terms("the dog and the other dog") == ["Hund", "Hund"]
    assert Glossary.from_pairs([]).matches("the dog") == []


def test_pairs_name_their_entry_when_refused() -> None:
    with pytest.raises(GlossaryError, match=r"^glossary entry 2: the target term is empty$"):
        Glossary.from_pairs([("dog", "Hund"), ("cat", "")])


def test_word_continuations_are_the_pieces_that_glue_onto_a_word(trained_run: Path) -> None:
    from transformer.checkpoint.model_checkpoint import load_checkpoint_tokenizer
    from transformer.decoding.glossary import WORD_START, word_continuation_ids

    tokenizer = load_checkpoint_tokenizer(trained_run)
    ids = set(word_continuation_ids(tokenizer))
    pieces = {token_id: tokenizer.id_to_piece(token_id) for token_id in range(tokenizer.vocab_size)}
    assert ids == {i for i, piece in pieces.items() if piece[:1].isalnum()}  # no ▁, no punctuation
    assert not any(pieces[i].startswith(WORD_START) for i in ids)
    assert 0 < len(ids) < tokenizer.vocab_size - 3
    assert any(piece == "." for piece in pieces.values()) and all(pieces[i] != "." for i in ids)


@pytest.fixture(scope="module")
def beam_translator(trained_run: Path) -> Translator:
    return Translator.from_checkpoint(trained_run, DecodeConfig(beam_size=4, max_length_offset=8), "cpu")


def words_of(text: str) -> list[str]:
    return re.findall(r"\w+", text)


def test_the_translations_use_the_glossary_and_unmatched_sentences_are_unchanged(
    beam_translator: Translator,
) -> None:
    # Words the built-in corpus lacks, so that a tiny model trained on any CPU cannot produce them unforced.
    glossary = Glossary.from_pairs([("dog", "Köter"), ("house", "Haus und Hof")])
    plain = beam_translator.translate(SENTENCES)
    with_terms = beam_translator.translate(SENTENCES, glossary=glossary)
    assert "Köter" not in words_of(plain[0]) and "Haus und Hof" not in plain[1]
    assert "Köter" in words_of(with_terms[0]) and "Köter" in words_of(with_terms[3])
    assert "Haus und Hof" in with_terms[1]
    assert with_terms[2] == ""  # an empty line stays empty
    unmatched = Glossary.from_pairs([("zebra", "Zebra")])
    assert beam_translator.translate(SENTENCES, glossary=unmatched) == plain
    nbest = dataclasses.replace(beam_translator.decode_config, nbest=3)
    beam_translator.decode_config = nbest
    try:
        candidates = beam_translator.translate_nbest(SENTENCES, glossary=glossary)[0]
    finally:
        beam_translator.decode_config = dataclasses.replace(nbest, nbest=1)
    used = ["Köter" in words_of(item.text) for item in candidates]
    assert len(candidates) == 3 and used[0]
    assert used == sorted(used, reverse=True)  # the hypotheses that met every term are listed first


def test_a_shortlist_gains_the_terms_tokens(trained_run: Path, tmp_path: Path) -> None:
    from transformer.cli import main

    shortlist_run = tmp_path / "run"
    import shutil

    shutil.copytree(trained_run, shortlist_run)
    assert (
        main(["shortlist", "--checkpoint", str(shortlist_run), "--per-source", "1", "--frequent", "0"]) == 0
    )
    translator = Translator.from_checkpoint(
        shortlist_run, DecodeConfig(beam_size=4, max_length_offset=8), "cpu", shortlist=True
    )
    glossary = Glossary.from_pairs([("dog", "Hund")])
    assert "Hund" in words_of(translator.translate(SENTENCES, glossary=glossary)[0])


@pytest.mark.parametrize(
    ("settings", "search"),
    [
        ({"beam_size": 1}, "greedy search"),
        ({"sampling": True, "beam_size": 1}, "sampling"),
        ({"mbr": 4}, "MBR"),
    ],
)
def test_searches_that_cannot_take_terms_are_refused(trained_run: Path, settings: dict, search: str) -> None:
    translator = Translator.from_checkpoint(trained_run, DecodeConfig(**settings), "cpu")
    with pytest.raises(
        ValueError, match=f"a glossary needs beam search with a beam size of 2 or more, not {search}"
    ):
        translator.translate(SENTENCES, glossary=Glossary.from_pairs([("dog", "Hund")]))
