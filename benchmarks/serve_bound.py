"""The in-process bound of step-level batching at a fixed number of sentences in flight (issue #27).

From the repository root:

    python -m benchmarks.serve_bound --checkpoint runs/multi30k --sentences data/multi30k/val.en.gz
    python -m benchmarks.serve_bound ... --in-flight 8,64 --passes 3 --threads 2

``benchmarks.serve`` measures the server through HTTP with closed-loop clients: at 64 clients at most 64
sentences are ever in flight. This benchmark asks what the search itself can do under that constraint, with no
HTTP, no event loop and no clients competing for the cores, in one process:

- **offline**: ``Translator.translate`` of all the sentences (what ``transformer translate`` does: longest-first
  batches of ``--max-batch-tokens`` tokens), the baseline of the serving benchmark's "vs offline" ratios;
- **offline, N at a time**: ``Translator.translate`` on consecutive chunks of N sentences, static batching
  that never holds more than N sentences;
- **continuous, N in flight**: one :class:`~transformer.serving.continuous_batching.ContinuousBatch` kept at N
  sentences, as the server's worker keeps it under N closed-loop clients: a sentence that finishes is replaced
  by the next one, and waiting sentences join when the worker's admission rule allows (every
  ``--admit-every`` steps, or once ``ADMISSION_GROUP`` wait, or when the batch is empty).

Each pass reports sentences/s of the three, the continuous batch's mean rows per decoder step, and how many
sentences the continuous batch translated exactly as offline did (all of them, in fp32). The ratio
continuous / offline is what a server holding one sentence per client request can reach at N clients on
this machine; the serving benchmark's ratio at N clients should be read against it. Reports go to
``--output-dir`` as ``serve-bound-<timestamp>.json`` and ``.md`` plus ``serve-bound-latest.*``.
"""

import argparse
import dataclasses
import datetime
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

import torch

from benchmarks.bench_allocator import reexecute_under_tcmalloc
from benchmarks.bench_environment import describe_environment
from transformer.atomic_files import write_json_atomically, write_text_atomically
from transformer.command_checks import integer_in_range, integers_in_range
from transformer.data.pipeline.text_files import read_lines
from transformer.serving.continuous_batching import ContinuousBatch, SentenceToDecode
from transformer.serving.model_worker import ADMISSION_GROUP
from transformer.serving.served_model import ServedModel, load_served_model

REPOSITORY = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT_DIR = REPOSITORY / "benchmarks" / "results"
#: The argparse type of the count options (each at least 1; argparse names the option in its one-line error).
POSITIVE = integer_in_range(1)


@dataclasses.dataclass(frozen=True)
class BoundPass:
    """One pass of the three measurements at one number of sentences in flight.

    Parameters
    ----------
    in_flight : int
        The most sentences in flight (the serving benchmark's client count).
    offline_per_s : float
        Sentences/s of ``Translator.translate`` on all the sentences.
    chunked_per_s : float
        Sentences/s of ``Translator.translate`` on consecutive chunks of ``in_flight`` sentences.
    continuous_per_s : float
        Sentences/s of a continuous batch kept at ``in_flight`` sentences.
    mean_rows_per_step : float
        The continuous batch's mean decoder rows (sentences x live beams) per step.
    identical : int
        Sentences whose continuous translation equals their offline one, character for character.

    Notes
    -----
    The three run one after the other in the same process, so they share the machine's state of the moment;
    compare ratios within a pass, not absolute figures across runs.
    """

    in_flight: int
    offline_per_s: float
    chunked_per_s: float
    continuous_per_s: float
    mean_rows_per_step: float
    identical: int

    def summary(self) -> dict[str, Any]:
        """The pass as a JSON-ready mapping, with the two ratios to offline.

        Returns
        -------
        dict
            The fields, rounded, plus ``chunked_vs_offline`` and ``continuous_vs_offline``.

        Notes
        -----
        Ratios are rounded to 0.001: the serving targets are stated to the percent.
        """
        return {
            "in_flight": self.in_flight,
            "offline_per_s": round(self.offline_per_s, 2),
            "chunked_per_s": round(self.chunked_per_s, 2),
            "continuous_per_s": round(self.continuous_per_s, 2),
            "chunked_vs_offline": round(self.chunked_per_s / self.offline_per_s, 3),
            "continuous_vs_offline": round(self.continuous_per_s / self.offline_per_s, 3),
            "mean_rows_per_step": round(self.mean_rows_per_step, 1),
            "identical": self.identical,
        }


