"""Fairness benchmark of ``transformer serve`` (issue #48): small requests alone and beside a worst-case one.

From the repository root:

    python -m benchmarks.fairness --checkpoint runs/quickstart                      # about 3 minutes
    python -m benchmarks.fairness --checkpoint runs/quickstart --seconds 5 --clients 2      # a quick look

A server is started as its own process on 127.0.0.1 (``python -m transformer.cli serve``, its own defaults but
``--max-chars``). First ``--clients`` closed-loop clients send small requests (one validation sentence each)
for ``--seconds``: the latency alone. Then, for each kind of worst case, the same clients again while one
more client sends, back to back, the largest request of that kind the server accepts: the longest text (at
the widest beam), the longest prefix, MBR at its candidate cap over the longest text, sampling at its sample
cap over the longest text, as many one-character sentences as the budget allows, one character forced to
the longest output (``min_length`` = ``max_length`` at the widest beam), alignments at the widest beam over
the longest text, and n-gram blocking at its cap over the longest text. Each worst-case
request is sized by asking the server (the largest size it does not refuse with 413 or 422), so the
benchmark follows the server's limits rather than restating them. Reported per phase: the small requests'
count, p50 and p99 latency and their ratio to the alone phase's, and the worst-case requests answered.

Every loop is bounded in time, everything talks to loopback only, and the server is stopped at the end
(SIGTERM, then waited for). The report goes to ``--output-dir`` as ``fairness-<timestamp>.json`` and ``.md``
plus ``fairness-latest.*``, opening with the CPU model and flags, the date, the commit and the command.
"""

import argparse
import asyncio
import datetime
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import torch

from benchmarks.bench_environment import cpu_description, git_commit
from benchmarks.serve import LoopbackServer, percentile
from transformer.command_checks import integer_in_range, number_in_range
from transformer.config.decode import MAX_LENGTH_OFFSET
from transformer.config.search_limits import MAX_NGRAM
from transformer.data.pipeline.text_files import read_lines
from transformer.serving.config import MAX_BEAM_SIZE, MAX_MBR_CANDIDATES

REPOSITORY = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT_DIR = REPOSITORY / "benchmarks" / "results"
#: Longest wait for the server to start or stop, and for one request, seconds.
SERVER_TIMEOUT_S = 120.0
#: The worst cases, in the order they run.
WORST_CASES = (
    "longest text",
    "longest prefix",
    "MBR at its cap",
    "sampling at its cap",
    "many tiny sentences",
    "longest output",
    "alignments",
    "n-gram blocking at its cap",
)
#: A size the server refuses is shrunk by this factor until it is accepted.
SHRINK = 0.9


def worst_case_body(kind: str, size: int, text: str, prefix_text: str) -> dict[str, Any]:
    """The request body of one worst case at ``size`` (characters, or sentences for the tiny ones).

    Parameters
    ----------
    kind : str
        One of :data:`WORST_CASES`.
    size : int
        Characters of text (or of prefix), the number of one-character sentences, or the output's length in
        tokens (``longest output``).
    text, prefix_text : str
        Long source and target text to cut from.

    Returns
    -------
    dict
        A ``/v1/translate`` body.

    Notes
    -----
    Texts are cut at a space, so no request ends in half a word.
    """
    cut = text[:size].rsplit(" ", 1)[0] if len(text) > size else text
    if kind == "longest text":
        return {"text": cut, "beam": MAX_BEAM_SIZE}
    if kind == "longest prefix":
        short = text.split(".")[0] + "."
        return {"text": short, "prefix": prefix_text[: max(1, size - len(short))].rsplit(" ", 1)[0]}
    if kind == "MBR at its cap":
        return {"text": cut, "mbr": MAX_MBR_CANDIDATES, "mbr_candidates": "beam"}
    if kind == "sampling at its cap":
        return {"text": cut, "sampling": True, "nbest": MAX_BEAM_SIZE, "seed": 1}
    if kind == "many tiny sentences":
        return {"text": ["a"] * size}
    if kind == "longest output":
        return {"text": "a", "beam": MAX_BEAM_SIZE, "min_length": size, "max_length": size}
    if kind == "alignments":
        return {"text": cut, "beam": MAX_BEAM_SIZE, "alignments": True}
    if kind == "n-gram blocking at its cap":
        return {"text": cut, "beam": MAX_BEAM_SIZE, "no_repeat_ngram": MAX_NGRAM}
    raise ValueError(f"unknown worst case {kind!r}")


