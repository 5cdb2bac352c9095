"""The token-store benchmark's measurements: commands in child processes, and the workers it runs.

``benchmarks.token_store`` runs each measurement in a fresh process, so peak memory is that of the measured
work alone and start-up costs are paid as a user pays them:

- :func:`run_child` runs a command (the ``transformer`` command line itself, or a worker of this module),
  polling every 20 ms for milestones (a line in its output, a record in a file) and reading the child's own
  peak resident memory (``VmHWM`` of ``/proc/PID/status``, read while it runs).
- The workers, ``python -m benchmarks.bench_token_store --worker NAME ...``, print one JSON line:
  ``vocabulary`` learns the joint BPE model as ``prepare_data`` does with ``data.token_store: true``;
  ``encoding`` times the store's build against SentencePiece's own multi-threaded encoding of the same lines;
  ``steps`` times training steps fed from the store against steps fed from the in-memory corpus.
"""

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.bench_worker import REPOSITORY

KIB = 1024
#: How often a running child's milestones and exit are polled; the resolution of the times measured.
POLL_SECONDS = 0.02


@dataclass
class ChildRun:
    """What one measured child process did.

    Parameters
    ----------
    seconds : float
        Wall-clock time from just before the start to the exit (within ``POLL_SECONDS``).
    peak_rss_bytes : int
        The child's peak resident set size: its last ``VmHWM`` read while it ran (this process alone, not its
        own children); ``ru_maxrss`` of ``os.wait4`` only where ``/proc`` could not be read.
    returncode : int
        Its exit status (negative: killed by that signal).
    output_tail : str
        The last 3,000 characters of its stdout and stderr.
    milestones : dict of str to float
        Seconds after the start at which each milestone was first seen.

    Notes
    -----
    Raise on a failed run with :meth:`check`.
    """

    seconds: float
    peak_rss_bytes: int
    returncode: int
    output_tail: str
    milestones: dict[str, float] = field(default_factory=dict)

    def check(self, description: str) -> "ChildRun":
        """Return the run if it exited 0, else raise RuntimeError with its status and output.

        Parameters
        ----------
        description : str
            What the child did, for the message.

        Returns
        -------
        ChildRun
            This run.

        Notes
        -----
        The message ends with the child's last output lines.
        """
        if self.returncode != 0:
            raise RuntimeError(f"{description} failed (exit {self.returncode}):\n{self.output_tail}")
        return self


def run_child(
    command: list[str],
    log_path: Path,
    timeout: float,
    milestones: dict[str, Callable[[str], bool]] | None = None,
) -> ChildRun:
    """Run a command in the repository root, timing it, its milestones and its peak memory.

    Parameters
    ----------
    command : list of str
        The program and its arguments.
    log_path : pathlib.Path
        Receives its stdout and stderr (a file, not a pipe: nothing can block on a full pipe).
    timeout : float
        Seconds before it is killed (the run then reports the signal as its status).
    milestones : dict of str to callable, or None
        Name to a test of the output so far; the first poll at which it holds is that milestone's time. A
        test may also look at files the child writes.

    Returns
    -------
    ChildRun
        Times, peak memory, status and output.

    Notes
    -----
    The child inherits this environment plus ``PYTHONUNBUFFERED=1``, so its lines reach the log as printed.
    Linux: the peak is the child's own high-water mark, ``VmHWM`` of ``/proc/PID/status``, read at every
    poll (a high-water mark, so only a peak reached within the last poll interval before exit could be
    missed). ``ru_maxrss`` from ``os.wait4`` is not used where ``VmHWM`` was read: Linux carries it over
    ``fork`` and ``exec``, so a child of a large process (a test suite at 2.5 GB) reports at least its
    parent's size; it remains the fallback for a child too short-lived to be read.
    """
    tests = milestones or {}
    seen: dict[str, float] = {}
    environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
    started = time.perf_counter()
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, cwd=REPOSITORY, env=environment
        )
    high_water_bytes = 0
    while True:
        high_water_bytes = max(high_water_bytes, _high_water_bytes(process.pid))
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        elapsed = time.perf_counter() - started
        pending = [name for name in tests if name not in seen]
        if pending:
            output = log_path.read_text(encoding="utf-8", errors="replace")
            seen.update({name: elapsed for name in pending if tests[name](output)})
        if pid:
            break
        if elapsed > timeout:
            process.kill()
        time.sleep(POLL_SECONDS)
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, so Popen must not wait again
    output = log_path.read_text(encoding="utf-8", errors="replace")
    peak_bytes = high_water_bytes or usage.ru_maxrss * KIB
    return ChildRun(elapsed, peak_bytes, process.returncode, output[-3000:], seen)


