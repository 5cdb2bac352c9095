"""Searching several batches at once (``Translator.workers``, ``--workers``): the same translations as one
after the other, results in input order, progress per batch, and the first error raised with no thread left."""

import shutil
import threading
import time
from pathlib import Path

import pytest
import torch

from transformer.cli import main
from transformer.config.decode import DecodeConfig
from transformer.data.pipeline.text_files import read_lines
from transformer.decoding.batch_workers import run_batches
from transformer.decoding.checkpoint_shortlist import build_checkpoint_shortlist
from transformer.decoding.translator import Translator


def test_results_come_back_in_batch_order_whatever_finishes_first() -> None:
    batches = [[0, 1], [2], [3, 4, 5], [6]]
    seen_threads: set[str] = set()
    sizes: list[int] = []
    last_started = threading.Event()

    def slow_first(batch: list[int]) -> list[int]:
        seen_threads.add(threading.current_thread().name)
        if batch[0] == 0:
            assert last_started.wait(10)  # the first batch finishes after the last has run
        elif batch[0] == 6:
            last_started.set()
        return [index * 10 for index in batch]

    found = run_batches(batches, slow_first, workers=2, progress=sizes.append)
    assert found == [[0, 10], [20], [30, 40, 50], [60]]
    assert sorted(sizes) == [1, 1, 2, 3] and sizes[-1] == 2  # progress as batches finish
    assert len(seen_threads) == 2 and all(name.startswith("translate") for name in seen_threads)
    last_started.clear()
    last_started.set()  # one after the other: the first batch must not wait for the last
    assert run_batches(batches, slow_first, workers=1) == found


def test_the_first_error_is_raised_and_no_worker_outlives_the_call() -> None:
    started: list[int] = []

    def failing(batch: list[int]) -> int:
        started.append(batch[0])
        if batch[0] == 1:
            raise ValueError("weights.safetensors: NaN scores")
        time.sleep(0.05)
        return batch[0]

    before = threading.active_count()
    with pytest.raises(ValueError, match="NaN scores"):
        run_batches([[index] for index in range(40)], failing, workers=2)
    assert threading.active_count() == before
    assert len(started) < 40  # the batches not yet started were cancelled
    with pytest.raises(ValueError, match="workers=0 must be at least 1"):
        run_batches([[0]], failing, workers=0)


@pytest.mark.parametrize(
    ("precision", "config", "shortlist"),
    [("fp32", DecodeConfig(beam_size=1), False), ("int8", DecodeConfig(beam_size=3, nbest=2), False),
     ("fp32", DecodeConfig(beam_size=1), True)],
    ids=["fp32-greedy", "int8-beam", "fp32-greedy-shortlist"],
)  # fmt: skip
def test_workers_translate_as_one_thread_does(
    trained_run: Path, tmp_path: Path, precision, config, shortlist
) -> None:
    if shortlist:
        run = tmp_path / "run"
        shutil.copytree(trained_run, run)
        build_checkpoint_shortlist(run, per_source=20, frequent=30)
        trained_run = run
    sentences = read_lines(trained_run / "data" / "valid.en")[:24]
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # both ways on one intra-op thread each: the same arithmetic
    try:
        translator = Translator.from_checkpoint(trained_run, config, "cpu", precision, shortlist=shortlist)
        translator.max_tokens = 40  # several batches
        alone = [
            [(c.text, c.score, c.log_prob) for c in found] for found in translator.translate_nbest(sentences)
        ]
        translator.workers = 3
        sizes: list[int] = []
        together = translator.translate_nbest(sentences, sizes.append)
    finally:
        torch.set_num_threads(before)
    assert [[(c.text, c.score, c.log_prob) for c in found] for found in together] == alone
    assert len(sizes) > 3 and sum(sizes) == len(sentences)
    with pytest.raises(ValueError, match="workers=0 must be at least 1"):
        Translator(translator.model, translator.tokenizer, workers=0)


def test_workers_on_the_command_line(trained_run: Path, tmp_path: Path, capsys) -> None:
    source = tmp_path / "src.en"
    source.write_text("".join(f"{line}\n" for line in read_lines(trained_run / "data" / "valid.en")[:12]))
    common = [
        "translate",
        "--checkpoint",
        str(trained_run),
        "--input",
        str(source),
        "--beam",
        "2",
        "--device",
        "cpu",
    ]
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert main([*common, "--workers", "2"]) == 0
        assert torch.get_num_threads() == 1  # each of the two workers on one of the two threads
        with_workers = capsys.readouterr().out
        assert main(common) == 0
        assert capsys.readouterr().out == with_workers
    finally:
        torch.set_num_threads(before)
    assert main([*common, "--workers", "0"]) == 2
    assert "--workers" in capsys.readouterr().err
    assert (
        main(["translate", "--checkpoint", str(tmp_path), "--engine", "ctranslate2", "--workers", "2"]) == 2
    )
    assert "--workers 2 applies to --engine pytorch" in capsys.readouterr().err
