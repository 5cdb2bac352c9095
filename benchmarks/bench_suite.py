"""The suite itself: run the selected sections in order, then write the JSON and Markdown reports.

Imported by ``run.py`` only after it has settled the allocator (see ``bench_allocator``), since this module
loads torch and every benchmark.
"""

import argparse
import datetime
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.bench_attention import measure_attention
from benchmarks.bench_common import Section, run_section
from benchmarks.bench_environment import describe_environment
from benchmarks.bench_matmul import measure_matmul
from benchmarks.bench_memory import measure_memory
from benchmarks.bench_quality import measure_time_to_quality
from benchmarks.bench_report import render_markdown
from benchmarks.bench_settings import Settings
from benchmarks.bench_training import measure_training
from benchmarks.bench_translation import measure_translation

SECTION_TITLES = {
    "matmul": "Peak matmul throughput (the ceiling)",
    "training": "Training step throughput",
    "translation": "Translation throughput",
    "attention": "Attention time and peak memory against length",
    "memory": "Training memory at the paper's batch size",
    "quality": "Time to quality",
}
REPOSITORY = Path(__file__).resolve().parent.parent


def run_suite(args: argparse.Namespace, sections_to_run: list[str]) -> dict[str, Any]:
    """Run the given sections in order and return the JSON record.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line of ``run.py``.
    sections_to_run : list of str
        Keys of ``SECTION_TITLES`` in report order.

    Returns
    -------
    dict
        ``{"environment", "settings", "sections"}``, ready for JSON.

    Notes
    -----
    A section that raises is recorded as failed and the others still run.
    """
    settings = Settings.for_mode("smoke" if args.smoke else "quick" if args.quick else "full").for_machine()
    if settings.bf16_skipped:
        print(f"[benchmarks] bf16 skipped: {settings.bf16_skipped}", file=sys.stderr, flush=True)
    environment = describe_environment(args.threads, REPOSITORY, args.no_tcmalloc)  # the date is the start
    sections: dict[str, Section] = {}
    peaks: dict[str, float] = {}
    bodies: dict[str, Callable[[Section], None]] = {
        "matmul": lambda section: peaks.update(
            measure_matmul(section, list(settings.matmul_sizes), settings.matmul_repeats, settings.precisions)
        ),
        "training": lambda section: measure_training(section, settings, peaks),
        "translation": lambda section: measure_translation(section, settings, args.threads, peaks),
        "attention": lambda section: measure_attention(section, settings, args.threads),
        "memory": lambda section: measure_memory(section, settings, args.threads, environment["memory_gib"]),
        "quality": lambda section: measure_time_to_quality(
            section, settings, args.run, args.valid_source, args.valid_reference
        ),
    }
    for name in sections_to_run:
        started = time.perf_counter()
        print(f"[benchmarks] {name} ...", file=sys.stderr, flush=True)
        sections[name] = run_section(Section(name=name, title=SECTION_TITLES[name]), bodies[name])
        status = sections[name].status
        print(
            f"[benchmarks] {name}: {status} in {time.perf_counter() - started:.0f} s",
            file=sys.stderr,
            flush=True,
        )
    return {
        "environment": environment,
        "settings": settings.to_dict(),
        "sections": {name: section.to_dict() for name, section in sections.items()},
    }


def write_reports(record: dict[str, Any], output_dir: Path) -> list[Path]:
    """Write ``<timestamp>.json``, ``<timestamp>.md``, ``latest.json`` and ``latest.md``; return their paths."""
    output_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    as_json = json.dumps(record, indent=1) + "\n"
    as_markdown = render_markdown(record)
    paths = []
    for name, text in ((f"{stamp}.json", as_json), (f"{stamp}.md", as_markdown)):
        paths.append(output_dir / name)
        paths[-1].write_text(text, encoding="utf-8")
    for name, text in (("latest.json", as_json), ("latest.md", as_markdown)):
        paths.append(output_dir / name)
        paths[-1].write_text(text, encoding="utf-8")
    return paths
