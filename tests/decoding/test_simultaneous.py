"""Test-time wait-k (Ma et al., 2019): what each token may read, Average Lagging, and the full-sentence limit."""

from pathlib import Path

import pytest
import torch

from transformer.cli import main
from transformer.config.decode import DecodeConfig
from transformer.decoding.beam_search import search
from transformer.decoding.simultaneous import average_lagging, wait_k_translate, wait_k_translate_batched
from transformer.model.config import TransformerConfig
from transformer.model.transformer import Transformer

EOS = 2


@pytest.fixture
def random_model(tiny_config: TransformerConfig) -> Transformer:
    torch.manual_seed(5)
    return Transformer(tiny_config).eval()


def sources(count: int, length: int, seed: int) -> list[list[int]]:
    generator = torch.Generator().manual_seed(seed)
    return [[*torch.randint(4, 40, (length,), generator=generator).tolist(), EOS] for _ in range(count)]


def test_average_lagging_by_hand() -> None:
    # k = 2, |x| = 4, |y| = 5: g = 2, 3, 4, 4, 4; r = 5/4; tau = 3 (the first t that has read all 4).
    assert average_lagging([2, 3, 4, 4, 4], 4, 5) == pytest.approx((2 + (3 - 1 / 1.25) + (4 - 2 / 1.25)) / 3)
    assert average_lagging([6, 6, 6], 6, 3) == 6.0  # full sentence: the whole source, |x|
    assert average_lagging([], 3, 0) == 0.0 == average_lagging([1], 0, 1)


def test_a_written_token_depends_only_on_the_source_read_before_it(random_model: Transformer) -> None:
    wait, shared = 2, 5
    first = sources(6, 12, seed=1)
    second = [
        source[:shared] + tail[shared:] for source, tail in zip(first, sources(6, 12, seed=2), strict=True)
    ]
    one, two = wait_k_translate(random_model, first, wait), wait_k_translate(random_model, second, wait)
    allowed = (
        shared - wait + 1
    )  # token t reads g(t) = k + t - 1 source tokens: the first 4 read only shared ones
    diverged = 0
    for a, b in zip(one, two, strict=True):
        assert a.delays[:allowed] == b.delays[:allowed] == list(range(wait, wait + allowed))
        assert a.tokens[:allowed] == b.tokens[:allowed]
        diverged += a.tokens != b.tokens
    assert (
        diverged > 0
    )  # the later source tokens were read: a search reading the whole source fails the above


def test_eos_waits_for_the_whole_source_and_a_long_wait_is_greedy_search(random_model: Transformer) -> None:
    batch = sources(8, 7, seed=3) + sources(4, 3, seed=4)
    for item in wait_k_translate(random_model, batch, 1, max_length_offset=6):
        assert len(item.delays) in (len(item.tokens), len(item.tokens) + 1)
        if len(item.delays) > len(item.tokens):  # it wrote EOS: only after reading everything
            assert item.delays[-1] == item.source_length
    full = wait_k_translate_batched(random_model, batch, 1000, batch_size=5)
    padded = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in batch], batch_first=True)
    greedy = search(random_model, padded, DecodeConfig(beam_size=1, max_length_offset=50))
    assert [item.tokens for item in full] == [found[0].tokens for found in greedy]
    assert all(item.delays == [item.source_length] * len(item.delays) for item in full)
    with pytest.raises(ValueError, match="k >= 1"):
        wait_k_translate(random_model, batch, 0)


def test_translate_wait_k(trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = trained_run / "data" / "valid.en"
    output = tmp_path / "simultaneous.de"
    assert main(["translate", "--checkpoint", str(trained_run), "--input", str(source), "--output", str(output),
                 "--wait-k", "3"]) == 0  # fmt: skip
    lines = output.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(source.read_text(encoding="utf-8").splitlines())
    assert "wait-3: mean Average Lagging" in capsys.readouterr().err
    assert main(["translate", "--checkpoint", str(trained_run), "--wait-k", "3", "--beam", "4"]) == 2
    assert "--wait-k is a greedy search of its own: it does not take --beam" in capsys.readouterr().err


def test_a_session_fed_word_by_word_writes_what_the_whole_sentence_gets(
    served_run: Path, valid_sentences: list[str]
) -> None:
    from transformer.decoding.simultaneous import WaitKSession
    from transformer.decoding.translator import Translator

    translator = Translator.from_checkpoint(served_run, device="cpu")
    model = translator.model
    assert isinstance(model, Transformer)
    for wait in (1, 3):
        for sentence in valid_sentences[:8]:
            session = WaitKSession(model, translator.tokenizer, wait)
            pieces = [session.feed(word) for word in sentence.split()]
            pieces.append(session.finish())
            whole = wait_k_translate(
                model, [[*translator.tokenizer.encode(sentence), model.config.eos_id]], wait
            )[0]
            assert session.written == whole.tokens and session.delays == whole.delays
            assert "".join(pieces).strip() == session.translation
            assert session.average_lagging == pytest.approx(whole.average_lagging)
            assert (
                any(pieces[:-1]) or not whole.tokens or len(sentence.split()) <= wait
            )  # words before the end
    with pytest.raises(ValueError, match="finished"):
        session.feed("more")