def first_size(kind: str, max_chars: int) -> int:
    """The size to start shrinking from: just above what the budget can take, or the longest output allowed.

    Parameters
    ----------
    kind : str
        One of :data:`WORST_CASES`.
    max_chars : int
        The server's ``--max-chars``.

    Returns
    -------
    int
        Characters, sentences or output tokens (see :func:`worst_case_body`).

    Notes
    -----
    Each size is then checked against the server (:func:`largest_accepted`), so these need only be at or
    above the limit, not equal to it.
    """
    if kind == "many tiny sentences":
        return max_chars
    if kind == "longest output":
        return MAX_LENGTH_OFFSET
    return max_chars + 1


def largest_accepted(
    url: str, make_body: Callable[[int], dict[str, Any]], size: int, timeout_s: float = SERVER_TIMEOUT_S
) -> tuple[int, str]:
    """Shrink ``size`` until the server answers the body instead of refusing it; return it and the last refusal.

    Parameters
    ----------
    url : str
        The server's base URL.
    make_body : callable
        Size to request body.
    size : int
        The size to start from (above any limit).
    timeout_s : float
        Longest wait for one answer.

    Returns
    -------
    tuple of int and str
        The first size answered 200 (not 413 or 422), and the last refusal's detail ("" when none).

    Raises
    ------
    RuntimeError
        When the server neither answers nor refuses within ``timeout_s``, or answers another status.

    Notes
    -----
    Each probe waits for its answer: a refusal comes before any decoding, but on a slow machine it may still
    come late, and counting a slow answer as acceptance would then size a request the server refuses.
    """
    refusal = ""
    while size > 1:
        try:
            reply = httpx.post(f"{url}/v1/translate", json=make_body(size), timeout=timeout_s)
        except httpx.TimeoutException:
            raise RuntimeError(
                f"sizing: no answer to a request of size {size} within {timeout_s:g} s"
            ) from None
        if reply.status_code == 200:
            return size, refusal
        if reply.status_code not in (413, 422):
            raise RuntimeError(f"sizing: size {size} got {reply.status_code}: {reply.text[:200]}")
        refusal = str(reply.json().get("detail", ""))[:200]
        size = int(size * SHRINK)
    return size, refusal


