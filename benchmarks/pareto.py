"""The quality-speed front on the Multi30k validation set: ours, CTranslate2 and HF on one model (issue #49).

    python -m benchmarks.pareto --checkpoint runs/multi30k/averaged \
        --output experiments/benchmarks/2026-12-02-pareto-epyc-avx512-bf16.json

(from the repository root: a module of the ``benchmarks`` package). In one run on one machine it measures,
for every system of :mod:`benchmarks.pareto_systems` (ours in fp32, bf16 and int8, each with and without the
checkpoint's vocabulary shortlist; CTranslate2 int8 with and without its vocabulary map, and float32, on the
exported weights; HF ``MarianMTModel.generate()`` on the exported Marian model; with ``--student``, a student
distilled from the checkpoint in our precisions, with and without its shortlist), greedy and beam 4, at 1 and 2
threads:

- **throughput**: every validation sentence, in batches of 32 (sorted by source length, the same batches for
  every system), as sentences/s and target tokens/s (the checkpoint's tokenizer's pieces of each output, so
  every system is counted alike), and the translations' lowercased BLEU (sacreBLEU 13a), cased BLEU and chrF;
- **latency**: ``--latency-sentences`` sentences (evenly spaced over the set) one at a time: p50 and p90 ms.

Rows of one condition (search, thread count, mode) run back to back, system after system, so that drift on the
machine falls on all of them alike; ``--repeats`` passes over everything take the median. The shortlist's step
coverage (:func:`~transformer.decoding.shortlist_coverage.measure_step_coverage`) is measured once.

Rows are written to the JSON record as they finish, and a rerun with the same ``--output`` skips those there,
so a stopped run resumes; the report (Markdown and a PNG of the front, beside the JSON) is rewritten after every
row. One file holds one machine's figures: a rerun on another CPU, or with other settings, is refused; each row
names the run (command, date, commit) that measured it.
"""

import argparse
import contextlib
import statistics
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from benchmarks.bench_allocator import reexecute_under_tcmalloc
from benchmarks.bench_environment import describe_environment
from benchmarks.bench_worker import REPOSITORY
from benchmarks.pareto_record import ParetoRecord
from benchmarks.pareto_report import write_report
from benchmarks.pareto_systems import OUR_PRECISIONS, SEARCHES, System, SystemSet
from transformer.checkpoint.layout import CheckpointError, resolve_checkpoint
from transformer.data.pipeline.text_files import CorpusError, read_parallel_files
from transformer.data.shortlist import SHORTLIST_FILE, ShortlistError
from transformer.decoding.checkpoint_shortlist import load_checkpoint_shortlist
from transformer.decoding.shortlist_coverage import measure_step_coverage
from transformer.decoding.translator import Translator
from transformer.evaluation.bleu import score_translations

#: Sentences per throughput batch (the issue's "batch 32").
BATCH_SIZE = 32
#: Sentences translated (untimed) before each system's first timed pass at a thread count.
WARM_UP_SENTENCES = 8
#: Where the Multi30k validation set is cached by ``data.corpus: multi30k``.
DEFAULT_VALID = Path("~/.cache/transformer/multi30k").expanduser()


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the benchmark's command line.

    Parameters
    ----------
    argv : list of str or None
        Arguments (None: ``sys.argv[1:]``).

    Returns
    -------
    argparse.Namespace
        The settings.

    Notes
    -----
    ``--source`` and ``--reference`` default to the Multi30k validation set where ``transformer train
    --config configs/multi30k.yaml`` caches it.
    """
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pareto", description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="checkpoint or run directory")
    parser.add_argument(
        "--student",
        type=Path,
        help="also a student distilled from --checkpoint (transformer distill's student/averaged), in our "
        "precisions with and without its shortlist",
    )
    parser.add_argument("--source", type=Path, default=DEFAULT_VALID / "val.en.gz")
    parser.add_argument("--reference", type=Path, default=DEFAULT_VALID / "val.de.gz")
    parser.add_argument("--output", type=Path, default=REPOSITORY / "benchmarks" / "results" / "pareto.json")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--searches", nargs="+", choices=sorted(SEARCHES), default=list(SEARCHES))
    parser.add_argument(
        "--engines", nargs="+", choices=["ours", "onnxruntime", "ctranslate2", "hf"], default=None
    )
    parser.add_argument(
        "--precisions",
        nargs="+",
        choices=list(OUR_PRECISIONS),
        default=list(OUR_PRECISIONS),
        help="ours only",
    )
    parser.add_argument("--latency-sentences", type=int, default=200)
    parser.add_argument("--limit", type=int, default=None, help="only the first N sentences (a smoke test)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="also run ours with N batches searched at once (--workers N), and CTranslate2 with N inter_threads, "
        "at thread counts of N or more",
    )
    parser.add_argument("--no-tcmalloc", action="store_true", help="keep the allocator it was started with")
    args = parser.parse_args(argv)
    for name in ("threads", "latency_sentences", "repeats", "limit", "workers"):
        values = getattr(args, name)
        for value in values if isinstance(values, list) else [values]:
            if value is not None and value < 1:
                parser.error(f"--{name.replace('_', '-')} must be at least 1, not {value}")
    return args


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark (see the module docstring).

    Parameters
    ----------
    argv : list of str or None
        Command-line arguments.

    Returns
    -------
    None

    Notes
    -----
    Prints one line per row as it finishes, then where the report went.
    """
    args = parse_arguments(argv)
    reexecute_under_tcmalloc(args.no_tcmalloc)  # as `transformer` itself runs, and benchmarks.run
    try:
        run_benchmark(args)
    except (CheckpointError, CorpusError, ShortlistError) as error:  # each names its file
        raise SystemExit(f"python -m benchmarks.pareto: {error}") from None


