"""``python -m benchmarks.serve_bound``: the continuous batch it drives translates exactly as offline search."""

import json
from collections import deque
from pathlib import Path

import pytest

from benchmarks import serve_bound
from transformer.serving.continuous_batching import SentenceToDecode
from transformer.serving.served_model import load_served_model


def test_a_continuous_batch_kept_at_n_sentences_translates_as_offline(
    served_run: Path, valid_sentences: list[str]
) -> None:
    served = load_served_model("bound", [served_run], "pytorch", "cpu", "fp32")
    sentences = valid_sentences[:20]
    _, offline = serve_bound.translate_offline(served, sentences, None)
    _, chunked = serve_bound.translate_offline(served, sentences, 3)
    seconds, continuous, mean_rows = serve_bound.translate_continuously(served, sentences, 3, admit_every=2)
    assert chunked == offline and continuous == offline
    assert any(offline) and seconds > 0
    beam = served.decode_config.beam_size
    # never more than 3 sentences of `beam` rows each, and more than one sentence at a time on average
    assert beam < mean_rows <= 3 * beam


def test_the_benchmark_writes_its_report(served_run: Path, tmp_path: Path) -> None:
    sentences = served_run / "data" / "valid.en"
    arguments = [
        "--checkpoint", str(served_run), "--sentences", str(sentences), "--max-sentences", "12",
        "--in-flight", "1,4", "--passes", "1", "--threads", "1", "--output-dir", str(tmp_path),
    ]  # fmt: skip
    assert serve_bound.main(arguments) == 0
    record = json.loads((tmp_path / "serve-bound-latest.json").read_text(encoding="utf-8"))
    assert [row["in_flight"] for row in record["passes"]] == [1, 4]
    assert all(row["identical"] == 12 for row in record["passes"])
    one_at_a_time = record["passes"][0]
    assert one_at_a_time["mean_rows_per_step"] <= record["beam"]
    report = (tmp_path / "serve-bound-latest.md").read_text(encoding="utf-8")
    assert record["environment"]["cpu"]["summary"] in report and "| 4 |" in report


def test_admissions_keep_the_workers_budget_and_order(served_run: Path) -> None:
    served = load_served_model("bound", [served_run], "pytorch", "cpu", "fp32")
    waiting = deque(SentenceToDecode(index, [5] * length, served.decode_config) for index, length in
                    enumerate([10, 30, 5, 5]))  # fmt: skip
    # beam 4: 40 + 120 = 160 tokens fit a budget of 170, the third (20 more) does not, nor may the fourth pass it
    taken = serve_bound.take_admissible(waiting, used_tokens=0, max_batch_tokens=170, beam=4)
    assert [sentence.key for sentence in taken] == [0, 1] and [sentence.key for sentence in waiting] == [2, 3]
    # nothing running: the oldest goes in whatever its size
    assert len(serve_bound.take_admissible(deque(taken[1:]), 0, max_batch_tokens=10, beam=4)) == 1
    assert serve_bound.take_admissible(deque(taken), 100, max_batch_tokens=120, beam=4) == []
    with pytest.raises(ValueError, match="in_flight"):
        serve_bound.translate_continuously(served, ["a b"], in_flight=0, admit_every=2)


@pytest.mark.parametrize("text", ["0", "4,x", ""])
def test_a_bad_in_flight_list_is_refused_naming_the_option(
    text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        serve_bound.parse_arguments(["--checkpoint", "c", "--sentences", "s", "--in-flight", text])
    assert "--in-flight" in capsys.readouterr().err
