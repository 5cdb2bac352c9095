"""Run the benchmark suite and write JSON and Markdown reports.

From the repository root (a module of the ``benchmarks`` package, not a script to run by path):

    python -m benchmarks.run --quick                 # two to three minutes on 2 cores
    python -m benchmarks.run                         # full mode, for the record
    python -m benchmarks.run --only training,attention --run runs/multi30k

Sections: matmul (the ceiling), training, translation, attention, quality (needs ``--run``). Unless
``--no-tcmalloc`` is given, the suite re-executes itself with tcmalloc preloaded when the library is
installed, since the allocator changes PyTorch's CPU throughput by 15-40%; the report states the allocator.
"""

import argparse
import shlex
import sys
from pathlib import Path

if not __package__:  # run by path, where the package imports below fail: say how to run it instead
    sys.exit(f"run from the repository root: python -m benchmarks.run {shlex.join(sys.argv[1:])}".rstrip())

from benchmarks.bench_allocator import reexecute_under_tcmalloc

SECTIONS = ("matmul", "training", "translation", "attention", "memory", "quality")
DEFAULT_OUTPUT_DIR = Path(__file__).resolve().parent / "results"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run",
        description="Benchmark the Transformer against its peers; write <timestamp>.json, latest.json and latest.md.",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--quick", action="store_true", help="smaller sizes and fewer repeats (under 2 minutes)"
    )
    mode.add_argument("--smoke", action="store_true", help="minuscule sizes, to test that the suite runs")
    parser.add_argument("--only", default=None, help=f"comma-separated sections among {','.join(SECTIONS)}")
    parser.add_argument("--run", type=Path, default=None, help="training run directory, for time to quality")
    parser.add_argument(
        "--valid-source", type=Path, default=None, help="validation sources (default: the run's)"
    )
    parser.add_argument("--valid-reference", type=Path, default=None, help="validation references")
    parser.add_argument(
        "--output-dir", type=Path, default=DEFAULT_OUTPUT_DIR, help="where reports are written"
    )
    parser.add_argument("--threads", type=int, default=2, help="PyTorch intra-op threads (default 2)")
    parser.add_argument("--no-tcmalloc", action="store_true", help="do not re-execute under tcmalloc")
    return parser


def selected_sections(only: str | None, run_dir: Path | None) -> list[str]:
    """The sections to run, in report order; training and translation bring in matmul, the peak they divide by.

    Parameters
    ----------
    only : str or None
        ``--only``: comma-separated section names; None selects all (quality only with a run directory).
    run_dir : Path or None
        ``--run``.

    Returns
    -------
    list of str
        Section names in report order.

    Notes
    -----
    Exits with a message naming the valid sections on a typo.
    """
    if only is None:
        chosen = set(SECTIONS) if run_dir is not None else set(SECTIONS) - {"quality"}
    else:
        chosen = {name.strip() for name in only.split(",") if name.strip()}
        unknown = chosen - set(SECTIONS)
        if unknown:
            raise SystemExit(f"--only: unknown sections {sorted(unknown)}; choose among {list(SECTIONS)}")
    if chosen & {"training", "translation"}:
        chosen.add("matmul")
    return [name for name in SECTIONS if name in chosen]


def main(argv: list[str] | None = None) -> int:
    """Run the selected sections and write the reports.

    Parameters
    ----------
    argv : list of str or None
        The arguments (``--help`` lists them); None reads ``sys.argv``.

    Returns
    -------
    int
        The exit status: 1 if a section failed, else 0.

    Notes
    -----
    May first re-execute the whole command under tcmalloc (``bench_allocator``); the report paths are printed.
    """
    args = build_parser().parse_args(argv)
    if args.threads <= 0:
        raise SystemExit(f"--threads={args.threads} must be positive")
    if (args.valid_source is None) != (args.valid_reference is None):
        raise SystemExit("--valid-source and --valid-reference go together")
    sections = selected_sections(args.only, args.run)  # fail on a typo before re-executing or measuring
    reexecute_under_tcmalloc(args.no_tcmalloc)
    # Loaded only now: the allocator must be settled before torch starts allocating.
    import torch

    from benchmarks.bench_suite import run_suite, write_reports

    torch.set_num_threads(args.threads)
    record = run_suite(args, sections)
    for path in write_reports(record, args.output_dir):
        print(path)
    failed = [name for name, section in record["sections"].items() if section["status"] == "failed"]
    if failed:
        print(f"[benchmarks] failed sections: {', '.join(failed)} (see the reports)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