def run_benchmark(args: argparse.Namespace) -> None:
    """Measure every row the record lacks and rewrite the report after each (see the module docstring).

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments.

    Returns
    -------
    None

    Notes
    -----
    :func:`main` turns the errors of a missing or damaged checkpoint, corpus or shortlist into one line.
    """
    pairs = read_parallel_files(args.source, args.reference)[: args.limit]
    sources, references = [pair[0] for pair in pairs], [pair[1] for pair in pairs]
    environment = describe_environment(torch.get_num_threads(), REPOSITORY, args.no_tcmalloc)
    record = ParetoRecord.open(args.output, environment, settings_of(args, len(sources)))
    with tempfile.TemporaryDirectory(prefix="pareto-") as scratch, contextlib.ExitStack() as stack:
        engines = set(args.engines or ["ours", "onnxruntime", "ctranslate2", "hf"])
        systems = stack.enter_context(
            SystemSet(
                args.checkpoint, sources, Path(scratch), engines, args.precisions, args.student, args.workers
            )
        )
        record.note_skipped(systems.skipped)
        if record.coverage is None and "ours" in engines:
            record.set_coverage(shortlist_coverage(args.checkpoint, sources))
        if args.student is not None and record.data["student_coverage"] is None:
            record.set_coverage(shortlist_coverage(args.student, sources), of_student=True)
        batches = length_sorted_batches(systems, sources)
        latency = evenly_spaced(len(sources), args.latency_sentences)
        for repeat, threads, search, mode in conditions(args):
            systems.set_threads(threads)
            for system in systems.systems:
                key = (system.name, search, threads, mode, repeat)
                if record.has(key) or (
                    system.workers > 1 and (mode == "latency" or threads < system.workers)
                ):
                    continue
                warm_up(system, SEARCHES[search], sources)
                if mode == "throughput":
                    row = measure_throughput(system, SEARCHES[search], batches, references, systems)
                else:
                    row = measure_latency(system, SEARCHES[search], latency)
                record.add(key, system, row)
                print(record.describe(key), flush=True)
                write_report(record)
    print(f"report: {record.markdown_path} and {record.plot_path}")


def settings_of(args: argparse.Namespace, sentence_count: int) -> dict[str, Any]:
    """The settings a record keeps (and a resumed run must share).

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments.
    sentence_count : int
        Source sentences measured.

    Returns
    -------
    dict
        JSON-ready settings.

    Notes
    -----
    The thread counts, searches, engines and repeats are not among them: a resumed run may add some.
    """
    return {
        "checkpoint": str(args.checkpoint),
        **({"student": str(args.student)} if args.student else {}),
        "source": str(args.source),
        "reference": str(args.reference),
        "sentences": sentence_count,
        "batch_size": BATCH_SIZE,
        "latency_sentences": min(args.latency_sentences, sentence_count),
    }


def conditions(args: argparse.Namespace) -> Iterator[tuple[int, int, str, str]]:
    """Each (repeat, threads, search, mode) in the order they run; within one, every system runs.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments.

    Returns
    -------
    iterator of (int, int, str, str)
        Repeat index, thread count, search label and mode (``throughput`` or ``latency``).

    Notes
    -----
    Repeats are the outer loop, so a stopped run has every condition measured once before any twice.
    """
    for repeat in range(args.repeats):
        for threads in args.threads:
            for search in args.searches:
                for mode in ("throughput", "latency"):
                    yield repeat, threads, search, mode


def length_sorted_batches(systems: SystemSet, sources: list[str]) -> list[list[int]]:
    """Split the sentences into batches of ``BATCH_SIZE``, sorted by source length in tokens.

    Parameters
    ----------
    systems : SystemSet
        Its checkpoint's tokenizer measures the lengths.
    sources : list of str
        Source sentences.

    Returns
    -------
    list of list of int
        Sentence indices per batch; every system translates these batches.

    Notes
    -----
    Sorting is what every engine's users do for throughput; a stable sort keeps ties in file order.
    """
    tokenizer = systems.target_tokenizer()  # the checkpoint's tokenizer; encode() gives source pieces
    lengths = [len(tokenizer.encode(sentence.strip())) for sentence in sources]
    order = sorted(range(len(sources)), key=lambda index: lengths[index])
    return [order[start : start + BATCH_SIZE] for start in range(0, len(order), BATCH_SIZE)]