def translate_offline(
    served: ServedModel, sentences: list[str], chunk: int | None
) -> tuple[float, list[str]]:
    """Translate with ``Translator.translate``, all at once or in consecutive chunks.

    Parameters
    ----------
    served : ServedModel
        A PyTorch-engine model (its ``translator`` is set).
    sentences : list of str
        Source sentences.
    chunk : int or None
        Give the translator at most this many sentences per call; None for all in one call.

    Returns
    -------
    tuple of (float, list of str)
        Seconds taken, and the translations in input order.

    Notes
    -----
    One call sorts its sentences longest first into batches of ``max_tokens`` tokens; chunks cap what it can
    sort and batch, as a server holding ``chunk`` requests could.
    """
    assert served.translator is not None
    size = chunk or len(sentences)
    start = time.perf_counter()
    outputs: list[str] = []
    for first in range(0, len(sentences), size):
        outputs.extend(served.translator.translate(sentences[first : first + size]))
    return time.perf_counter() - start, outputs


def take_admissible(
    waiting: deque[SentenceToDecode], used_tokens: int, max_batch_tokens: int, beam: int
) -> list[SentenceToDecode]:
    """Pop waiting sentences, oldest first, while they fit the token budget, as the server's worker does.

    Parameters
    ----------
    waiting : deque of SentenceToDecode
        Sentences waiting to join, oldest first; the admitted ones are popped.
    used_tokens : int
        Source tokens x beam of the sentences running now (``ContinuousBatch.source_tokens``).
    max_batch_tokens : int
        The budget (``transformer serve --max-batch-tokens``).
    beam : int
        Rows per sentence.

    Returns
    -------
    list of SentenceToDecode
        The sentences to admit now, in order.

    Notes
    -----
    The rule of ``ModelWorker._take_admissible`` for continuous batching: a younger sentence never overtakes
    the oldest, and with nothing running one sentence goes in whatever its size.
    """
    taken: list[SentenceToDecode] = []
    while waiting:
        cost = used_tokens + beam * len(waiting[0].src_ids)
        if (used_tokens or taken) and cost > max_batch_tokens:
            break
        used_tokens = cost
        taken.append(waiting.popleft())
    return taken


def translate_continuously(
    served: ServedModel, sentences: list[str], in_flight: int, admit_every: int, max_batch_tokens: int = 4096
) -> tuple[float, list[str], float]:
    """Translate with one continuous batch kept at ``in_flight`` sentences, admitting as the server's worker.

    Parameters
    ----------
    served : ServedModel
        A PyTorch-engine model.
    sentences : list of str
        Source sentences (blank ones are not supported here: the server never decodes them).
    in_flight : int
        The most sentences in the batch or waiting to join it at once (at least 1).
    admit_every : int
        Waiting sentences join every this many steps, or once ``ADMISSION_GROUP`` wait, or when the batch is
        empty (``transformer serve --admit-every``).
    max_batch_tokens : int
        The token budget of admissions (``transformer serve --max-batch-tokens``).

    Returns
    -------
    tuple of (float, list of str, float)
        Seconds taken (encoding included, as the offline path includes it), the translations in input order,
        and the mean rows per decoder step.

    Raises
    ------
    ValueError
        For ``in_flight`` or ``admit_every`` under 1.

    Notes
    -----
    A finished sentence's slot is taken by the next sentence in order, which then waits for its admission:
    the server's closed loop at ``in_flight`` clients without the clients, the HTTP path and the event loop.
    """
    if in_flight < 1 or admit_every < 1:
        raise ValueError(f"in_flight and admit_every must be at least 1, got {in_flight} and {admit_every}")
    beam = served.decode_config.beam_size
    batch = ContinuousBatch(served.engine_model, beam)  # type: ignore[arg-type]
    start = time.perf_counter()
    queued = deque(
        SentenceToDecode(index, served.encode(text), served.decode_config)
        for index, text in enumerate(sentences)
    )
    waiting: deque[SentenceToDecode] = deque()
    outputs = [""] * len(sentences)
    steps = rows = steps_since_admission = 0
    with torch.inference_mode():
        while queued or waiting or batch.num_sentences:
            while queued and batch.num_sentences + len(waiting) < in_flight:
                waiting.append(queued.popleft())  # a client whose answer came sends its next sentence
            steps_since_admission += 1
            due = (
                not batch.num_sentences
                or len(waiting) >= ADMISSION_GROUP
                or steps_since_admission >= admit_every
            )
            joining = take_admissible(waiting, batch.source_tokens, max_batch_tokens, beam) if due else []
            if joining:
                batch.admit(joining)
                steps_since_admission = 0
            rows += batch.num_rows
            steps += 1
            for result in batch.step():
                index = result.key
                assert isinstance(index, int)
                outputs[index] = served.decode(result.hypotheses[0].tokens if result.hypotheses else [])
    return time.perf_counter() - start, outputs, rows / max(steps, 1)


