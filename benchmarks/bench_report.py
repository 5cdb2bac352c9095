"""Render the suite's JSON record as a Markdown report: environment first, then one table per section."""

from typing import Any


def render_markdown(record: dict[str, Any]) -> str:
    """Turn the JSON record of a run into Markdown.

    Parameters
    ----------
    record : dict
        ``{"environment": ..., "settings": ..., "sections": {name: section dict}}`` as ``run.py`` writes it.

    Returns
    -------
    str
        The report, ending with a newline.

    Notes
    -----
    Every section states its method; skipped comparisons are listed with their reasons; a failed section
    shows its traceback.
    """
    lines = _environment_lines(record["environment"], record["settings"])
    renderers = {
        "matmul": _matmul_lines,
        "training": _training_lines,
        "translation": _translation_lines,
        "attention": _attention_lines,
        "memory": _memory_lines,
        "quality": _quality_lines,
    }
    for name, section in record["sections"].items():
        lines += ["", f"## {section['title']}", ""]
        if section["method"]:
            lines += [f"*Method.* {section['method']}", ""]
        if section["status"] == "failed":
            lines += ["**Failed:**", "", "```", section["error"].rstrip(), "```"]
        elif section["rows"]:
            lines += renderers[name](section["rows"])
        if section["notes"]:
            lines += ["", *(f"- {note}" for note in section["notes"])]
        if section["skipped"]:
            lines += ["", "Skipped comparisons:", "", "| system | reason |", "|---|---|"]
            lines += [f"| {item['system']} | {_cell(item['reason'])} |" for item in section["skipped"]]
    return "\n".join(lines) + "\n"


def _environment_lines(environment: dict[str, Any], settings: dict[str, Any]) -> list[str]:
    cpu = environment["cpu"]
    # Reports written before the summary existed list the flags themselves.
    summary = cpu.get("summary") or f"{cpu['model']} ({' '.join(cpu['isa_flags'])})"
    memory = environment["memory_gib"]
    packages = ", ".join(
        f"{name} {version or 'not installed'}" for name, version in environment["optional_packages"].items()
    )
    return [
        f"# Benchmarks ({settings['mode']} mode), {environment['date_utc']}",
        "",
        f"**CPU: {summary}**, {cpu['logical_cpus']} logical CPUs. Figures hold for this CPU kind only: with "
        "AMX a bf16 product is several times faster than fp32, without it slower.",
        "",
        "| | |",
        "|---|---|",
        f"| command | `{environment['command']}` |",
        f"| machine | {cpu['model']}, {cpu['logical_cpus']} logical CPUs, "
        f"{f'{memory:.0f} GiB' if memory else 'memory unknown'}; flags: {' '.join(cpu['isa_flags'])} |",
        f"| software | Python {environment['python']}, torch {environment['torch']} "
        f"(CPU capability {environment['torch_cpu_capability']}, native bf16: {environment['native_bf16']}) |",
        f"| optional | {packages} |",
        f"| allocator | {environment['allocator']} |",
        f"| threads | {environment['threads']} intra-op, {environment['interop_threads']} inter-op |",
        f"| commit | {environment['git_commit'] or 'unknown'} |",
        "",
        "All figures are medians over repeats (spread: ± half the range, n: repeats). Every ratio was measured "
        "in this run, its two sides timed in interleaved rounds. *ours / this* is a throughput ratio: ours "
        "divided by the row's system; above 1 means ours is faster.",
    ]


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _number(value: float | None, digits: int = 0) -> str:
    """Thousands separators and ``digits`` decimals; small values keep three significant digits."""
    if value is None:
        return "-"
    if value != 0 and abs(value) < 10 ** (3 - digits):
        return f"{value:.3g}"
    return f"{value:,.{digits}f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _spread(row: dict[str, Any]) -> str:
    return f"±{50 * row['spread']:.0f}% (n={row['repeats']})"


def _matmul_lines(rows: list[dict[str, Any]]) -> list[str]:
    return _table(
        ["precision", "n", "GFLOP/s", "spread", "peak"],
        [
            [
                row["precision"],
                str(row["n"]),
                _number(row["gflop_per_s"]),
                _spread(row),
                "**peak**" if row["peak"] else "",
            ]
            for row in rows
        ],
    )