async def run_phase(
    url: str, small: list[str], clients: int, seconds: float, heavy: dict[str, Any] | None
) -> dict[str, Any]:
    """Small closed-loop clients for ``seconds``, beside one back-to-back worst-case client when given.

    Parameters
    ----------
    url : str
        The server's base URL.
    small : list of str
        Sentences for the small requests, sent in turn.
    clients : int
        Small clients.
    seconds : float
        Length of the phase.
    heavy : dict or None
        The worst-case request body; None for the alone phase.

    Returns
    -------
    dict
        The small requests' count, errors, p50 and p99 (ms); the worst-case requests answered and their
        statuses.

    Notes
    -----
    A worst-case request still running when the phase ends is abandoned (its connection closed), which
    also checks that the server drops it: the next phase would be slowed otherwise.
    """
    deadline = time.perf_counter() + seconds
    latencies: list[float] = []
    errors, statuses = 0, []
    counter = 0
    limits = httpx.Limits(max_connections=clients + 1, max_keepalive_connections=clients + 1)

    async def small_client(session: httpx.AsyncClient) -> None:
        nonlocal errors, counter
        while time.perf_counter() < deadline:
            sentence = small[counter % len(small)]
            counter += 1
            start = time.perf_counter()
            try:
                ok = (await session.post("/v1/translate", json={"text": sentence})).status_code == 200
            except httpx.HTTPError:
                ok = False
            if ok:
                latencies.append((time.perf_counter() - start) * 1000.0)
            else:
                errors += 1

    async def heavy_client(session: httpx.AsyncClient) -> None:
        while heavy is not None and time.perf_counter() < deadline:
            start = time.perf_counter()
            reply = await session.post("/v1/translate", json=heavy)
            statuses.append((reply.status_code, round(time.perf_counter() - start, 2)))

    async with httpx.AsyncClient(base_url=url, timeout=SERVER_TIMEOUT_S, limits=limits) as session:
        heavy_task = asyncio.ensure_future(heavy_client(session))
        await asyncio.gather(*(small_client(session) for _ in range(clients)))
        heavy_task.cancel()  # an unfinished worst case is abandoned, its connection closed
        await asyncio.gather(heavy_task, return_exceptions=True)
    ordered = sorted(latencies)
    return {
        "small_requests": len(ordered),
        "small_errors": errors,
        "p50_ms": percentile(ordered, 50),
        "p99_ms": percentile(ordered, 99),
        "heavy_answered": [status for status, _ in statuses],
        "heavy_seconds": [duration for _, duration in statuses],
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Size every worst case against a fresh server, then time the phases; the record to report."""
    sentences = [line.strip() for line in read_lines(args.sentences) if line.strip()]
    targets = [line.strip() for line in read_lines(args.prefix_text) if line.strip()]
    small = [sentence for sentence in sentences if len(sentence) <= args.small_chars] or sentences[:10]
    text, prefix_text = " ".join(sentences * 50), " ".join(targets * 50)
    phases: dict[str, dict[str, Any]] = {}
    server_options = ["--max-chars", str(args.max_chars)]  # the server's defaults otherwise, glibc malloc
    with LoopbackServer(
        args.checkpoint, server_options, args.output_dir / "fairness-server.log", no_tcmalloc=True
    ) as server:
        # Untimed first: the first steps meet every batch shape for the first time (allocator, kernels).
        asyncio.run(run_phase(server.url, small, args.clients, min(args.seconds, 5.0), None))
        phases["alone"] = asyncio.run(run_phase(server.url, small, args.clients, args.seconds, None))
        for kind in args.kinds:
            size, refusal = largest_accepted(
                server.url,
                lambda size, kind=kind: worst_case_body(kind, size, text, prefix_text),
                first_size(kind, args.max_chars),
            )
            body = worst_case_body(kind, size, text, prefix_text)
            phase = asyncio.run(run_phase(server.url, small, args.clients, args.seconds, body))
            shown = {key: value for key, value in body.items() if key not in ("text", "prefix")}
            texts = body["text"] if isinstance(body["text"], list) else [body["text"]]
            sent = sum(map(len, texts)) + len(body.get("prefix", ""))
            phases[kind] = {
                **phase,
                "size": size,
                "characters": sent,
                "refused_above": refusal,
                "fields": shown,
            }
    return phases


def bound_met(phases: dict[str, dict[str, Any]], factor: float) -> list[dict[str, Any]]:
    """Each worst case's p99 against ``factor`` times the alone p99."""
    alone = phases["alone"]["p99_ms"] or 0.0
    rows = []
    for kind, phase in phases.items():
        if kind == "alone" or phase["p99_ms"] is None:
            continue
        ratio = phase["p99_ms"] / alone if alone else float("inf")
        rows.append({"case": kind, "p99_ratio": round(ratio, 2), "met": ratio <= factor})
    return rows


def render_markdown(record: dict[str, Any]) -> str:
    """The report: environment, one row per phase, the bound."""
    environment, phases = record["environment"], record["phases"]
    alone = phases["alone"]
    lines = [
        "# Fairness benchmark",
        "",
        f"- CPU: {environment['cpu']['summary']}, {environment['cpu']['logical_cpus']} logical CPUs",
        f"- flags: {environment['cpu_flags']}",
        f"- date: {environment['date']}; commit {environment['commit']}; torch {environment['torch']}",
        f"- command: `{environment['command']}`",
        f"- model: {record['checkpoint']}; server `--max-chars {record['max_chars']}`, its other defaults; "
        f"{record['clients']} small clients, {record['seconds']:g} s per phase",
        "",
        "| phase | worst-case request | small requests | p50 ms | p99 ms | p99 vs alone | worst cases answered |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind, phase in phases.items():
        request = "none"
        if kind != "alone":
            fields = ", ".join(f"{key} {value}" for key, value in phase["fields"].items())
            request = f"{phase['characters']:,} characters" + (f", {fields}" if fields else "")
            if kind == "many tiny sentences":
                request = f"{phase['size']:,} one-character sentences"
            elif kind == "longest output":
                request = f"one character to {phase['size']:,} tokens, {fields}"
            elif kind == "longest prefix":
                request = f"{phase['characters']:,} characters, all prefix but one sentence"
        ratio = phase["p99_ms"] / alone["p99_ms"] if phase["p99_ms"] and alone["p99_ms"] else None
        answered = phase.get("heavy_answered", [])
        heavy = (
            f"{answered.count(200)} in {', '.join(f'{s:g}' for s in phase['heavy_seconds'])} s"
            if answered
            else "-"
        )
        lines.append(
            f"| {kind} | {request} | {phase['small_requests']} ({phase['small_errors']} errors) | "
            f"{phase['p50_ms']} | {phase['p99_ms']} | {'-' if ratio is None else f'{ratio:.2f}x'} | {heavy} |"
        )
    lines += ["", f"Bound: small requests' p99 beside each worst case at most {record['bound']:g}x alone."]
    lines += [
        f"- {row['case']}: {row['p99_ratio']}x, {'met' if row['met'] else '**not met**'}"
        for row in record["bound_rows"]
    ]
    return "\n".join(lines) + "\n"


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    """The benchmark's options; the data files default to the run directory's validation set."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.fairness", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--checkpoint", type=Path, required=True, help="run or checkpoint directory")
    parser.add_argument("--sentences", type=Path, help="source sentences (default: CHECKPOINT/data/valid.en)")
    parser.add_argument("--prefix-text", type=Path, help="target text for prefixes (default: .../valid.de)")
    parser.add_argument(
        "--clients", type=integer_in_range(1, 64), default=4, help="small clients (default 4)"
    )
    parser.add_argument(
        "--seconds", type=number_in_range(0.5, 3600), default=20.0, help="seconds per phase (default 20)"
    )
    parser.add_argument(
        "--max-chars", type=integer_in_range(50, 10**6), default=5000, help="the server's --max-chars (5000)"
    )
    parser.add_argument(
        "--small-chars", type=integer_in_range(1, 10**4), default=60, help="longest small request (60 chars)"
    )
    parser.add_argument("--bound", type=number_in_range(1, 1000), default=3.0, help="p99 factor to meet (3)")
    parser.add_argument("--kinds", default=",".join(WORST_CASES), help="worst cases to run, comma-separated")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT_DIR, help="where reports go")
    args = parser.parse_args(argv)
    args.sentences = args.sentences or args.checkpoint / "data" / "valid.en"
    args.prefix_text = args.prefix_text or args.checkpoint / "data" / "valid.de"
    args.kinds = tuple(kind.strip() for kind in args.kinds.split(",") if kind.strip())
    unknown = [kind for kind in args.kinds if kind not in WORST_CASES]
    if unknown:
        parser.error(f"--kinds: {unknown[0]!r} is not one of {', '.join(WORST_CASES)}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write its reports; 0 when every worst case meets the bound, else 1."""
    args = parse_arguments(argv)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)  # this process only sends requests
    phases = run(args)
    flags_line = next(
        (line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")), ""
    )
    record = {
        "environment": {
            "cpu": cpu_description(),
            "cpu_flags": flags_line.partition(":")[2].strip(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": git_commit(REPOSITORY),
            "torch": torch.__version__,
            "command": " ".join(
                ["python -m benchmarks.fairness", *(argv if argv is not None else sys.argv[1:])]
            ),
        },
        "checkpoint": str(args.checkpoint),
        "max_chars": args.max_chars,
        "clients": args.clients,
        "seconds": args.seconds,
        "bound": args.bound,
        "phases": phases,
        "bound_rows": bound_met(phases, args.bound),
    }
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    for name in (f"fairness-{stamp}", "fairness-latest"):
        (args.output_dir / f"{name}.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        (args.output_dir / f"{name}.md").write_text(render_markdown(record), encoding="utf-8")
    print(render_markdown(record))
    return 0 if all(row["met"] for row in record["bound_rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
