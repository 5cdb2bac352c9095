"""The translation cache under a repeated-sentence load: hit rate, latency and throughput (issue #52).

A real ``transformer serve`` on loopback, without and with ``--cache-size``, receives the same sequence of
requests from closed-loop clients: one sentence each, drawn from the first ``--distinct`` validation sentences by
a Zipf law (exponent ``--zipf``, seeded), as UI strings and boilerplate repeat (a few very often, most rarely).
Reported per server: requests/s, latency p50/p90/p99, and the hit rate read from ``/metrics``; and whether every
answer of the cached server equals the uncached server's for the same sentence (it must).

Run from the repository root: ``python -m benchmarks.serve_cache --checkpoint runs/multi30k/averaged``. Writes a
Markdown record with the CPU, the date, the command and the commit.
"""

import argparse
import asyncio
import gzip
import random
import re
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.bench_environment import provenance_lines, write_record
from benchmarks.bench_worker import REPOSITORY
from benchmarks.serve import LoopbackServer, percentile

#: Where ``data.corpus: multi30k`` caches the validation set.
DEFAULT_VALID = Path("~/.cache/transformer/multi30k/val.en.gz").expanduser()


def zipf_requests(count: int, distinct: int, exponent: float, seed: int = 52) -> list[int]:
    """Draw request indices from a Zipf law over ``distinct`` items.

    Parameters
    ----------
    count : int
        Requests.
    distinct : int
        Items (item k drawn with weight ``1 / (k + 1) ** exponent``).
    exponent : float
        The law's exponent (1.0-1.2 is typical of repeated text).
    seed : int
        Seed.

    Returns
    -------
    list of int
        Item indices, in request order.

    Notes
    -----
    Seeded, so both servers get the same requests in the same order.
    """
    weights = [1.0 / (rank + 1) ** exponent for rank in range(distinct)]
    return random.Random(seed).choices(range(distinct), weights=weights, k=count)


async def load(url: str, texts: list[str], clients: int) -> tuple[list[float], dict[int, str], float]:
    """Send each text as one request from ``clients`` closed-loop clients; return latencies, answers, seconds.

    Parameters
    ----------
    url : str
        The server.
    texts : list of str
        The requests' texts, in order.
    clients : int
        Concurrent clients.

    Returns
    -------
    tuple of (list of float, dict of int to str, float)
        Latencies in ms, the translation of each request by index, and the elapsed seconds.

    Notes
    -----
    A failed request raises: the benchmark measures a server that answers.
    """
    next_index, latencies, answers = 0, [], {}

    async def client(session: httpx.AsyncClient) -> None:
        nonlocal next_index
        while next_index < len(texts):
            index, next_index = next_index, next_index + 1
            start = time.perf_counter()
            reply = await session.post("/v1/translate", json={"text": [texts[index]]})
            reply.raise_for_status()
            latencies.append((time.perf_counter() - start) * 1000.0)
            answers[index] = reply.json()["translation"][0]

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=120.0, limits=limits) as session:
        start = time.perf_counter()
        await asyncio.gather(*(client(session) for _ in range(clients)))
        return latencies, answers, time.perf_counter() - start


def hit_rate(url: str) -> float | None:
    """Read the cache's hit rate from ``/metrics`` (None without a cache)."""
    text = httpx.get(f"{url}/metrics", timeout=10.0).text
    counts = {
        result: float(value)
        for result, value in re.findall(r'cache_lookups_total\{[^}]*result="(\w+)"\} (\S+)', text)
    }
    total = sum(counts.values())
    return counts.get("hit", 0.0) / total if total else None


def main(argv: list[str] | None = None) -> None:
    """Measure both servers and write the record.

    Parameters
    ----------
    argv : list of str or None
        Command-line arguments.

    Returns
    -------
    None

    Notes
    -----
    Servers run one after the other on a free loopback port and stop by themselves (SIGTERM) at the end.
    """
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.serve_cache", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--sentences", type=Path, default=DEFAULT_VALID)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--distinct", type=int, default=500)
    parser.add_argument("--zipf", type=float, default=1.1)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--cache-size", type=int, default=1000)
    parser.add_argument(
        "--output", type=Path, default=REPOSITORY / "benchmarks" / "results" / "serve_cache.md"
    )
    args = parser.parse_args(argv)
    with (
        gzip.open(args.sentences, "rt", encoding="utf-8")
        if args.sentences.suffix == ".gz"
        else args.sentences.open(encoding="utf-8") as handle
    ):
        pool = [line.strip() for line in handle if line.strip()][: args.distinct]
    order = zipf_requests(args.requests, len(pool), args.zipf)
    texts = [pool[index] for index in order]
    rows, answers = [], []
    with tempfile.TemporaryDirectory() as logs:
        for label, options in (
            ("no cache", []),
            (f"--cache-size {args.cache_size}", ["--cache-size", str(args.cache_size)]),
        ):
            with LoopbackServer(
                args.checkpoint, options, Path(logs) / "server.log", no_tcmalloc=False
            ) as server:
                latencies, found, seconds = asyncio.run(load(server.url, texts, args.clients))
                rate = hit_rate(server.url)
            answers.append(found)
            latencies.sort()  # percentile reads sorted values
            rows.append(
                f"| {label} | {len(texts) / seconds:.1f} | {percentile(latencies, 50):.1f} | "
                f"{percentile(latencies, 90):.1f} | {percentile(latencies, 99):.1f} | "
                f"{'-' if rate is None else f'{100 * rate:.1f}%'} |"
            )
    same = sum(answers[0][i] == answers[1][i] for i in range(len(texts)))
    lines = [
        "# The translation cache under a repeated-sentence load (`python -m benchmarks.serve_cache`, issue #52)",
        "",
        *provenance_lines("benchmarks.serve_cache"),
        f"- model: `{args.checkpoint}` (fp32, its beam); {len(texts)} requests of one sentence from {args.clients} "
        f"clients, drawn by Zipf({args.zipf}) from {len(pool)} distinct sentences of `{args.sentences}` "
        f"({len(set(order))} distinct sentences asked)",
        f"- answers equal between the two servers: {same} of {len(texts)}",
        "",
        "| server | requests/s | p50 ms | p90 ms | p99 ms | hit rate |",
        "|---|---|---|---|---|---|",
        *rows,
    ]
    text = "\n".join(lines) + "\n"
    write_record(args.output, text)


if __name__ == "__main__":
    main()
