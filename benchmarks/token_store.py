"""Measure the token store at the paper's data sizes (issue #18) on generated corpora: no download.

From the repository root (a module of the ``benchmarks`` package):

    python -m benchmarks.token_store --pairs 1000000,4500000,36000000     # the record: hours, ~40 GB of disk
    python -m benchmarks.token_store --pairs 20000,100000 --work-dir /tmp/token-store-check   # minutes

For each size N, a corpus of N pairs is generated into ``WORK/corpus-N`` (or reused) by
``benchmarks.large_corpus`` (Multi30k recombined to roughly WMT14-like lengths), and, each in a fresh process:

a. **Prepare**: the joint BPE vocabulary learned as ``prepare_data`` learns it for a token store (a sample of
   at most 2M sentences), then ``transformer prepare`` with ``data.token_store: true``, which reuses that
   vocabulary and builds the store; wall time and peak resident memory of each process.
b. **Encoding**: building a store from the first ``--encode-pairs`` lines, held in memory, against
   SentencePiece's own ``encode(lines, num_threads=T)`` of the same lines with the same model, interleaved
   rounds; the issue's goal is a store at least 80% as fast.
c. **Start-up**: ``transformer train`` with the store already built, until its first training step is
   recorded (goal at 36M: 10 s); also with ``data.token_store: false`` up to ``--in-memory-max-pairs``.
   With ``--startup-only`` only this runs (store side), on the stores an earlier run left in ``WORK``: a
   re-measurement after a change to the start-up path, in minutes instead of hours.
d. **Training steps**, at the largest size up to ``--in-memory-max-pairs``: steps per second with batches
   read from the store against the in-memory corpus, same model and batches (goal: within 5%).

The model for c and d is the benchmark suite's small shape (d_model 256, 3+3 layers) with the paper's
37,000-piece vocabulary, fp32 on the CPU, at 4,096 tokens per batch: a small model makes the data path's share
of a step large, so d is a harsh test. Reports go to ``--output-dir`` as ``<timestamp>.json`` and ``.md`` plus
``latest.*``, opening with the CPU model and flags, the date, the commit and the command.
"""

import argparse
import datetime
import json
import shlex
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if not __package__:  # run by path, where the package imports below fail: say how to run it instead
    sys.exit(
        f"run from the repository root: python -m benchmarks.token_store {shlex.join(sys.argv[1:])}".rstrip()
    )

import yaml

from benchmarks.bench_environment import describe_environment
from benchmarks.bench_settings import MODEL_SHAPES
from benchmarks.bench_token_store import run_child, worker_command
from benchmarks.bench_worker import REPOSITORY
from benchmarks.large_corpus import generate_or_reuse, multi30k_training_files
from benchmarks.token_store_report import render_markdown
from transformer.data.corpora.large_corpus import read_large_corpus_manifest
from transformer.data.pipeline.token_store import read_manifest
from transformer.data.pipeline.token_store_builder import encoding_threads
from transformer.data.prepare import TOKEN_STORE_DIR

DEFAULT_OUTPUT_DIR = REPOSITORY / "benchmarks" / "results" / "token_store"
#: Put in every run directory this benchmark makes, so that it deletes no directory it did not make.
RUN_MARKER = ".token-store-benchmark"


