"""Workers against intra-op threads, and greedy search over a shortlist's columns, on a student-sized model.

    python -m benchmarks.batch_workers --checkpoint runs/multi30k/averaged

(from the repository root: a module of the ``benchmarks`` package). Two questions, in one process:

1. For a student of Bergamot's shape (4+1 layers, d_model 256, 10,000 pieces, int8, the C++ step; random
   weights, since shapes are what cost, and 24 output tokens forced per sentence), does a second CPU pay more
   as a second intra-op thread or as a second batch searched beside the first
   (:mod:`transformer.decoding.batch_workers`)? The same for the checkpoint itself (the teacher), int8 at
   beam 4 with its own output lengths.
2. Does greedy search over the union of a batch's shortlists (``ShortlistStepModel.column_log_probs``) beat
   the same search over the whole width (``-inf`` outside the shortlist), and the full vocabulary?

Sources are the first ``--sentences`` lines of the Multi30k validation set, sorted by length, in batches of
32, encoded with the checkpoint's tokenizer and shortlisted with its ``shortlist.safetensors``. Each figure
is the best of ``--rounds`` passes, in sentences/s; the table is printed as Markdown.
"""

import argparse
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchmarks.pareto import DEFAULT_VALID
from transformer.checkpoint.model_checkpoint import load_checkpoint, load_checkpoint_tokenizer
from transformer.config.decode import DecodeConfig
from transformer.data.pipeline.batch import pad_sequences
from transformer.data.pipeline.text_files import iter_lines
from transformer.decoding.beam_search import beam_search
from transformer.decoding.checkpoint_shortlist import load_checkpoint_shortlist
from transformer.decoding.greedy import greedy_search
from transformer.decoding.inference_models import prepare_for_inference
from transformer.decoding.shortlist import ShortlistStepModel
from transformer.decoding.step_model import TransformerStepModel
from transformer.kernels.native_step import native_decoder_step
from transformer.model.config import TransformerConfig
from transformer.model.transformer import Transformer

#: The thread layouts compared on 2 CPUs: (intra-op threads, workers).
LAYOUTS = [(1, 1), (2, 1), (1, 2)]


class WholeWidth:
    """A shortlisted step model seen without its column interface, so greedy search scores every column."""

    def __init__(self, inner: ShortlistStepModel) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        if name.startswith("column_"):
            raise AttributeError(name)
        return getattr(self.inner, name)


def sentences_per_second(
    make_step_model: Callable[[], Any],
    search: Callable[..., Any],
    config: DecodeConfig,
    batches: list[torch.Tensor],
    layout: tuple[int, int],
    rounds: int,
) -> float:
    """Best of ``rounds`` passes over the batches with ``layout = (threads, workers)``; sentences/s."""
    threads, workers = layout
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)

    def run(share: list[torch.Tensor]) -> None:
        step_model = make_step_model()
        for src_tokens in share:
            search(step_model, src_tokens, config)

    try:
        run(batches[:1])  # warm-up
        best = float("inf")
        for _ in range(rounds):
            started = time.perf_counter()
            pool = [
                threading.Thread(target=run, args=(batches[worker::workers],)) for worker in range(workers)
            ]
            for thread in pool:
                thread.start()
            for thread in pool:
                thread.join()
            best = min(best, time.perf_counter() - started)
    finally:
        torch.set_num_threads(previous)
    return sum(batch.size(0) for batch in batches) / best


def main(argv: list[str] | None = None) -> None:
    """Measure and print the table (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.batch_workers", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--checkpoint", type=Path, required=True, help="the teacher; needs its shortlist file"
    )
    parser.add_argument("--source", type=Path, default=DEFAULT_VALID / "val.en.gz")
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    checkpoint = load_checkpoint(args.checkpoint)
    tokenizer = load_checkpoint_tokenizer(checkpoint.path)
    shortlist = load_checkpoint_shortlist(args.checkpoint)
    eos_id = checkpoint.model_config.eos_id
    lines = [line.strip() for line in iter_lines(args.source)][: args.sentences]
    encoded = sorted(([*tokenizer.encode(line), eos_id] for line in lines if line), key=len)
    pad_id = checkpoint.model_config.pad_id
    batches = [pad_sequences(encoded[start : start + 32], pad_id) for start in range(0, len(encoded), 32)]
    torch.manual_seed(0)
    shape = TransformerConfig(vocab_size=tokenizer.vocab_size, d_model=256, d_ff=1024, num_heads=4,
                              num_encoder_layers=4, num_decoder_layers=1, dropout=0.0, norm_first=True)  # fmt: skip
    student, _ = prepare_for_inference(Transformer(shape), torch.device("cpu"), "int8", "auto")
    assert isinstance(student, Transformer)
    native, note = native_decoder_step(student)
    forced = DecodeConfig(beam_size=1, min_length=24, max_length=24)
    rows = {
        "student int8 greedy, full vocabulary": lambda: TransformerStepModel(student, True, native),
        "student int8 greedy, shortlist over the whole width": lambda: WholeWidth(
            ShortlistStepModel(student, shortlist, True, native)
        ),
        "student int8 greedy, shortlist over its columns": lambda: ShortlistStepModel(
            student, shortlist, True, native
        ),
    }
    print(f"{note}; {len(encoded)} sentences in {len(batches)} batches; best of {args.rounds}\n")
    print("| system | 1 thread | 2 threads | 2 workers x 1 thread | 2 threads / 1 | 2 workers / 2 threads |")
    print("|---|---|---|---|---|---|")

    def report(name: str, figures: list[float]) -> None:
        one, two, workers = figures
        print(f"| {name} | {one:.0f} | {two:.0f} | {workers:.0f} | {two / one:.2f}x | {workers / two:.2f}x |")

    for name, make in rows.items():
        report(
            name,
            [sentences_per_second(make, greedy_search, forced, batches, lay, args.rounds) for lay in LAYOUTS],
        )
    teacher, _ = prepare_for_inference(checkpoint.build_model().eval(), torch.device("cpu"), "int8", "auto")
    assert isinstance(teacher, Transformer)  # int8 takes Transformers only
    teacher_native, _ = native_decoder_step(teacher)
    beam = DecodeConfig(beam_size=4, length_penalty=1.0, length_penalty_form="power")
    make_teacher = lambda: TransformerStepModel(teacher, True, teacher_native)  # noqa: E731
    figures = [
        sentences_per_second(make_teacher, beam_search, beam, batches, lay, args.rounds) for lay in LAYOUTS
    ]
    report("the checkpoint, int8 beam 4 (its own lengths)", figures)


if __name__ == "__main__":
    main()
