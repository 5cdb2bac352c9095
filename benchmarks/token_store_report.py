"""Render the token-store benchmark's JSON record as Markdown: the machine first, then one table per question."""

from typing import Any

GIB = 2**30
METHOD = (
    "Each size's corpus is Multi30k recombined by `transformer.data.corpora.large_corpus` (English lines about 24 "
    "words on average, 1% over 80; approximately WMT14-like, not WMT14). Every figure comes from a fresh "
    "process; peak memory is that process's own peak resident set (`VmHWM`, read while it runs). Prepare = "
    "learning the joint BPE vocabulary on a sample of at most 2M sentences as `prepare_data` does for a store "
    "(one process), then `transformer prepare` with `data.token_store: true` reusing it and building the store "
    "(another). Encoding = `build_token_store` on lines held in memory against "
    "`SentencePieceProcessor.encode(lines, num_threads=T)` on the same lines and chunks with the same model, "
    "interleaved rounds, medians. Start-up = `transformer train` from its launch (Python and torch imports "
    "included) to its data being ready (`train: kept` line) and to its first training step being recorded in "
    "`metrics.jsonl` (polled every 20 ms). Steps = one trainer taking steps on the same batches, collated "
    "from the store or from the in-memory corpus, interleaved; collate alone is timed beside it. The model of "
    "start-up and steps: d_model 256, 3+3 layers, ff 1024, the store's vocabulary, fp32, 4,096 tokens per batch."
)


def render_markdown(record: dict[str, Any]) -> str:
    """Turn the benchmark's record into a Markdown report.

    Parameters
    ----------
    record : dict
        ``{"environment", "settings", "sizes"}`` as ``benchmarks.token_store`` writes it.

    Returns
    -------
    str
        The report, ending with a newline.

    Notes
    -----
    A measurement that failed shows its error in place of its figures; each goal of issue #18 is stated beside
    the figure it applies to.
    """
    environment, settings, sizes = record["environment"], record["settings"], record["sizes"]
    lines = [
        f"# Token store at scale, {environment['date_utc']}",
        "",
        f"**CPU: {environment['cpu']['summary']}**, {environment['cpu']['logical_cpus']} logical CPUs, "
        f"{_gib(environment['memory_gib'] * GIB) if environment['memory_gib'] else 'memory unknown'} GiB.",
        "",
        f"Command: `{environment['command']}`; commit {environment['git_commit'] or 'unknown'}; "
        f"{settings['threads']} threads (encoding comparison and torch), {settings['prepare_threads']} in "
        f"`transformer prepare` (all it may use); Python {environment['python']}, torch "
        f"{environment['torch']}; allocator: {environment['allocator']}.",
        "",
        f"*Method.* {METHOD}",
    ]
    lines += ["", "## Corpus and prepare", "", *_prepare_table(sizes)]
    lines += ["", "## Encoding: store build against SentencePiece alone (goal: at least 0.80)", ""]
    lines += _encoding_table(sizes)
    lines += ["", "## Start-up of `transformer train` (goal: first step within 10 s at 36M pairs)", ""]
    lines += _startup_table(sizes)
    lines += ["", "## Training steps: store against in-memory (goal: within 5%)", "", *_steps_table(sizes)]
    errors = _errors(sizes)
    if errors:
        lines += ["", "## Failures", "", *errors]
    return "\n".join(lines) + "\n"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def _gib(value: float) -> str:
    return f"{value / GIB:.2f}"


def _size(value: float) -> str:
    return f"{value / GIB:.2f} GiB" if value >= GIB else f"{value / 2**20:.1f} MiB"


def _failed(part: Any) -> bool:
    return not isinstance(part, dict) or "error" in part


def _prepare_table(sizes: list[dict[str, Any]]) -> list[str]:
    rows = []
    for size in sizes:
        corpus, prepare = size["corpus"], size.get("prepare")
        generated = (
            "reused"
            if corpus["reused"]
            else f"{corpus['seconds']:.1f} s ({corpus['pairs_per_second']:,.0f}/s)"
        )
        words = corpus["statistics"]["source"]
        row = [
            f"{size['pairs']:,}",
            _size(corpus["bytes"]),
            generated,
            f"{words['mean_words']:.1f} / {words['p99_words']}",
        ]
        if prepare is None:
            rows.append([*row, "not run (store reused)", "", "", ""])
            continue
        if _failed(prepare):
            rows.append([*row, "failed", "", "", ""])  # the error is listed under Failures
            continue
        vocabulary, store = prepare["vocabulary"], prepare["store"]
        rows.append(
            [
                *row,
                f"{vocabulary['seconds']:.1f} s, {_size(vocabulary['peak_rss_bytes'])}",
                f"{store['seconds']:.1f} s, {_size(store['peak_rss_bytes'])}",
                f"{store['build_seconds']:.1f} s ({store['input_pairs'] / store['build_seconds']:,.0f} pairs/s)",
                f"{store['pairs']:,} pairs, {_size(store['bytes'])}",
            ]
        )
    header = ["pairs", "text", "generated in", "words/line (mean / p99)", "vocabulary process: time, peak",
              "`transformer prepare`: time, peak", "of which the build", "store"]  # fmt: skip
    return _table(header, rows)