def parse_sizes(text: str) -> list[int]:
    """Read ``--pairs``: a comma-separated list of positive integers, returned in increasing order.

    Parameters
    ----------
    text : str
        E.g. ``"1000000,4500000,36000000"``.

    Returns
    -------
    list of int
        The distinct sizes, smallest first.

    Notes
    -----
    Raises argparse.ArgumentTypeError for anything else, which argparse reports in one line.
    """
    try:
        sizes = sorted({int(item) for item in text.split(",") if item.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None
    if not sizes or sizes[0] <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give at least one positive number of pairs")
    return sizes


def build_parser() -> argparse.ArgumentParser:
    """Describe the command line.

    Returns
    -------
    argparse.ArgumentParser
        The parser (``--help`` lists the options).

    Notes
    -----
    Defaults: the issue's sizes, the paper's vocabulary and ``max_len`` of ``configs/base.yaml``.
    """
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.token_store", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--pairs", type=parse_sizes, default=parse_sizes("1000000,4500000,36000000"))
    parser.add_argument("--work-dir", type=Path, default=DEFAULT_OUTPUT_DIR / "work", help="corpora and runs")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT_DIR, help="where reports go")
    parser.add_argument("--source-files", type=Path, nargs=2, default=None, help="corpus to recombine")
    parser.add_argument("--mirror", default=None, help="where to copy Multi30k from when the cache lacks it")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated corpora")
    parser.add_argument("--vocab-size", type=int, default=37000, help="joint BPE pieces (the paper's 37,000)")
    parser.add_argument("--max-len", type=int, default=256, help="length filter (configs/base.yaml's)")
    parser.add_argument("--threads", type=int, default=encoding_threads(), help="encoding and torch threads")
    parser.add_argument(
        "--encode-pairs", type=int, default=1_000_000, help="lines of the encoding comparison"
    )
    parser.add_argument("--in-memory-max-pairs", type=int, default=1_000_000, help="largest in-memory size")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of the encoding and start-up timings")
    parser.add_argument(
        "--startup-only",
        action="store_true",
        help="only time `transformer train`'s start-up, on the stores an earlier run of this benchmark prepared",
    )
    parser.add_argument("--step-repeats", type=int, default=20, help="timed training steps per side")
    parser.add_argument("--timeout", type=float, default=4 * 3600, help="seconds allowed to each process")
    return parser


def experiment_values(data_dir: Path, args: argparse.Namespace, token_store: bool) -> dict[str, Any]:
    """The experiment the ``transformer`` commands and the steps worker run, as YAML-ready values.

    Parameters
    ----------
    data_dir : pathlib.Path
        The generated corpus.
    args : argparse.Namespace
        Vocabulary, ``max_len`` and threads.
    token_store : bool
        ``data.token_store``.

    Returns
    -------
    dict
        ``model``, ``data`` and ``train`` sections.

    Notes
    -----
    Every automatic default is fixed (precision, threads, attention path, device), so no probe runs inside a
    timed start-up; one step, logged, and no validation split.
    """
    return {
        "model": {
            **MODEL_SHAPES["small"],
            "vocab_size": args.vocab_size,
            "attention_implementation": "fused",
        },
        "data": {
            "corpus": "directory",
            "data_dir": str(data_dir),
            "max_len": args.max_len,
            "token_store": token_store,
        },
        "train": {
            "max_tokens": 4096,
            "max_steps": 1,
            "log_every": 1,
            "validate_every": 0,
            "checkpoint_every": 0,
            "keep_checkpoints": 1,
            "precision": "fp32",
            "threads": args.threads,
            "device": "cpu",
        },
    }


def fresh_run_dir(path: Path) -> Path:
    """Empty a run directory this benchmark made before (refusing any other), and mark it as its own."""
    if path.exists():
        if not (path / RUN_MARKER).exists():
            raise SystemExit(
                f"{path} exists and was not made by this benchmark; delete it or use another --work-dir"
            )
        shutil.rmtree(path)
    path.mkdir(parents=True)
    (path / RUN_MARKER).touch()
    return path


def prepared_run_dir(path: Path) -> Path:
    """Return a run directory this benchmark made and prepared a store in, or exit naming what is missing."""
    if not (path / RUN_MARKER).exists():
        raise SystemExit(
            f"--startup-only: {path} was not made by this benchmark; run it once without --startup-only"
        )
    if read_manifest(path / TOKEN_STORE_DIR) is None or not (path / "config-store.yaml").exists():
        raise SystemExit(
            f"--startup-only: {path} holds no finished token store; run once without --startup-only"
        )
    return path


def existing_corpus(path: Path, pairs: int) -> dict[str, Any]:
    """Describe the corpus already in ``path`` as :func:`generate_or_reuse` would, without checking its sources.

    Parameters
    ----------
    path : pathlib.Path
        A corpus directory an earlier run generated.
    pairs : int
        The size it must have.

    Returns
    -------
    dict
        ``generate_or_reuse``'s record with ``reused`` true.

    Notes
    -----
    ``--startup-only`` times the store that is there: whether the corpus would be regenerated today (its
    Multi30k sources touched since, say) does not matter, and regenerating it would make ``transformer train``
    rebuild the store, which :func:`measure_startup` refuses to report as a start-up time anyway.
    """
    manifest = read_large_corpus_manifest(path)
    if manifest is None or manifest["pairs"] != pairs:
        raise SystemExit(f"--startup-only: {path} holds no generated corpus of {pairs:,} pairs")
    files = [path / f"train.{manifest[side]}" for side in ("source_lang", "target_lang")]
    return {
        "pairs": pairs,
        "seed": manifest["seed"],
        "files": [str(file) for file in files],
        "bytes": sum(file.stat().st_size for file in files),
        "reused": True,
        "seconds": None,
        "pairs_per_second": None,
        "statistics": manifest["statistics"],
        "single_pair_lines": manifest["single_pair_lines"],
    }