def _high_water_bytes(pid: int) -> int:
    """Read a live process's peak resident set (``VmHWM``) in bytes; 0 once it has exited or on no /proc."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status_file:
            for line in status_file:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * KIB
    except (OSError, ValueError, IndexError):
        pass
    return 0


def worker_command(worker: str, arguments: dict[str, object]) -> list[str]:
    """Build ``python -m benchmarks.bench_token_store --worker NAME --key value ...``.

    Parameters
    ----------
    worker : str
        ``"vocabulary"``, ``"encoding"`` or ``"steps"``.
    arguments : dict of str to object
        Options without their dashes; paths are made absolute.

    Returns
    -------
    list of str
        The command.

    Notes
    -----
    Runs in the repository root (:func:`run_child`), where ``-m`` finds the package.
    """
    command = [sys.executable, "-m", "benchmarks.bench_token_store", "--worker", worker]
    for name, value in arguments.items():
        command += [f"--{name}", str(value.absolute() if isinstance(value, Path) else value)]
    return command


def learn_vocabulary(files: tuple[Path, Path], model_path: Path, vocab_size: int) -> dict[str, Any]:
    """Learn the joint BPE model from a stream of both sides, as ``prepare_data`` does for a token store.

    Parameters
    ----------
    files : (pathlib.Path, pathlib.Path)
        The training corpus.
    model_path : pathlib.Path
        Where ``tokenizer.model`` goes (the run directory's).
    vocab_size : int
        Pieces.

    Returns
    -------
    dict
        ``training_seconds`` (the ``Tokenizer.train`` call) and ``vocab_size``.

    Notes
    -----
    The same call as :func:`transformer.data.prepare.prepare_data` makes with ``data.token_store: true``:
    ``Tokenizer.train`` on the stream of source and target lines, which samples at most 2,000,000 sentences.
    """
    from transformer.data.pipeline.text_files import iter_parallel_lines
    from transformer.data.pipeline.tokenizer import Tokenizer

    started = time.perf_counter()
    tokenizer = Tokenizer.train(
        (side for pair in iter_parallel_lines(*files) for side in pair), model_path, vocab_size
    )
    return {"training_seconds": time.perf_counter() - started, "vocab_size": tokenizer.vocab_size}


def encode_chunks_with_sentencepiece(
    processor: Any, lines: list[tuple[str, str]], chunk_pairs: int, threads: int
) -> None:
    """Encode the lines' sources and targets with SentencePiece, chunk by chunk, and drop the ids.

    Parameters
    ----------
    processor : sentencepiece.SentencePieceProcessor
        The loaded joint BPE model.
    lines : list of (str, str)
        The pairs, in memory.
    chunk_pairs : int
        Pairs per ``encode`` call on each side, as the store's build chunks them.
    threads : int
        SentencePiece's ``num_threads``.

    Returns
    -------
    None

    Notes
    -----
    SentencePiece's side of :func:`compare_encoding`: the same chunks and threads as the store's build, so the
    two differ only in what the store adds to encoding.
    """
    for start in range(0, len(lines), chunk_pairs):
        chunk = lines[start : start + chunk_pairs]
        processor.encode([source for source, _ in chunk], num_threads=threads)
        processor.encode([target for _, target in chunk], num_threads=threads)


def compare_encoding(
    files: tuple[Path, Path],
    model_path: Path,
    max_len: int,
    pairs: int,
    threads: int,
    repeats: int,
    scratch: Path,
) -> dict[str, Any]:
    """Time building a token store from lines in memory against SentencePiece encoding the same lines.

    Parameters
    ----------
    files : (pathlib.Path, pathlib.Path)
        The corpus; its first ``pairs`` lines are read into memory once.
    model_path : pathlib.Path
        The joint BPE model both sides use.
    max_len : int
        The store's length filter.
    pairs : int
        Lines encoded per repeat.
    threads : int
        SentencePiece's threads, in both.
    repeats : int
        Timed rounds, interleaved (store, SentencePiece, store, ...) after one untimed round of each.
    scratch : pathlib.Path
        Where each store is built and deleted again (the deletion, four unlinks, is inside the timing).

    Returns
    -------
    dict
        Median seconds and pairs per second of each, and ``store_over_sentencepiece``: the store's throughput
        as a share of SentencePiece's (the issue's goal: at least 0.8); then :func:`project_thread_scaling`'s
        figures from the store's own serial work (a build from replayed ids, :class:`ReplayedEncoding`, on at
        most ``OVERHEAD_PAIRS`` lines).

    Notes
    -----
    The store's side is ``build_token_store`` as a prepare runs it (chunks encoded, filtered, flattened, hashed,
    written, fsynced); SentencePiece's is :func:`encode_chunks_with_sentencepiece`. Reading the text files is in
    neither (the lines are in memory), so the ratio isolates what the store adds to encoding.
    """
    import sentencepiece

    from benchmarks.bench_common import time_interleaved
    from transformer.data.pipeline.special_tokens import EOS_ID
    from transformer.data.pipeline.text_files import iter_parallel_lines
    from transformer.data.pipeline.token_store import store_key
    from transformer.data.pipeline.token_store_builder import CHUNK_PAIRS, build_token_store
    from transformer.data.pipeline.tokenizer import Tokenizer

    lines = list(itertools.islice(iter_parallel_lines(*files), pairs))
    tokenizer = Tokenizer.load(model_path)
    processor = sentencepiece.SentencePieceProcessor(model_file=str(model_path))
    key = store_key([], tokenizer.fingerprint, max_len, EOS_ID)
    builds = itertools.count()

    def build_store(pairs: list[tuple[str, str]], encoder: Any) -> None:
        directory = scratch / f"store-{next(builds)}"
        build_token_store(directory, pairs, encoder, max_len, key, num_threads=threads)
        shutil.rmtree(directory)

    candidates: dict[str, Callable[[], object]] = {
        "store": lambda: build_store(lines, tokenizer),
        "sentencepiece": lambda: encode_chunks_with_sentencepiece(processor, lines, CHUNK_PAIRS, threads),
    }
    timings = time_interleaved(candidates, 1, repeats)
    result: dict[str, Any] = {"pairs": len(lines), "threads": threads, "chunk_pairs": CHUNK_PAIRS}
    for name, timing in timings.items():
        result[name] = {**timing.to_dict(), "pairs_per_second": len(lines) / timing.median}
    result["store_over_sentencepiece"] = timings["sentencepiece"].median / timings["store"].median
    replayed = ReplayedEncoding(tokenizer, lines[:OVERHEAD_PAIRS], CHUNK_PAIRS)
    overhead = time_interleaved({"store": lambda: build_store(replayed.pairs, replayed)}, 1, repeats)["store"]
    # One thread's seconds per pair, as if the threads had shared the work perfectly.
    encoding_per_pair = timings["sentencepiece"].median * threads / len(lines)
    result.update(project_thread_scaling(encoding_per_pair, overhead.median / len(replayed.pairs)))
    return result


def project_thread_scaling(encoding_per_pair: float, serial_per_pair: float) -> dict[str, Any]:
    """Project the store's share of SentencePiece's throughput to more threads, Amdahl-style.

    Parameters
    ----------
    encoding_per_pair : float
        SentencePiece's seconds per pair on one thread (its measured time times its threads).
    serial_per_pair : float
        The store's own serial seconds per pair (the build from replayed ids).

    Returns
    -------
    dict
        ``microseconds_per_pair`` (``sentencepiece_one_thread``, ``store_serial``) and
        ``projected_store_over_sentencepiece``: thread count (1, 2, 4, 8, 16) to the projected ratio.

    Notes
    -----
    The projection assumes SentencePiece scales perfectly with threads while the store's own work stays serial:
    an upper bound on SentencePiece's speed, so a lower bound on the ratio a larger machine would see.
    """
    return {
        "microseconds_per_pair": {
            "sentencepiece_one_thread": 1e6 * encoding_per_pair,
            "store_serial": 1e6 * serial_per_pair,
        },
        "projected_store_over_sentencepiece": {
            count: (encoding_per_pair / count) / (encoding_per_pair / count + serial_per_pair)
            for count in (1, 2, 4, 8, 16)
        },
    }


#: Pairs whose ids are replayed to time the store's own work (:class:`ReplayedEncoding`): its cost per pair does
#: not depend on the count, and the ids are held as Python lists (about 2 KB per pair).
OVERHEAD_PAIRS = 50_000


class ReplayedEncoding:
    """A stand-in tokenizer that answers each ``encode_batch`` call with ids a real one computed beforehand.

    Parameters
    ----------
    tokenizer : Tokenizer
        The real tokenizer (its size and fingerprint are copied; it encodes ``pairs`` once, here).
    pairs : list of (str, str)
        The lines a store will be built from.
    chunk_pairs : int
        The builder's chunk size, so the calls come in the order precomputed: per chunk, sources then targets.

    Notes
    -----
    A store built through it does everything a real build does except encoding, so its time is the store's
    own work (filtering, flattening, hashing, writing): serial Python, which SentencePiece's threads cannot
    share.
    """

    def __init__(self, tokenizer: Any, pairs: list[tuple[str, str]], chunk_pairs: int) -> None:
        self.vocab_size, self.fingerprint, self.pairs = tokenizer.vocab_size, tokenizer.fingerprint, pairs
        self._answers = []
        for start in range(0, len(pairs), chunk_pairs):
            chunk = pairs[start : start + chunk_pairs]
            self._answers.append(tokenizer.encode_batch([source for source, _ in chunk], num_threads=1))
            self._answers.append(tokenizer.encode_batch([target for _, target in chunk], num_threads=1))
        self._calls = itertools.count()

    def encode_batch(self, texts: list[str], num_threads: int | None = None) -> list[list[int]]:
        """Return the next precomputed answer (the same lists on every build).

        Parameters
        ----------
        texts : list of str
            The sentences (only their count is checked).
        num_threads : int or None
            Ignored.

        Returns
        -------
        list of list of int
            Ids per sentence.

        Notes
        -----
        Raises RuntimeError if the builder asks in another order than precomputed.
        """
        answer = self._answers[next(self._calls) % len(self._answers)]
        if len(answer) != len(texts):
            raise RuntimeError("ReplayedEncoding: the builder asked for another chunk than precomputed")
        return answer


def first_epoch_batches(corpora: dict[str, Any], max_tokens: int, seed: int) -> dict[str, list[list[int]]]:
    """Batch each corpus as the training sampler does in epoch 0, and check that they batch alike.

    Parameters
    ----------
    corpora : dict of str to ParallelCorpus
        The corpora compared (the store and the in-memory one), by name.
    max_tokens : int
        The batch size in tokens.
    seed : int
        The sampler's seed.

    Returns
    -------
    dict of str to list of list of int
        Each corpus's batches of pair indices.

    Raises
    ------
    RuntimeError
        If the corpora give different batches: then the steps compared would differ in more than where the ids
        come from.

    Notes
    -----
    Both corpora hold the same pairs with the same lengths, so a correct store gives identical batches.
    """
    from transformer.data.pipeline.token_batch_sampler import TokenBatchSampler

    batches = {
        name: TokenBatchSampler(corpus.source_lengths, corpus.target_lengths, max_tokens, seed=seed).batches(
            0
        )
        for name, corpus in corpora.items()
    }
    if batches["store"] != batches["in_memory"]:
        raise RuntimeError("the store and the in-memory corpus give different batches")
    return batches


def compare_training_steps(
    files: tuple[Path, Path], run_dir: Path, config_path: Path, repeats: int, collate_batches: int
) -> dict[str, Any]:
    """Time training steps whose batches come from the token store against steps fed from memory.

    Parameters
    ----------
    files : (pathlib.Path, pathlib.Path)
        The training corpus, encoded here into Python lists for the in-memory side.
    run_dir : pathlib.Path
        A prepared run directory: ``tokenizer.model`` and ``token_store/train``.
    config_path : pathlib.Path
        The experiment (model, ``max_len``, ``max_tokens``, threads, precision).
    repeats : int
        Timed steps of each side, in interleaved rounds after two untimed ones.
    collate_batches : int
        Batches collated per timed repeat in the collation-only comparison.

    Returns
    -------
    dict
        ``steps``: median seconds and steps per second of each side and ``store_over_in_memory`` (the store's
        steps per second as a share of the in-memory path's; the issue's goal: within 5%, at least 0.95);
        ``collate``: milliseconds per batch of each side alone.

    Notes
    -----
    One ``Trainer`` takes every step, so both sides run the same model on the same batches
    (:func:`first_epoch_batches`); they differ only in where ``collate`` reads the ids, which is all the
    training loop does differently with a store. A side's step is collate plus ``Trainer.train_step``.
    """
    import tempfile

    from benchmarks.bench_common import time_interleaved
    from transformer.config.files import load_config
    from transformer.data.pipeline.batch import collate
    from transformer.data.pipeline.dataset import ParallelCorpus, encode_corpus
    from transformer.data.pipeline.stored_corpus import StoredCorpus
    from transformer.data.pipeline.text_files import read_parallel_files
    from transformer.data.pipeline.tokenizer import Tokenizer
    from transformer.data.prepare import TOKEN_STORE_DIR, TOKENIZER_FILE, TrainingData
    from transformer.training.trainer import Trainer

    experiment = load_config(config_path)
    tokenizer = Tokenizer.load(run_dir / TOKENIZER_FILE)
    corpora: dict[str, ParallelCorpus] = {
        "store": StoredCorpus.open(run_dir / TOKEN_STORE_DIR),
        "in_memory": encode_corpus(read_parallel_files(*files), tokenizer, experiment.data.max_len),
    }
    batches = first_epoch_batches(corpora, experiment.train.max_tokens, experiment.train.seed)
    data = TrainingData(train=corpora["store"], valid=None, tokenizer=tokenizer, split_files={"train": files})
    with tempfile.TemporaryDirectory() as scratch:
        trainer = Trainer(experiment, Path(scratch), data)
        schedules = {name: itertools.cycle(batches["store"]) for name in corpora}

        def step(name: str) -> Callable[[], object]:
            return lambda: trainer.train_step([collate(next(schedules[name]), corpora[name])])

        steps = time_interleaved({name: step(name) for name in corpora}, 2, repeats)

    def collate_only(corpus: ParallelCorpus) -> Callable[[], object]:
        return lambda: [collate(indices, corpus) for indices in batches["store"][:collate_batches]]

    collated = time_interleaved({name: collate_only(corpus) for name, corpus in corpora.items()}, 1, repeats)
    return {
        "pairs": len(corpora["store"]),
        "batches_per_epoch": len(batches["store"]),
        "max_tokens": experiment.train.max_tokens,
        "steps": {
            name: {**timing.to_dict(), "steps_per_second": 1 / timing.median}
            for name, timing in steps.items()
        }
        | {"store_over_in_memory": steps["in_memory"].median / steps["store"].median},
        "collate": {
            name: {**timing.to_dict(), "milliseconds_per_batch": 1000 * timing.median / collate_batches}
            for name, timing in collated.items()
        },
    }


def main(argv: list[str] | None = None) -> int:
    """Run one worker and print its result as one JSON line.

    Parameters
    ----------
    argv : list of str or None
        ``--worker NAME`` and that worker's options; None reads ``sys.argv``.

    Returns
    -------
    int
        The exit status: 0 (errors raise, with a traceback the parent reports).

    Notes
    -----
    Started by ``benchmarks.token_store`` through :func:`worker_command` and :func:`run_child`.
    """
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_token_store")
    parser.add_argument("--worker", choices=("vocabulary", "encoding", "steps"), required=True)
    parser.add_argument("--source-file", type=Path, required=True)
    parser.add_argument("--target-file", type=Path, required=True)
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--vocab-size", type=int, default=37000)
    parser.add_argument("--config", type=Path, default=None)
    parser.add_argument("--max-len", type=int, default=256)
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--collate-batches", type=int, default=50)
    args = parser.parse_args(argv)
    files = (args.source_file, args.target_file)
    model_path = args.run_dir / "tokenizer.model"
    if args.worker == "vocabulary":
        result = learn_vocabulary(files, model_path, args.vocab_size)
    elif args.worker == "encoding":
        scratch = args.run_dir / "encoding-scratch"
        scratch.mkdir(exist_ok=True)
        try:
            result = compare_encoding(
                files, model_path, args.max_len, args.pairs, args.threads, args.repeats, scratch
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    else:
        result = compare_training_steps(files, args.run_dir, args.config, args.repeats, args.collate_batches)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