def run_passes(
    served: ServedModel,
    sentences: list[str],
    in_flight: int,
    admit_every: int,
    max_batch_tokens: int,
    passes: int,
) -> list[BoundPass]:
    """Measure offline, chunked and continuous translation ``passes`` times at one number in flight.

    Parameters
    ----------
    served : ServedModel
        A PyTorch-engine model, warmed up.
    sentences : list of str
        Non-blank source sentences.
    in_flight : int
        The most sentences in flight.
    admit_every : int
        The continuous batch's admission interval in steps.
    max_batch_tokens : int
        The offline batches' budget (set on the translator) and the continuous batch's admission budget.
    passes : int
        How many times to repeat the three measurements.

    Returns
    -------
    list of BoundPass
        One per pass.

    Notes
    -----
    Each pass runs the three in the same order (offline, continuous, N at a time), so a drift in the
    machine's speed over the run (another job, thermal limits) touches all three alike instead of biasing one
    measurement; compare within a pass.
    """
    results = []
    for _ in range(passes):
        offline_s, offline = translate_offline(served, sentences, None)
        continuous_s, continuous, mean_rows = translate_continuously(
            served, sentences, in_flight, admit_every, max_batch_tokens
        )
        chunked_s, _ = translate_offline(served, sentences, in_flight)
        identical = sum(one == other for one, other in zip(offline, continuous, strict=True))
        count = len(sentences)
        results.append(
            BoundPass(
                in_flight, count / offline_s, count / chunked_s, count / continuous_s, mean_rows, identical
            )
        )
        print(f"{in_flight} in flight: {results[-1].summary()}", file=sys.stderr)
    return results