def worker_result(run: Any) -> Any:
    """The JSON a worker printed last."""
    return json.loads(run.output_tail.strip().splitlines()[-1])


def describe_run(run: Any) -> dict[str, Any]:
    """A child process's record: seconds, peak memory, milestones."""
    return {"seconds": run.seconds, "peak_rss_bytes": run.peak_rss_bytes, "milestones": run.milestones}


def measure_prepare(
    files: tuple[Path, Path], run_dir: Path, config_path: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """Learn the vocabulary in one process, then build the store with ``transformer prepare`` in another.

    Parameters
    ----------
    files : (pathlib.Path, pathlib.Path)
        The corpus.
    run_dir : pathlib.Path
        The fresh run directory; receives ``tokenizer.model`` and ``token_store/train``.
    config_path : pathlib.Path
        The experiment with ``data.token_store: true``.
    args : argparse.Namespace
        Vocabulary size and timeout.

    Returns
    -------
    dict
        ``vocabulary`` and ``store``: seconds and peak resident bytes of each process; the store's pairs,
        tokens, dropped pairs, bytes on disk and ``build_seconds``, the time between the prepare's lines
        announcing the encoding and its result (the build alone, without starting Python and torch).

    Notes
    -----
    Two processes so that each phase's peak memory is its own; together they are what one ``transformer
    prepare`` does from scratch (checked: the second reuses the first's vocabulary).
    """
    worker_files = {"source-file": files[0], "target-file": files[1], "run-dir": run_dir}
    vocabulary = run_child(
        worker_command("vocabulary", {**worker_files, "vocab-size": args.vocab_size}),
        run_dir / "logs" / "vocabulary.log",
        args.timeout,
    ).check("learning the vocabulary")
    command = [
        sys.executable,
        "-m",
        "transformer.cli",
        "prepare",
        "--config",
        str(config_path),
        "--output-dir",
        str(run_dir),
    ]
    milestones = {
        "store_build_started": lambda output: "token store: encoding" in output,
        "store_built": lambda output: "train: kept" in output,
    }
    prepare = run_child(command, run_dir / "logs" / "prepare.log", args.timeout, milestones)
    prepare.check("transformer prepare")
    if "vocabulary: reusing" not in prepare.output_tail:
        raise RuntimeError(f"transformer prepare learned its own vocabulary:\n{prepare.output_tail}")
    manifest = read_manifest(run_dir / TOKEN_STORE_DIR)
    assert manifest is not None  # the prepare succeeded
    return {
        "vocabulary": {**describe_run(vocabulary), **worker_result(vocabulary)},
        "store": {
            **describe_run(prepare),
            **{name: manifest[name] for name in ("pairs", "input_pairs", "tokens", "dropped", "dtype")},
            "bytes": sum(entry["bytes"] for entry in manifest["files"].values()),
            "build_seconds": prepare.milestones["store_built"] - prepare.milestones["store_build_started"],
        },
    }


def store_not_reused_as_is(train_log: str) -> str | None:
    """Say why a ``transformer train`` log is not a start-up on a ready store, or None when it is.

    Parameters
    ----------
    train_log : str
        The run's standard output and error.

    Returns
    -------
    str or None
        "rebuilt the token store" (the corpus, vocabulary or max_len no longer matched), "re-hashed the
        corpus before reusing the token store" (the files' times had changed: the next start compares times
        alone), or None.

    Notes
    -----
    Either would put seconds to minutes of preparation into a figure meant to time the start of training.
    """
    if "token store: encoding" in train_log:
        return "rebuilt the token store (the corpus, vocabulary or max_len no longer match it)"
    if "their SHA-256 did not" in train_log:
        return "re-hashed the corpus before reusing the token store (its files' times changed; rerun)"
    return None


def measure_startup(run_dir: Path, config_path: Path, label: str, args: argparse.Namespace) -> dict[str, Any]:
    """Time ``transformer train`` from its start to its first recorded step, ``--repeats`` times.

    Parameters
    ----------
    run_dir : pathlib.Path
        A prepared run directory (vocabulary and store); checkpoints and metrics are removed before each run.
    config_path : pathlib.Path
        The experiment (store or in-memory).
    label : str
        ``"store"`` or ``"in_memory"``, for the log names.
    args : argparse.Namespace
        Repeats and timeout.

    Returns
    -------
    dict
        Per run: seconds to ``data_ready`` (its ``train: kept ...`` line) and to ``first_step`` (its first
        record in ``metrics.jsonl``, so the step itself included), the first step's own seconds (the record's
        ``elapsed_seconds``), the process's peak memory; and the medians of the three times.

    Notes
    -----
    The times include starting Python and importing torch, as a user waits for them.
    """
    metrics = run_dir / "metrics.jsonl"
    milestones = {
        "data_ready": lambda output: "train: kept" in output,
        "first_step": lambda output: (
            metrics.exists() and '"kind": "train"' in metrics.read_text(encoding="utf-8")
        ),
    }
    command = [
        sys.executable,
        "-m",
        "transformer.cli",
        "train",
        "--config",
        str(config_path),
        "--output-dir",
        str(run_dir),
    ]
    runs = []
    for repeat in range(args.repeats):
        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
        metrics.unlink(missing_ok=True)
        log = run_dir / "logs" / f"train-{label}-{repeat}.log"
        run = run_child(command, log, args.timeout, milestones)
        run.check(f"transformer train ({label})")
        if label == "store":
            refusal = store_not_reused_as_is(log.read_text(encoding="utf-8", errors="replace"))
            if refusal:
                raise RuntimeError(
                    f"transformer train {refusal} in {run_dir} (see {log}): not a start-up time"
                )
        first_record = json.loads(metrics.read_text(encoding="utf-8").splitlines()[0])
        runs.append({**describe_run(run), "first_step_own_seconds": first_record["elapsed_seconds"]})
    shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
    times = {name: [run["milestones"].get(name, float("nan")) for run in runs] for name in milestones}
    times["first_step_own"] = [run["first_step_own_seconds"] for run in runs]
    return {
        "runs": runs,
        **{f"median_{name}_seconds": statistics.median(values) for name, values in times.items()},
    }


def attempt(measure: Any) -> Any:
    """Run one measurement; record its failure instead of losing the other sizes' results."""
    try:
        return measure()
    except Exception as error:  # recorded in the report; the other measurements still run
        message = f"{type(error).__name__}: {error}"
        return {"error": message if len(message) < 3000 else f"{message[:500]}\n...\n{message[-2500:]}"}


def has_error(value: Any) -> bool:
    """Whether a record holds a failed measurement anywhere."""
    if isinstance(value, dict):
        return "error" in value or any(has_error(item) for item in value.values())
    return isinstance(value, list) and any(has_error(item) for item in value)


def run_worker(worker: str, arguments: dict[str, object], run_dir: Path, timeout: float) -> dict[str, Any]:
    """Run a worker of ``benchmarks.bench_token_store`` in a fresh process; return its JSON and its process record."""
    run = run_child(worker_command(worker, arguments), run_dir / "logs" / f"{worker}.log", timeout)
    return {**worker_result(run.check(f"the {worker} worker")), "process": describe_run(run)}


def measure_size(
    pairs: int, args: argparse.Namespace, source_files: tuple[Path, Path], steps_here: bool
) -> dict[str, Any]:
    """Generate (or reuse) the corpus of one size and take every measurement on it.

    Parameters
    ----------
    pairs : int
        The size.
    args : argparse.Namespace
        The command line.
    source_files : (pathlib.Path, pathlib.Path)
        The corpus to recombine.
    steps_here : bool
        Whether this size gets the training-step comparison.

    Returns
    -------
    dict
        ``corpus``, ``prepare``, ``encoding``, ``startup`` (``store`` and, small enough, ``in_memory``) and
        ``steps``; a measurement that failed holds ``error`` instead.

    Notes
    -----
    The other measurements need the prepared store and vocabulary, so they are skipped when the prepare failed.
    """
    if args.startup_only:
        run_dir = prepared_run_dir(args.work_dir / f"run-{pairs}")
        corpus = existing_corpus(args.work_dir / f"corpus-{pairs}", pairs)
        startup = attempt(lambda: measure_startup(run_dir, run_dir / "config-store.yaml", "store", args))
        return {"pairs": pairs, "corpus": corpus, "startup": {"store": startup}}
    corpus = generate_or_reuse(source_files, args.work_dir / f"corpus-{pairs}", pairs, args.seed)
    files = (Path(corpus["files"][0]), Path(corpus["files"][1]))
    run_dir = fresh_run_dir(args.work_dir / f"run-{pairs}")
    (run_dir / "logs").mkdir()
    configs = {label: run_dir / f"config-{label}.yaml" for label in ("store", "in_memory")}
    for label, path in configs.items():
        values = experiment_values(files[0].parent, args, token_store=label == "store")
        path.write_text(yaml.safe_dump(values), encoding="utf-8")
    record: dict[str, Any] = {"pairs": pairs, "corpus": corpus}
    record["prepare"] = attempt(lambda: measure_prepare(files, run_dir, configs["store"], args))
    if "error" in record["prepare"]:
        return record
    common = {"source-file": files[0], "target-file": files[1], "run-dir": run_dir}
    encoding = {"max-len": args.max_len, "pairs": min(pairs, args.encode_pairs), "threads": args.threads}
    encoding["repeats"] = args.repeats
    record["encoding"] = attempt(
        lambda: run_worker("encoding", {**common, **encoding}, run_dir, args.timeout)
    )
    record["startup"] = {"store": attempt(lambda: measure_startup(run_dir, configs["store"], "store", args))}
    if pairs <= args.in_memory_max_pairs:
        record["startup"]["in_memory"] = attempt(
            lambda: measure_startup(run_dir, configs["in_memory"], "in_memory", args)
        )
    if steps_here:
        steps = {"config": configs["store"], "repeats": args.step_repeats}
        record["steps"] = attempt(lambda: run_worker("steps", {**common, **steps}, run_dir, args.timeout))
    return record


def write_reports(record: dict[str, Any], output_dir: Path, stamp: str) -> list[Path]:
    """Write ``<stamp>.json``, ``<stamp>.md``, ``latest.json`` and ``latest.md`` atomically; return the paths."""
    from transformer.atomic_files import write_text_atomically

    as_json, as_markdown = json.dumps(record, indent=1, default=str) + "\n", render_markdown(record)
    paths = []
    for name, text in (
        (f"{stamp}.json", as_json),
        (f"{stamp}.md", as_markdown),
        ("latest.json", as_json),
        ("latest.md", as_markdown),
    ):
        paths.append(output_dir / name)
        write_text_atomically(paths[-1], text)
    return paths


def main(argv: list[str] | None = None) -> int:
    """Measure every size on the command line and write the reports after each one.

    Parameters
    ----------
    argv : list of str or None
        The arguments (``--help`` lists them); None reads ``sys.argv``.

    Returns
    -------
    int
        The exit status: 1 if any measurement failed, else 0.

    Notes
    -----
    The reports are rewritten after each size, so a long run that is stopped keeps what it measured.
    """
    args = build_parser().parse_args(argv)
    for name in ("threads", "encode_pairs", "repeats", "step_repeats"):
        if getattr(args, name) <= 0:
            raise SystemExit(f"--{name.replace('_', '-')}={getattr(args, name)} must be positive")
    source_files = tuple(args.source_files) if args.source_files else multi30k_training_files(args.mirror)
    small_enough = [pairs for pairs in args.pairs if pairs <= args.in_memory_max_pairs]
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    record: dict[str, Any] = {
        "environment": describe_environment(args.threads, REPOSITORY, no_tcmalloc=False),
        # transformer prepare encodes with every CPU this process may use, whatever --threads says.
        "settings": {**vars(args), "prepare_threads": encoding_threads()},
        "sizes": [],
    }
    for pairs in args.pairs:
        started = time.perf_counter()
        print(f"[token store] {pairs:,} pairs ...", file=sys.stderr, flush=True)
        steps_here = bool(small_enough) and pairs == max(small_enough)
        record["sizes"].append(measure_size(pairs, args, source_files, steps_here))
        paths = write_reports(record, args.output_dir, stamp)
        print(
            f"[token store] {pairs:,} pairs: {time.perf_counter() - started:.0f} s",
            file=sys.stderr,
            flush=True,
        )
    for path in paths:
        print(path)
    return 1 if has_error(record["sizes"]) else 0


if __name__ == "__main__":
    sys.exit(main())
