"""The length/emptiness filter and its report, and a real corpus read and encoded."""

from pathlib import Path

import numpy as np
import pytest

from transformer.data.pipeline.dataset import EncodedCorpus, FilterReport, encode_corpus
from transformer.data.pipeline.special_tokens import EOS_ID
from transformer.data.pipeline.text_files import read_parallel_files
from transformer.data.pipeline.tokenizer import Tokenizer

SHARED_MULTI30K = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "multi30k"


class WordTokenizer:
    """One id per whitespace-separated word, so lengths in tests are exact."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def encode(self, text: str) -> list[int]:
        return [self.ids.setdefault(word, 4 + len(self.ids)) for word in text.split()]

    def encode_target(self, text: str) -> list[int]:
        return self.encode(text)


def test_filter_drops_and_counts_empty_and_long_pairs() -> None:
    pairs = [
        ("a b", "c"),  # kept
        ("", "x"),  # empty source
        ("y", "   "),  # empty target
        ("a b c d", "e"),  # source 4 tokens + EOS = 5 > 4
        ("a", "b c d e"),  # target 4 tokens + EOS = 5 > 4
        ("a b c", "d e f"),  # 3 + EOS = 4 on both sides: kept, the limit is inclusive
    ]
    corpus = encode_corpus(pairs, WordTokenizer(), max_len=4)  # type: ignore[arg-type]
    assert corpus.report == FilterReport(kept=2, dropped_empty=2, dropped_too_long=2, max_len=4)
    assert corpus.report.total == 6
    assert corpus.report.describe() == (
        "kept 2 of 6 pairs; dropped 2 with an empty side, 2 longer than 4 tokens"
    )
    assert corpus.pair_indices == [0, 5]
    assert all(source[-1] == EOS_ID for source in corpus.source)
    assert [len(target) for target in corpus.target] == [1, 3]  # no BOS/EOS on the target side
    assert all(EOS_ID not in target for target in corpus.target)
    np.testing.assert_array_equal(corpus.source_lengths, [3, 4])
    np.testing.assert_array_equal(corpus.target_lengths, [1, 3])
    assert corpus.source_lengths.dtype == np.int64


def test_filter_refuses_to_return_nothing() -> None:
    with pytest.raises(ValueError, match="no sentence pair is left: kept 0 of 2 pairs; dropped 1"):
        encode_corpus([("", "a"), ("a b c", "d")], WordTokenizer(), max_len=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_len=1 must be at least 2"):
        encode_corpus([("a", "b")], WordTokenizer(), max_len=1)  # type: ignore[arg-type]


def test_encoded_corpus_checks_alignment() -> None:
    with pytest.raises(ValueError, match="2 source sequences but 1 target sequences"):
        EncodedCorpus(source=[[5, 2], [6, 2]], target=[[7]], report=FilterReport(2, 0, 0))


@pytest.mark.skipif(not SHARED_MULTI30K.is_dir(), reason=f"no Multi30k copy at {SHARED_MULTI30K}")
def test_reads_real_multi30k_and_encodes_it(tmp_path: Path) -> None:
    train = read_parallel_files(SHARED_MULTI30K / "train.en.gz", SHARED_MULTI30K / "train.de.gz")
    valid = read_parallel_files(SHARED_MULTI30K / "val.en.gz", SHARED_MULTI30K / "val.de.gz")
    assert (len(train), len(valid)) == (29_000, 1_014)
    assert train[0] == (
        "Two young, White males are outside near many bushes.",
        "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
    )
    texts = [side for pair in train[:5000] for side in pair]
    tokenizer = Tokenizer.train(texts, tmp_path / "multi30k.model", 2000)
    corpus = encode_corpus(valid, tokenizer, max_len=20)
    assert corpus.report.kept + corpus.report.dropped_too_long == 1_014
    assert 0 < corpus.report.dropped_too_long < 1_014
    assert corpus.source_lengths.max() <= 20 and corpus.target_lengths.max() + 1 <= 20
    first_kept = valid[corpus.pair_indices[0]]  # type: ignore[index]
    assert tokenizer.decode(corpus.target[0]) == first_kept[1]