def render_markdown(record: dict[str, Any]) -> str:
    """The report as Markdown: environment, settings, one table row per pass.

    Parameters
    ----------
    record : dict
        What :func:`main` writes as JSON.

    Returns
    -------
    str
        Markdown text ending with a newline.

    Notes
    -----
    Opens with the CPU and the command, as every committed figure must say where it came from.
    """
    environment = record["environment"]
    lines = [
        "# Step-level batching's in-process bound (`benchmarks.serve_bound`)",
        "",
        f"- date: {environment['date_utc']}; commit: {environment['git_commit']}; torch {environment['torch']}",
        f"- CPU: {environment['cpu']['summary']}; threads: {record['threads']}; "
        f"allocator: {environment['allocator']}",
        f"- command: `{environment['command']}`",
        f"- checkpoint: {record['checkpoint']}; {record['sentences']} sentences from {record['sentences_file']}",
        f"- beam {record['beam']}, {record['precision']}, offline batches of {record['max_batch_tokens']} "
        f"tokens, admissions every {record['admit_every']} steps",
        "",
        "| in flight | offline sent/s | N at a time sent/s (vs offline) | continuous sent/s (vs offline) "
        "| rows/step | identical |",
        "|---|---|---|---|---|---|",
    ]
    for row in record["passes"]:
        lines.append(
            f"| {row['in_flight']} | {row['offline_per_s']:.1f} | {row['chunked_per_s']:.1f} "
            f"({row['chunked_vs_offline']:.2f}x) | {row['continuous_per_s']:.1f} "
            f"({row['continuous_vs_offline']:.2f}x) | {row['mean_rows_per_step']:.0f} "
            f"| {row['identical']}/{record['sentences']} |"
        )
    return "\n".join(lines) + "\n"


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    """Parse the command line.

    Parameters
    ----------
    argv : list of str or None
        Arguments without the program name; None for ``sys.argv[1:]``.

    Returns
    -------
    argparse.Namespace
        The options, with ``in_flight`` parsed to a list of positive ints.

    Notes
    -----
    A bad ``--in-flight`` list or a count under 1 is refused by argparse with one line naming the option.
    """
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.serve_bound", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--checkpoint", type=Path, required=True, help="checkpoint or run directory")
    parser.add_argument(
        "--sentences", type=Path, required=True, help="source sentences, one per line (.gz ok)"
    )
    parser.add_argument("--max-sentences", type=POSITIVE, default=1014, help="use the first N (default 1014)")
    parser.add_argument(
        "--in-flight", type=integers_in_range(1), default=(64,), help="sentences in flight (default 64)"
    )
    parser.add_argument("--passes", type=POSITIVE, default=2, help="passes per count (default 2)")
    parser.add_argument("--threads", type=POSITIVE, default=2, help="PyTorch threads (default 2)")
    parser.add_argument("--beam", type=POSITIVE, default=None, help="beam size (default: the checkpoint's)")
    parser.add_argument("--precision", choices=("fp32", "bf16", "int8"), default="fp32")
    parser.add_argument(
        "--max-batch-tokens", type=POSITIVE, default=4096, help="offline and admission budget (4096)"
    )
    parser.add_argument(
        "--admit-every", type=POSITIVE, default=2, help="as serve's --admit-every (default 2)"
    )
    parser.add_argument("--no-tcmalloc", action="store_true", help="keep glibc malloc (default: tcmalloc)")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT_DIR, help="where reports go")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the passes and write the report.

    Parameters
    ----------
    argv : list of str or None
        Arguments without the program name; None for ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit status (0).

    Notes
    -----
    Reports are written atomically, so an interrupted run leaves the previous ``serve-bound-latest`` whole.
    """
    args = parse_arguments(argv)
    torch.set_num_threads(args.threads)
    try:
        sentences = [line for line in read_lines(args.sentences) if line.strip()][: args.max_sentences]
        served = load_served_model("bound", [args.checkpoint], "pytorch", "cpu", args.precision)
    except (OSError, ValueError) as error:  # the library's one-line errors name the file
        raise SystemExit(f"python -m benchmarks.serve_bound: {error}") from None
    if not sentences:
        raise SystemExit(f"python -m benchmarks.serve_bound: --sentences {args.sentences}: no non-blank line")
    if args.beam is not None:
        served = dataclasses.replace(
            served, decode_config=dataclasses.replace(served.decode_config, beam_size=args.beam)
        )
    assert served.translator is not None
    served.translator.decode_config = served.decode_config
    served.translator.max_tokens = args.max_batch_tokens
    # Warm-up of both paths over every batch shape they meet first (allocator pools, kernels' first use).
    served.translator.translate(sentences)
    translate_continuously(
        served, sentences[:128], max(args.in_flight), args.admit_every, args.max_batch_tokens
    )
    passes = [
        row
        for count in args.in_flight
        for row in run_passes(served, sentences, count, args.admit_every, args.max_batch_tokens, args.passes)
    ]
    environment = describe_environment(args.threads, REPOSITORY, args.no_tcmalloc)
    if argv is not None:  # called from Python: the command is not this process's
        environment["command"] = " ".join(["python -m benchmarks.serve_bound", *argv])
    record = {
        "environment": environment,
        "threads": args.threads,
        "checkpoint": str(args.checkpoint),
        "sentences_file": str(args.sentences),
        "sentences": len(sentences),
        "beam": served.decode_config.beam_size,
        "precision": args.precision,
        "max_batch_tokens": args.max_batch_tokens,
        "admit_every": args.admit_every,
        "passes": [row.summary() for row in passes],
    }
    args.output_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")
    for name in (f"serve-bound-{stamp}", "serve-bound-latest"):
        write_json_atomically(args.output_dir / f"{name}.json", record)
        write_text_atomically(args.output_dir / f"{name}.md", render_markdown(record))
    print(render_markdown(record))
    return 0


if __name__ == "__main__":
    reexecute_under_tcmalloc("--no-tcmalloc" in sys.argv[1:])  # as benchmarks.serve's servers and baseline
    sys.exit(main())