def _training_lines(rows: list[dict[str, Any]]) -> list[str]:
    table = _table(
        ["model", "precision", "system", "target tokens/s", "ours / this", "MFU", "step (s)", "spread"],
        [
            [
                row["model"],
                row["precision"],
                row["system"],
                _number(row["tokens_per_s"]),
                _ratio(row["ours_over_this"]),
                _percent(row["mfu"]),
                _number(row["median_seconds"], 3),
                _spread(row),
            ]
            for row in rows
        ],
    )
    flops = {row["model"]: row["flops_per_target_token"] for row in rows}
    described = ", ".join(f"{model} {_number(value / 1e6)} MFLOP" for model, value in flops.items())
    return [*table, "", f"Matmul FLOPs per target token (training step): {described}."]


def _translation_lines(rows: list[dict[str, Any]]) -> list[str]:
    return _table(
        [
            "system",
            "precision",
            "search",
            "cache",
            "sentences",
            "tokens/s",
            "sentences/s",
            "ours / this",
            "ours row used",
            "GFLOP/s",
            "of peak",
            "exact length",
            "spread",
        ],
        [
            [
                row["system"],
                row["precision"],
                "greedy" if row["beam_size"] == 1 else f"beam {row['beam_size']}",
                "on" if row["use_cache"] else "off",
                str(row["sentences"]),
                _number(row["tokens_per_s"]),
                _number(row["sentences_per_s"], 1),
                _ratio(row["ours_over_this"]),
                row["compared_with"] if row["ours_over_this"] is not None else "-",
                _number(row["gflop_per_s"], 1) if row.get("gflop_per_s") is not None else "-",
                _percent(row.get("share_of_peak")),
                "yes" if row["forced_length_ok"] else f"**no ({row['output_tokens']} tokens)**",
                _spread(row),
            ]
            for row in rows
        ],
    )


def _attention_lines(rows: list[dict[str, Any]]) -> list[str]:
    by_length: dict[int, dict[str, dict[str, Any]]] = {}
    for row in rows:
        by_length.setdefault(row["length"], {})[
            "fused" if "fused" in row["implementation"] else "explicit"
        ] = row
    table_rows = []
    for length, pair in sorted(by_length.items()):
        fused, explicit = pair["fused"], pair["explicit"]
        table_rows.append(
            [
                str(length),
                _number(1000 * fused["median_seconds"], 1),
                _number(1000 * explicit["median_seconds"], 1),
                _ratio(1 / fused["time_over_explicit"]) if fused["time_over_explicit"] else "-",
                _number(fused["peak_increase_mib"], 1),
                _number(explicit["peak_increase_mib"], 1),
                _ratio(1 / fused["memory_over_explicit"]) if fused["memory_over_explicit"] else "-",
                _number(explicit["score_matrix_mib"], 1),
            ]
        )
    return _table(
        [
            "length",
            "ours fwd+bwd (ms)",
            "explicit fwd+bwd (ms)",
            "speed ours / explicit",
            "ours peak (MiB)",
            "explicit peak (MiB)",
            "memory explicit / ours",
            "one score matrix (MiB)",
        ],
        table_rows,
    )


def _memory_lines(rows: list[dict[str, Any]]) -> list[str]:
    return _table(
        ["model", "precision", "tokens per step", "peak memory (GiB)", "before the step (GiB)", "step (s)"],
        [
            [
                f"{row['model']} ({row['parameters'] / 1e6:.0f}M parameters)",
                row["precision"],
                f"{row['accumulate']} x {_number(row['micro_batch_tokens'])} = {_number(row['tokens_per_step'])}",
                _number(row["peak_rss_gib"], 2),
                _number(row["rss_before_step_gib"], 2),
                _number(row["step_seconds"], 1),
            ]
            for row in rows
        ],
    )


def _quality_lines(rows: list[dict[str, Any]]) -> list[str]:
    return _table(
        ["checkpoint", "step", "minutes", "target tokens", "BLEU", "BLEU (lowercased)", "chrF"],
        [
            [
                row["checkpoint"],
                str(row["step"]),
                _number(row["minutes"], 1),
                _number(row["tokens_seen"]),
                _number(row["bleu"], 2),
                _number(row.get("bleu_lowercase"), 2),
                _number(row["chrf"], 2),
            ]
            for row in rows
        ],
    )
