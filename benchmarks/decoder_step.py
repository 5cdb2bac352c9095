"""A/B of the searches' per-step reductions: PyTorch's plain ones against the blocked ones of ``top_tokens``.

    python -m benchmarks.decoder_step --checkpoint runs/multi30k --shortlist --rounds 5

(from the repository root: a module of the ``benchmarks`` package).

Both variants run in one process on the same translator, in interleaved rounds (the order alternating), and
the table gives the median milliseconds per sentence of each, for fp32 and int8, greedy and beam 4, batches of
32 sentences and of 1, at 1 and 2 threads (``--threads``), with the checkpoint's shortlist too when asked.
"plain" is what the searches ran before: ``topk`` and ``max(dim)`` over the whole vocabulary and the NaN check
``isnan().any()``; "blocked" is what they run now (:mod:`transformer.decoding.top_tokens`, ``amax`` in
:func:`~transformer.decoding.search.note_nan_scores`). A last column says whether both gave the same tokens
and scores. Sources are the first ``--sentences`` lines of ``--source`` (the Multi30k validation set).
"""

import argparse
import itertools
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import Tensor

from benchmarks.pareto import DEFAULT_VALID
from transformer.config.decode import DecodeConfig
from transformer.data.pipeline.batch import pad_sequences
from transformer.data.pipeline.text_files import iter_lines
from transformer.decoding import beam_search, greedy, top_tokens
from transformer.decoding.translator import Translator

DEFAULT_SOURCE = DEFAULT_VALID / "val.en.gz"  # where data.corpus: multi30k caches it


def plain_note_nan_scores(nan_seen: Tensor, step_log_probs: Tensor) -> Tensor:
    """The searches' NaN check before it read each row's ``amax``."""
    return nan_seen | step_log_probs.isnan().any()


@contextmanager
def variant(name: str) -> Iterator[None]:
    """Run the block with the searches' reductions of ``name`` ("plain" or "blocked")."""
    if name == "blocked":
        yield
        return
    saved = (top_tokens.MIN_BLOCKED_ELEMENTS, greedy.note_nan_scores, beam_search.note_nan_scores)
    top_tokens.MIN_BLOCKED_ELEMENTS = 1 << 62
    greedy.note_nan_scores = beam_search.note_nan_scores = plain_note_nan_scores
    try:
        yield
    finally:
        top_tokens.MIN_BLOCKED_ELEMENTS, greedy.note_nan_scores, beam_search.note_nan_scores = saved


def time_search(translator: Translator, batches: list[Tensor], config: DecodeConfig) -> tuple[float, list]:
    """Seconds to search every batch, and the hypotheses' tokens and scores."""
    translator.search_tokens(batches[0], config=config)  # warm-up: first-call allocations
    start = time.perf_counter()
    found = [translator.search_tokens(batch, config=config) for batch in batches]
    seconds = time.perf_counter() - start
    return seconds, [[(hyp.tokens, hyp.score) for hyp in hyps] for batch in found for hyps in batch]


def measure(
    translator: Translator, sentences: list[str], batch_size: int, config: DecodeConfig, rounds: int
) -> tuple[float, float, bool]:
    """Median ms per sentence of "plain" and "blocked" in interleaved rounds, and whether results agree."""
    eos_id = translator.model.config.eos_id
    encoded = [[*translator.tokenizer.encode(sentence), eos_id] for sentence in sentences]
    pad_id = translator.model.config.pad_id
    batches = [pad_sequences(encoded[i : i + batch_size], pad_id) for i in range(0, len(encoded), batch_size)]
    times: dict[str, list[float]] = {"plain": [], "blocked": []}
    results: dict[str, list] = {}
    for round_index in range(rounds):
        order = ["plain", "blocked"] if round_index % 2 == 0 else ["blocked", "plain"]
        for name in order:
            with variant(name):
                seconds, results[name] = time_search(translator, batches, config)
            times[name].append(seconds * 1000 / len(sentences))
    return (
        statistics.median(times["plain"]),
        statistics.median(times["blocked"]),
        results["plain"] == results["blocked"],
    )


def main(argv: list[str] | None = None) -> None:
    """Parse the options, run every row and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="checkpoint or run directory")
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="source sentences (.gz or text)")
    parser.add_argument("--sentences", type=int, default=128, help="sentences per row at batch 32")
    parser.add_argument("--single", type=int, default=24, help="sentences per row at batch 1")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per row (median)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--shortlist", action="store_true", help="also rows with the checkpoint's shortlist")
    args = parser.parse_args(argv)
    lines = list(iter_lines(args.source))  # plain or gzipped, a pipe read once; errors name the file
    print("| precision | shortlist | search | batch | threads | plain ms/sentence | blocked | ratio | same |")
    print("|---|---|---|---|---|---|---|---|---|")
    for precision, shortlist in itertools.product(
        ["fp32", "int8"], [False, True] if args.shortlist else [False]
    ):
        translator = Translator.from_checkpoint(
            args.checkpoint, device="cpu", precision=precision, shortlist=shortlist
        )
        for beam_size, batch_size, threads in itertools.product([1, 4], [32, 1], args.threads):
            torch.set_num_threads(threads)
            config = DecodeConfig(beam_size=beam_size, length_penalty=1.0, length_penalty_form="power")
            count = args.sentences if batch_size > 1 else args.single
            plain, blocked, same = measure(translator, lines[:count], batch_size, config, args.rounds)
            search = "greedy" if beam_size == 1 else f"beam {beam_size}"
            print(
                f"| {precision} | {'yes' if shortlist else 'no'} | {search} | {batch_size} | {threads} | "
                f"{plain:.2f} | {blocked:.2f} | {blocked / plain:.3f} | {'yes' if same else 'NO'} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