def _encoding_table(sizes: list[dict[str, Any]]) -> list[str]:
    rows = []
    for size in sizes:
        encoding = size.get("encoding")
        if encoding is None or _failed(encoding):
            rows.append([f"{size['pairs']:,}", "failed" if encoding else "not run", "", "", "", ""])
            continue
        ratio = encoding["store_over_sentencepiece"]
        rows.append(
            [
                f"{size['pairs']:,}",
                f"{encoding['pairs']:,}",
                str(encoding["threads"]),
                f"{encoding['store']['pairs_per_second']:,.0f}",
                f"{encoding['sentencepiece']['pairs_per_second']:,.0f}",
                f"**{ratio:.2f}** ({'met' if ratio >= 0.8 else 'not met'})",
            ]
        )
    header = [
        "corpus pairs",
        "lines encoded",
        "threads",
        "store pairs/s",
        "SentencePiece pairs/s",
        "store / SentencePiece",
    ]
    return _table(header, rows) + _projection_lines(sizes)


def _projection_lines(sizes: list[dict[str, Any]]) -> list[str]:
    """Say how the ratio would move with more threads: SentencePiece's work divides, the store's does not."""
    measured = [size["encoding"] for size in sizes if not _failed(size.get("encoding"))]
    if not measured:
        return []
    last = measured[-1]
    per_pair = last["microseconds_per_pair"]
    projected = ", ".join(
        f"{count}: {ratio:.2f}" for count, ratio in last["projected_store_over_sentencepiece"].items()
    )
    return [
        "",
        f"At {last['pairs']:,} lines: SentencePiece took {per_pair['sentencepiece_one_thread']:.1f} µs per pair on "
        f"one thread, the store's own work (a build from replayed ids: filtering, flattening, hashing, writing, "
        f"serial) {per_pair['store_serial']:.1f} µs per pair. If SentencePiece scaled perfectly with threads, the "
        f"ratio would be, by thread count, {projected}: a lower bound, measured only at {last['threads']} here.",
    ]


def _startup_cells(startup: Any) -> list[str]:
    if startup is None:
        return ["not run", ""]
    if _failed(startup):
        return ["failed", ""]
    first_step, own = startup["median_first_step_seconds"], startup["median_first_step_own_seconds"]
    return [f"{startup['median_data_ready_seconds']:.1f} s", f"{first_step:.1f} s (step itself {own:.1f} s)"]


def _startup_table(sizes: list[dict[str, Any]]) -> list[str]:
    rows = []
    for size in sizes:
        startup = size.get("startup") or {}
        rows.append(
            [
                f"{size['pairs']:,}",
                *_startup_cells(startup.get("store")),
                *_startup_cells(startup.get("in_memory")),
            ]
        )
    header = [
        "pairs",
        "store: data ready",
        "store: first step",
        "in memory: data ready",
        "in memory: first step",
    ]
    return _table(header, rows)


def _steps_table(sizes: list[dict[str, Any]]) -> list[str]:
    rows = []
    for size in sizes:
        steps = size.get("steps")
        if steps is None:
            continue
        if _failed(steps):
            rows.append([f"{size['pairs']:,}", "failed", "", "", "", ""])
            continue
        ratio = steps["steps"]["store_over_in_memory"]
        rows.append(
            [
                f"{size['pairs']:,}",
                f"{steps['steps']['store']['steps_per_second']:.2f}",
                f"{steps['steps']['in_memory']['steps_per_second']:.2f}",
                f"**{ratio:.3f}** ({'met' if ratio >= 0.95 else 'not met'})",
                f"{steps['collate']['store']['milliseconds_per_batch']:.2f}",
                f"{steps['collate']['in_memory']['milliseconds_per_batch']:.2f}",
            ]
        )
    header = [
        "pairs",
        "store steps/s",
        "in-memory steps/s",
        "store / in-memory",
        "collate ms (store)",
        "collate ms (memory)",
    ]
    return _table(header, rows) if rows else ["Not run: no size is at most `--in-memory-max-pairs`."]


def _errors(sizes: list[dict[str, Any]]) -> list[str]:
    found = []
    for size in sizes:
        for name, part in size.items():
            parts = part.items() if name == "startup" and isinstance(part, dict) else [(name, part)]
            for label, value in parts:
                if isinstance(value, dict) and "error" in value:
                    found.append(f"- {size['pairs']:,} pairs, {label}: `{value['error'].splitlines()[0]}`")
    return found
