"""Load benchmark of ``transformer serve`` (issue #27): concurrent clients against offline translation.

From the repository root:

    python -m benchmarks.serve --checkpoint runs/multi30k --sentences data/multi30k/val.en.gz
    python -m benchmarks.serve --checkpoint runs/multi30k --sentences val.en.gz --quick      # about 2 minutes
    python -m benchmarks.serve ... --soak-minutes 10                                         # adds the soak

For each batching mode (``continuous``, ``request``) a server is started as its own process on 127.0.0.1
(``python -m transformer.cli serve``), and for each client count (1, 8, 64, 256) that many clients send the
sentences, one per request, each client waiting for its answer before sending the next, for a bounded time.
Reported per cell: sentences/s, and p50/p95/p99 request latency. In the same run, with no server running,
``Translator.translate`` translates the same sentences offline (what ``transformer translate`` does: same
model, search and precision) for the throughput baseline, and each sentence of the 1-client run alone for
the latency baseline. The issue's targets are checked beside the figures. The optional soak runs 64 clients
for ``--soak-minutes`` against the continuous server and samples its resident memory.

Everything talks to loopback only, every loop is bounded in count and time, and the servers are stopped at
the end (SIGTERM, then waited for). Servers and offline baseline run under the same allocator: tcmalloc where
installed (the command re-executes itself with it preloaded, as ``benchmarks.run`` does), unless
``--no-tcmalloc``; the report names both. Reports go to ``--output-dir`` as ``serve-<timestamp>.json`` and ``.md``
plus ``serve-latest.*``, opening with the CPU model and flags, the date, the commit and the command.
"""

import argparse
import asyncio
import dataclasses
import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import torch

from benchmarks.bench_allocator import (
    TCMALLOC_PATH,
    allocator_description,
    reexecute_under_tcmalloc,
    typed_command,
)
from benchmarks.bench_environment import cpu_description, git_commit
from transformer.command_checks import integer_in_range, integers_in_range
from transformer.data.pipeline.text_files import read_lines
from transformer.decoding.translator import Translator

REPOSITORY = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT_DIR = REPOSITORY / "benchmarks" / "results"
#: Longest wait for a server to start or stop, seconds.
SERVER_TIMEOUT_S = 120.0


@dataclasses.dataclass(frozen=True)
class LoadResult:
    """What one client count against one server gave."""

    clients: int
    sentences: int
    errors: int
    seconds: float
    latencies_ms: list[float]

    def summary(self) -> dict[str, Any]:
        """Throughput and latency percentiles, JSON-ready."""
        latencies = sorted(self.latencies_ms)
        return {
            "clients": self.clients,
            "sentences": self.sentences,
            "errors": self.errors,
            "seconds": round(self.seconds, 3),
            "sentences_per_s": round(self.sentences / self.seconds, 2) if self.seconds else None,
            "p50_ms": percentile(latencies, 50),
            "p95_ms": percentile(latencies, 95),
            "p99_ms": percentile(latencies, 99),
        }


def percentile(values: list[float], percent: float) -> float | None:
    """The nearest-rank percentile of sorted values, rounded to 0.01 ms (None for no values)."""
    if not values:
        return None
    rank = max(0, min(len(values) - 1, round(percent / 100 * len(values) + 0.5) - 1))
    return round(values[rank], 2)