def evenly_spaced(count: int, wanted: int) -> list[int]:
    """``wanted`` indices spread evenly over ``range(count)`` (all of them when fewer).

    Parameters
    ----------
    count : int
        Sentences in the set.
    wanted : int
        Sentences to time one at a time.

    Returns
    -------
    list of int
        Increasing indices.

    Notes
    -----
    Evenly spaced rather than the first ones: the file's order may group sentences of one kind.
    """
    wanted = min(wanted, count)
    return [index * count // wanted for index in range(wanted)]


def warm_up(system: System, beam_size: int, system_sentences: list[str]) -> None:
    """Translate a few sentences untimed, so a pass does not pay for first calls and lazy loads.

    Parameters
    ----------
    system : System
        The system.
    beam_size : int
        The search's beam size.
    system_sentences : list of str
        The sentences the systems translate (the first few are used).

    Returns
    -------
    None

    Notes
    -----
    Every condition warms up, since a thread-count change starts threads (and a CTranslate2 worker).
    """
    system.translate(list(range(min(WARM_UP_SENTENCES, len(system_sentences)))), beam_size)


def measure_throughput(
    system: System, beam_size: int, batches: list[list[int]], references: list[str], systems: SystemSet
) -> dict[str, Any]:
    """Translate every batch, then score and count the translations.

    Parameters
    ----------
    system : System
        The system.
    beam_size : int
        1 or 4.
    batches : list of list of int
        Sentence indices per batch.
    references : list of str
        One reference per sentence.
    systems : SystemSet
        Whose checkpoint's tokenizer counts target tokens.

    Returns
    -------
    dict
        ``seconds``, ``sentences_per_second``, ``target_tokens``, ``tokens_per_second``, ``bleu`` (lowercased),
        ``bleu_cased``, ``chrf``.

    Notes
    -----
    Only the translation calls are timed: scoring and counting come after.
    """
    translations = [""] * len(references)
    seconds = 0.0
    if system.translate_batches is not None:
        per_batch, seconds = system.translate_batches(batches, beam_size)
    else:
        per_batch = []
        for batch in batches:
            outputs, batch_seconds = system.translate(batch, beam_size)
            seconds += batch_seconds
            per_batch.append(outputs)
    for batch, outputs in zip(batches, per_batch, strict=True):
        for index, output in zip(batch, outputs, strict=True):
            translations[index] = output
    tokenizer = systems.target_tokenizer()
    target_tokens = sum(len(tokenizer.encode_target(text)) for text in translations if text)
    lowercased = score_translations(translations, references, lowercase=True)
    cased = score_translations(translations, references)
    return {
        "seconds": seconds,
        "sentences_per_second": len(translations) / seconds,
        "target_tokens": target_tokens,
        "tokens_per_second": target_tokens / seconds,
        "bleu": lowercased.bleu,
        "bleu_cased": cased.bleu,
        "chrf": cased.chrf,
    }


def measure_latency(system: System, beam_size: int, indices: list[int]) -> dict[str, Any]:
    """Translate sentences one at a time and take the percentiles of their times.

    Parameters
    ----------
    system : System
        The system.
    beam_size : int
        1 or 4.
    indices : list of int
        The sentences.

    Returns
    -------
    dict
        ``p50_ms``, ``p90_ms``, ``mean_ms`` and ``sentences``.

    Notes
    -----
    Percentiles by :func:`statistics.quantiles` (exclusive method, 100 cut points).
    """
    times_ms = [system.translate([index], beam_size)[1] * 1000.0 for index in indices]
    cuts = statistics.quantiles(times_ms, n=100) if len(times_ms) > 1 else times_ms * 99
    return {
        "p50_ms": cuts[49],
        "p90_ms": cuts[89],
        "mean_ms": statistics.fmean(times_ms),
        "sentences": len(indices),
    }


def shortlist_coverage(checkpoint: Path, sources: list[str]) -> dict[str, Any] | None:
    """The shortlist's step coverage on the sources, or None when the checkpoint has no shortlist.

    Parameters
    ----------
    checkpoint : pathlib.Path
        The benchmark's checkpoint.
    sources : list of str
        Source sentences.

    Returns
    -------
    dict or None
        ``steps``, ``covered``, ``fraction`` and ``mean_shortlist_size``.

    Notes
    -----
    Greedy over the whole vocabulary in fp32: whether each step's best token is in the sentence's shortlist.
    """
    if not (resolve_checkpoint(checkpoint) / SHORTLIST_FILE).exists():
        return None
    translator = Translator.from_checkpoint(checkpoint, device="cpu")
    shortlist = load_checkpoint_shortlist(checkpoint)
    coverage = measure_step_coverage(translator, sources, shortlist)
    return {
        "steps": coverage.steps,
        "covered": coverage.covered,
        "fraction": coverage.fraction,
        "mean_shortlist_size": coverage.mean_shortlist_size,
        "vocabulary": translator.tokenizer.vocab_size,
    }


if __name__ == "__main__":
    main(sys.argv[1:])