def server_allocator(no_tcmalloc: bool) -> str:
    """Name the malloc the server processes run with: tcmalloc where installed (unless refused), else glibc's.

    Parameters
    ----------
    no_tcmalloc : bool
        The user's ``--no-tcmalloc``.

    Returns
    -------
    str
        ``"tcmalloc"``, ``"glibc malloc"``, or a tcmalloc the caller preloaded, named as such.

    Notes
    -----
    A tcmalloc already in ``LD_PRELOAD`` is inherited by the servers whatever ``--no-tcmalloc`` says.
    """
    if "tcmalloc" in os.environ.get("LD_PRELOAD", ""):
        return "tcmalloc" if not no_tcmalloc else "tcmalloc (preloaded by the caller; --no-tcmalloc ignored)"
    return "tcmalloc" if TCMALLOC_PATH.exists() and not no_tcmalloc else "glibc malloc"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LoopbackServer:
    """``transformer serve --checkpoint C`` with ``options`` in a process of its own on a free loopback port.

    A context manager: entering starts it and waits for ``/ready`` (at most ``SERVER_TIMEOUT_S``), leaving stops
    it with SIGTERM (killed if it does not end in time), so no server outlives the benchmark. ``no_tcmalloc``
    False preloads tcmalloc where installed, as the suite runs PyTorch.
    """

    def __init__(self, checkpoint: Path, options: list[str], log_path: Path, no_tcmalloc: bool) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.command = [
            sys.executable, "-m", "transformer.cli", "serve", "--checkpoint", str(checkpoint),
            "--port", str(self.port), "--device", "cpu", *options,
        ]  # fmt: skip
        self.log_path = log_path
        self.no_tcmalloc = no_tcmalloc
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> "LoopbackServer":
        log = self.log_path.open("wb")
        environment = dict(os.environ)  # the server imports the same installed package as this process
        preload = os.environ.get("LD_PRELOAD", "")
        if not self.no_tcmalloc and TCMALLOC_PATH.exists() and "tcmalloc" not in preload:
            # as the suite runs PyTorch (benchmarks/README.md), and as the offline baseline runs
            environment["LD_PRELOAD"] = " ".join(part for part in (preload, str(TCMALLOC_PATH)) if part)
        self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, env=environment)
        log.close()
        deadline = time.monotonic() + SERVER_TIMEOUT_S
        while True:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.process.kill()  # __exit__ does not run when __enter__ raises: no server may outlive us
                self.process.wait()
                raise RuntimeError(f"the server did not start; see {self.log_path}")
            try:
                if httpx.get(f"{self.url}/ready", timeout=2.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)

    def __exit__(self, *exc_info: object) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(SERVER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def resident_mib(self) -> float:
        """The server's resident memory (VmRSS), MiB."""
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text(encoding="utf-8").splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS line")


async def run_clients(
    url: str, sentences: list[str], clients: int, max_requests: int, seconds: float, beam: int | None
) -> LoadResult:
    """``clients`` closed-loop clients send sentences in order until ``max_requests`` or ``seconds`` run out."""
    next_index, latencies, errors = 0, [], 0
    deadline = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async def client(session: httpx.AsyncClient) -> None:
        nonlocal next_index, errors
        while next_index < max_requests and time.perf_counter() < deadline:
            sentence = sentences[next_index % len(sentences)]
            next_index += 1
            body: dict[str, Any] = {"text": [sentence]}
            if beam is not None:
                body["beam"] = beam
            start = time.perf_counter()
            try:
                reply = await session.post("/v1/translate", json=body)
                ok = reply.status_code == 200
            except httpx.HTTPError:
                ok = False
            if ok:
                latencies.append((time.perf_counter() - start) * 1000.0)
            else:
                errors += 1

    async with httpx.AsyncClient(base_url=url, timeout=SERVER_TIMEOUT_S, limits=limits) as session:
        start = time.perf_counter()
        await asyncio.gather(*(client(session) for _ in range(clients)))
        elapsed = time.perf_counter() - start
    return LoadResult(clients, len(latencies), errors, elapsed, latencies)


class ServerProcess(LoopbackServer):
    """The server under this benchmark's options (``batching``, precision, batch tokens, no queue limit)."""

    def __init__(self, args: argparse.Namespace, batching: str) -> None:
        options = [
            "--batching", batching, "--precision", args.precision, "--max-batch-tokens", str(args.max_batch_tokens),
            "--max-queue", "100000", "--max-chars", "100000", "--admit-every", str(args.admit_every),
        ]  # fmt: skip
        super().__init__(
            args.checkpoint, options, args.output_dir / f"serve-{batching}.log", args.no_tcmalloc
        )


def offline_baseline(args: argparse.Namespace, sentences: list[str], alone_count: int) -> dict[str, Any]:
    """Offline ``Translator.translate`` of the sentences (throughput) and of the first ones alone (latency).

    Parameters
    ----------
    args : argparse.Namespace
        The benchmark's options (checkpoint, precision, beam, batch budget).
    sentences : list of str
        The sentences the servers get.
    alone_count : int
        How many of the first sentences to time one at a time.

    Returns
    -------
    dict
        Sentences, seconds and sentences/s of the timed pass, the alone latencies in order and their p50,
        and the beam.

    Notes
    -----
    The timed pass follows a full untimed one, as a long-running server's steps follow thousands before.
    """
    translator = Translator.from_checkpoint(args.checkpoint, None, "cpu", args.precision)
    if args.beam is not None:
        translator.decode_config = dataclasses.replace(translator.decode_config, beam_size=args.beam)
    translator.max_tokens = args.max_batch_tokens
    # Warm-up over all the sentences: the first pass meets every batch shape for the first time (allocator
    # pools, kernels' first use), which a server's steps, after thousands before them, do not.
    translator.translate(sentences)
    start = time.perf_counter()
    translator.translate(sentences)
    batched_seconds = time.perf_counter() - start
    alone = []
    for sentence in sentences[:alone_count]:
        start = time.perf_counter()
        translator.translate([sentence])
        alone.append((time.perf_counter() - start) * 1000.0)
    return {
        "sentences": len(sentences),
        "seconds": round(batched_seconds, 3),
        "sentences_per_s": round(len(sentences) / batched_seconds, 2),
        "alone_sentences": len(alone),
        "alone_p50_ms": percentile(sorted(alone), 50),
        "alone_ms": [round(value, 2) for value in alone],  # in sentence order: the 1-client run's order
        "beam": translator.decode_config.beam_size,
    }


def check_targets(
    offline: dict[str, Any], cells: dict[str, dict[int, dict[str, Any]]]
) -> list[dict[str, Any]]:
    """The issue's targets against the continuous server's figures."""
    continuous = cells.get("continuous", {})
    targets = []
    if 64 in continuous:
        ratio = continuous[64]["sentences_per_s"] / offline["sentences_per_s"]
        targets.append({"target": "64 clients: >= 90% of offline throughput", "value": f"{ratio:.0%}",
                        "met": ratio >= 0.9})  # fmt: skip
        tail = continuous[64]["p99_ms"] / continuous[64]["p50_ms"]
        targets.append({"target": "64 clients: p99 <= 3x p50", "value": f"{tail:.2f}x", "met": tail <= 3.0})
    if 1 in continuous:
        # The same sentences: the 1-client run sends them in order, one at a time, from the first.
        same = sorted(offline["alone_ms"][: continuous[1]["sentences"]])
        gap = continuous[1]["p50_ms"] - (percentile(same, 50) or 0.0)
        targets.append({"target": "1 client: p50 within 5 ms of alone offline", "value": f"{gap:+.1f} ms",
                        "met": gap <= 5.0})  # fmt: skip
    return targets


def soak_target(soak: dict[str, Any]) -> dict[str, Any]:
    """The soak's target: no error, and resident memory growth under 5% after the first minute.

    Parameters
    ----------
    soak : dict
        What :func:`run_soak` returns.

    Returns
    -------
    dict
        ``target``, ``value`` and ``met``, as :func:`check_targets`' rows.

    Notes
    -----
    Growth is judged on peaks (:func:`resident_memory_growth`), not on two single samples; a soak too short
    to judge does not meet the target.
    """
    growth = soak["rss_growth_after_first_minute"]
    return {
        "target": f"{soak['minutes']:g}-minute soak at 64 clients: no error, memory growth < 5% after minute 1",
        "value": f"{soak['errors']} errors, "
        + ("too short to judge" if growth is None else f"{growth:+.1%}"),
        "met": soak["errors"] == 0 and growth is not None and growth < 0.05,
    }


def run_soak(args: argparse.Namespace, sentences: list[str]) -> dict[str, Any]:
    """64 clients for ``--soak-minutes`` against the continuous server; resident memory sampled."""
    samples: list[tuple[float, float]] = []
    with ServerProcess(args, "continuous") as server:
        start = time.perf_counter()

        async def soak() -> LoadResult:
            load = asyncio.create_task(
                run_clients(server.url, sentences, 64, 10**9, args.soak_minutes * 60.0, args.beam)
            )
            while not load.done():
                samples.append((time.perf_counter() - start, server.resident_mib()))
                await asyncio.wait({load}, timeout=5.0)
            return load.result()

        result = asyncio.run(soak())
    return {
        **result.summary(),
        "minutes": args.soak_minutes,
        **resident_memory_growth(samples),
        "rss_samples": [(round(elapsed, 1), round(rss, 1)) for elapsed, rss in samples],
    }


def resident_memory_growth(
    samples: list[tuple[float, float]], warmup_s: float = 60.0, window_s: float = 60.0
) -> dict[str, Any]:
    """How much a server's resident memory grew after its first minute, from peaks rather than samples.

    Parameters
    ----------
    samples : list of (float, float)
        ``(seconds since the load began, resident MiB)``, in time order (one every 5 s in the soak).
    warmup_s : float
        The first seconds, not judged (models, allocator pools and caches settle).
    window_s : float
        Width of the reference window after the warm-up, and of the windows of the per-minute peaks.

    Returns
    -------
    dict
        ``rss_mib_after_first_minute``: the peak of the window right after the warm-up; ``rss_mib_at_end``:
        the peak of the later half of the judged time; ``rss_growth_after_first_minute``: their ratio minus
        1, or None when the samples do not reach past the reference window (too short a soak to judge);
        ``rss_peak_mib_by_minute``: the peak of each window from the start, for the report.

    Notes
    -----
    Peaks, not single samples: glibc malloc hands large blocks back to the system as they are freed, so the
    resident size of a server under load swings by 20% from one sample to the next (500-620 MiB in the soak
    of 2026-11-28, some whole minutes without a high sample), and two single samples, or even the peaks of
    two single minutes, measure that swing rather than growth. The later half spans several minutes, so a
    swing reaches its top there; a leak raises it. A reference minute that misses the swing's top can only
    overstate growth, never hide it.
    """
    judged = [(elapsed, rss) for elapsed, rss in samples if elapsed >= warmup_s]
    peaks: dict[int, float] = {}
    windows = max(1, round(samples[-1][0] / window_s)) if samples else 1
    for elapsed, rss in samples:  # a last sample just past a whole minute counts in that minute
        index = min(int(elapsed // window_s), windows - 1)
        peaks[index] = max(peaks.get(index, 0.0), rss)
    by_minute = [round(peaks[index], 1) for index in sorted(peaks)]
    if not judged or judged[-1][0] < judged[0][0] + window_s:
        return {"rss_mib_after_first_minute": None, "rss_mib_at_end": None,
                "rss_growth_after_first_minute": None, "rss_peak_mib_by_minute": by_minute}  # fmt: skip
    reference_end = judged[0][0] + window_s
    later_start = max(reference_end, (judged[0][0] + judged[-1][0]) / 2)
    reference = max(rss for elapsed, rss in judged if elapsed < reference_end)
    later = max(rss for elapsed, rss in judged if elapsed >= later_start)
    return {
        "rss_mib_after_first_minute": round(reference, 1),
        "rss_mib_at_end": round(later, 1),
        "rss_growth_after_first_minute": round(later / reference - 1.0, 4),
        "rss_peak_mib_by_minute": by_minute,
    }


def soak_memory_line(soak: dict[str, Any]) -> str:
    """The soak's memory in words, for the report (records written before peaks were kept say so).

    Parameters
    ----------
    soak : dict
        What :func:`run_soak` returns, or an older record's soak.

    Returns
    -------
    str
        The reference peak, the later peak, the growth and the peak of each minute.

    Notes
    -----
    Records written before the per-minute peaks were kept (2026-11-28) hold single samples (first after minute 1, last) and no
    per-minute peaks; they are named as such rather than relabelled.
    """
    growth = soak["rss_growth_after_first_minute"]
    if "rss_peak_mib_by_minute" not in soak:
        return (f"{soak['rss_mib_after_first_minute']} MiB at the first sample after minute 1, "
                f"{soak['rss_mib_at_end']} MiB at the last ({growth:+.1%}; single samples, an older record)")  # fmt: skip
    peaks = ", ".join(str(peak) for peak in soak["rss_peak_mib_by_minute"])
    if growth is None:
        return f"too short a soak to judge growth; peak by minute (MiB): {peaks}"
    return (f"peak {soak['rss_mib_after_first_minute']} MiB in the minute after the first, "
            f"{soak['rss_mib_at_end']} MiB in the later half ({growth:+.1%}); peak by minute (MiB): {peaks}")  # fmt: skip


def render_markdown(record: dict[str, Any]) -> str:
    """The report: environment, offline baseline, one table per batching mode, targets, soak."""
    environment, offline = record["environment"], record["offline"]
    lines = [
        "# Serving benchmark",
        "",
        f"- CPU: {environment['cpu']['summary']}, {environment['cpu']['logical_cpus']} logical CPUs",
        f"- date: {environment['date']}; commit {environment['commit']}; torch {environment['torch']}; "
        f"server allocator: {environment['server_allocator']}; offline baseline's allocator: "
        f"{environment.get('offline_allocator', 'glibc malloc (not recorded before 2026-11-28)')}",
        f"- command: `{environment['command']}`",
        f"- note: {record['note']}" if record["note"] else "- note: none",
        f"- servers: --admit-every {record.get('admit_every', 1)}\n"
        f"- model: {record['checkpoint']}, {record['precision']}, beam {offline['beam']}; "
        f"{offline['sentences']} sentences from {record['sentences_file']}",
        "",
        f"Offline `transformer translate` (Translator, batches of {record['max_batch_tokens']} tokens): "
        f"{offline['sentences_per_s']} sentences/s; one sentence alone: p50 {offline['alone_p50_ms']} ms "
        f"({offline['alone_sentences']} sentences).",
        "",
    ]
    for batching, cells in record["cells"].items():
        lines += [f"## {batching} batching", "", "| clients | sentences | errors | sentences/s | vs offline | "
                  "p50 ms | p95 ms | p99 ms |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for cell in cells.values():
            ratio = cell["sentences_per_s"] / offline["sentences_per_s"]
            lines.append(
                f"| {cell['clients']} | {cell['sentences']} | {cell['errors']} | {cell['sentences_per_s']} | "
                f"{ratio:.2f}x | {cell['p50_ms']} | {cell['p95_ms']} | {cell['p99_ms']} |"
            )
        lines.append("")
    lines += ["## Targets (continuous batching)", "", "| target | measured | met |", "|---|---|---|"]
    lines += [
        f"| {item['target']} | {item['value']} | {'yes' if item['met'] else 'no'} |"
        for item in record["targets"]
    ]
    if record.get("soak"):
        soak = record["soak"]
        lines += ["", "## Soak", "", f"{soak['minutes']} min at 64 clients: {soak['sentences']} sentences, "
                  f"{soak['errors']} errors, {soak['sentences_per_s']} sentences/s, p50 {soak.get('p50_ms')} ms, "
                  f"p99 {soak.get('p99_ms')} ms; resident memory: {soak_memory_line(soak)}."]  # fmt: skip
    return "\n".join(lines) + "\n"


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    positive = integer_in_range(1)
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serve", description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="checkpoint or run directory")
    parser.add_argument(
        "--sentences", type=Path, required=True, help="source sentences, one per line (.gz ok)"
    )
    parser.add_argument(
        "--max-sentences", type=positive, default=1000, help="use the first N sentences (default 1000)"
    )
    parser.add_argument(
        "--clients",
        type=integers_in_range(1),
        default=(1, 8, 64, 256),
        help="client counts (default 1,8,64,256)",
    )
    parser.add_argument(
        "--batching", type=batching_modes, default=BATCHING_MODES, help="modes (default continuous,request)"
    )
    parser.add_argument("--seconds", type=float, default=30.0, help="most seconds per cell (default 30)")
    parser.add_argument("--beam", type=int, default=None, help="beam size (default: the checkpoint's)")
    parser.add_argument("--precision", choices=["fp32", "bf16", "int8"], default="fp32")
    parser.add_argument(
        "--max-batch-tokens", type=positive, default=4096, help="server and offline batch budget"
    )
    parser.add_argument(
        "--admit-every",
        type=positive,
        default=2,
        help="the servers' --admit-every (default 2, serve's default)",
    )
    parser.add_argument("--soak-minutes", type=float, default=0.0, help="soak at 64 clients (0: none)")
    parser.add_argument("--quick", action="store_true", help="200 sentences, 10 s per cell")
    parser.add_argument(
        "--no-tcmalloc",
        action="store_true",
        help="run the servers and the offline baseline with glibc malloc",
    )
    parser.add_argument(
        "--note", default="", help="a line for the report, e.g. 'machine shared with other jobs'"
    )
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT_DIR, help="where reports go")
    args = parser.parse_args(argv)
    if args.quick:
        args.max_sentences, args.seconds = min(args.max_sentences, 200), min(args.seconds, 10.0)
    return args


#: The servers' batching modes, in the order the benchmark runs them.
BATCHING_MODES = ("continuous", "request")


def batching_modes(text: str) -> tuple[str, ...]:
    """Parse ``--batching``: comma-separated modes among ``BATCHING_MODES``.

    Parameters
    ----------
    text : str
        The option's value, e.g. "continuous" or "continuous,request".

    Returns
    -------
    tuple of str
        The modes, in the order given.

    Raises
    ------
    argparse.ArgumentTypeError
        Naming the unknown mode.

    Notes
    -----
    Each mode starts a server with ``transformer serve --batching MODE``; an unknown one would otherwise be
    refused by that server only after the offline baseline had run.
    """
    modes = tuple(item.strip() for item in text.split(","))
    for mode in modes:
        if mode not in BATCHING_MODES:
            raise argparse.ArgumentTypeError(
                f"expected {' or '.join(BATCHING_MODES)} (comma-separated), got {mode!r}"
            )
    return modes


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write its report; returns the exit status."""
    args = parse_arguments(argv)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    try:  # the library's one-line errors name the file or checkpoint at fault
        sentences = [line for line in read_lines(args.sentences) if line][: args.max_sentences]
        if not sentences:
            raise ValueError(f"--sentences {args.sentences}: no non-blank line")
        offline = offline_baseline(args, sentences, alone_count=min(len(sentences), 100))
    except (OSError, ValueError) as error:
        raise SystemExit(f"python -m benchmarks.serve: {error}") from None
    cells: dict[str, dict[int, dict[str, Any]]] = {}
    for batching in args.batching:
        cells[batching] = {}
        with ServerProcess(args, batching) as server:
            asyncio.run(run_clients(server.url, sentences, 8, 32, args.seconds, args.beam))  # warm-up
            for clients in args.clients:
                # One client sends the sentences timed alone offline, so its latencies compare one to one.
                requests = len(offline["alone_ms"]) if clients == 1 else len(sentences)
                result = asyncio.run(
                    run_clients(server.url, sentences, clients, requests, args.seconds, args.beam)
                )
                cells[batching][clients] = result.summary()
                print(f"{batching:10s} {clients:4d} clients: {cells[batching][clients]}", file=sys.stderr)
    record = {
        "environment": {
            "cpu": cpu_description(),
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "commit": git_commit(REPOSITORY),
            "command": (
                " ".join(["python -m benchmarks.serve", *argv]) if argv is not None else typed_command()
            ),
            "torch": torch.__version__,
            "server_allocator": server_allocator(args.no_tcmalloc),
            "offline_allocator": allocator_description(args.no_tcmalloc),
        },
        "note": args.note,
        "checkpoint": str(args.checkpoint),
        "sentences_file": str(args.sentences),
        "precision": args.precision,
        "max_batch_tokens": args.max_batch_tokens,
        "admit_every": args.admit_every,
        "offline": offline,
        "cells": cells,
        "targets": check_targets(offline, cells),
        "soak": run_soak(args, sentences) if args.soak_minutes > 0 else None,
    }
    if record["soak"]:
        record["targets"].append(soak_target(record["soak"]))
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")
    for name in (f"serve-{stamp}", "serve-latest"):
        (args.output_dir / f"{name}.json").write_text(json.dumps(record, indent=1), encoding="utf-8")
        (args.output_dir / f"{name}.md").write_text(render_markdown(record), encoding="utf-8")
    print(render_markdown(record))
    return 0


if __name__ == "__main__":
    # The offline baseline runs in this process: under the servers' allocator, or the ratios compare mallocs.
    reexecute_under_tcmalloc("--no-tcmalloc" in sys.argv[1:])
    sys.exit(main())
