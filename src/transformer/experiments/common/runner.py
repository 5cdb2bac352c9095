"""Run an experiment's variants: skip what finished, resume what was interrupted, report what failed.

Every run (variant x seed) lives in ``OUTPUT_DIR/runs/VARIANT-sSEED/`` and is trained and scored by a worker
process (:mod:`transformer.experiments.common.worker`) with the ordinary trainer, checkpoints and decoder.
The runner decides which runs to start (:mod:`transformer.experiments.common.planned_runs`), starts up to
``parallel`` workers at a time, appends each finished run to ``results.jsonl`` and rebuilds ``table.md`` (and
the experiment's plots) from that file after every run.

Rerunning the same command is always safe: a run with a result is skipped, a run with checkpoints but no
result resumes from its last checkpoint, and a run whose configuration changed since it was recorded is
refused with the keys that differ, so old and new numbers never mix in one table.
"""

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from transformer.atomic_files import write_bytes_atomically, write_json_atomically, write_text_atomically
from transformer.autotune.thread_probe import usable_cpus
from transformer.config.experiment import experiment_from_dict
from transformer.data.prepare import TOKENIZER_FILE, prepare_data
from transformer.experiments.common.curves import keep_run_curves
from transformer.experiments.common.plan import ExperimentPlan, config_fingerprint
from transformer.experiments.common.planned_runs import PlannedRun, check_recorded, plan_runs
from transformer.experiments.common.provenance import (
    describe_machine,
    git_commit,
    refuse_dirty_tree,
    source_state,
)
from transformer.experiments.common.results import (
    RESULTS_FILE,
    append_result,
    keep_run_sentences,
    read_results,
)
from transformer.experiments.common.worker import LOG_FILE, RESULT_FILE, RUN_FILE
from transformer.experiments.registry import experiment_part
from transformer.training.run_lock import hold_run_lock

TABLE_FILE = "table.md"


@dataclass
class ExperimentOutcome:
    """What one invocation of the runner did.

    Parameters
    ----------
    finished : list of str
        Runs trained (or resumed) and scored now.
    skipped : list of str
        Runs that already had a result.
    failed : list of str
        Runs whose worker failed, each with the path of its log.

    Notes
    -----
    ``transformer experiment`` exits with status 1 when ``failed`` is not empty, after every other run went on.
    """

    finished: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def share_vocabulary(runs: Sequence[PlannedRun], output_dir: Path, report: Callable[[str], None]) -> None:
    """Learn each distinct vocabulary once and give it to every run that uses it.

    Parameters
    ----------
    runs : sequence of PlannedRun
        The runs about to start.
    output_dir : Path
        The experiment directory; vocabularies go to ``shared/VOCAB-HASH/``.
    report : callable
        Receives one-line progress notes.

    Returns
    -------
    None

    Notes
    -----
    Perplexities are comparable only between models with the same vocabulary (Table 2 compares them), and
    learning the BPE model once also saves its time per run. A run that already has ``tokenizer.model``
    keeps it: a resumed run must keep its ids.
    """
    for run in runs:
        if (run.run_dir / TOKENIZER_FILE).exists():
            continue
        experiment = experiment_from_dict(run.config, source=run.name)
        data_key = {"data": run.config["data"], "vocab_size": experiment.model.vocab_size}
        shared = output_dir / "shared" / config_fingerprint(data_key)[:12]
        if not (shared / TOKENIZER_FILE).exists():
            report(
                f"vocabulary: learning {experiment.model.vocab_size} pieces for {run.name}'s data in {shared}"
            )
            prepare_data(experiment.data, experiment.model.vocab_size, shared)
        write_bytes_atomically(run.run_dir / TOKENIZER_FILE, (shared / TOKENIZER_FILE).read_bytes())


def rebuild_reports(plan: ExperimentPlan, output_dir: Path) -> Path:
    """Rebuild ``table.md`` (and the experiment's plots) from ``results.jsonl``.

    Parameters
    ----------
    plan : ExperimentPlan
        The experiment.
    output_dir : Path
        The experiment directory.

    Returns
    -------
    Path
        ``table.md``.

    Notes
    -----
    Built from the file alone, never from memory, so the table always says what the results file holds,
    including runs of earlier invocations.
    """
    tables = experiment_part(plan.name, "report")
    if tables is None:
        raise ValueError(f"{plan.name} has no report module to render its table")
    records = read_results(output_dir / RESULTS_FILE)
    write_text_atomically(output_dir / TABLE_FILE, tables.render_table(plan, records))
    plot = getattr(tables, "plot", None)
    if plot is not None and records:
        plot(plan, records, output_dir)
    return output_dir / TABLE_FILE


def run_experiment(
    plan: ExperimentPlan,
    output_dir: Path,
    seeds: int | Sequence[int] = 1,
    parallel: int = 1,
    device: str = "auto",
    only: Sequence[str] | None = None,
    report: Callable[[str], None] = print,
    poll_seconds: float = 1.0,
    allow_dirty: bool = False,
) -> ExperimentOutcome:
    """Train and score every selected run of an experiment that has no result yet.

    Parameters
    ----------
    plan : ExperimentPlan
        The experiment at its scale.
    output_dir : Path
        The experiment directory (created if missing).
    seeds : int or sequence of int
        Seeds per variant (a count n: seeds 1 .. n), or the seeds themselves.
    parallel : int
        Runs trained at the same time; the usable CPUs are split between them.
    device : str
        ``train.device`` of every run.
    only : sequence of str or None
        Variants or groups to run (``--only``).
    report : callable
        Receives one-line progress notes.
    poll_seconds : float
        How often finished workers are collected.
    allow_dirty : bool
        Train even when the package's source tree has uncommitted changes (records marked dirty).

    Returns
    -------
    ExperimentOutcome
        Runs finished, skipped and failed.

    Notes
    -----
    The experiment directory is locked while the runner works, so a second invocation on it is refused
    instead of training the same runs twice. On Ctrl-C the workers are stopped and the runner re-raises;
    rerunning resumes every interrupted run from its last checkpoint. The selection, the seeds and every
    run's configuration are validated before the directory is created, so a typo in ``--only`` or ``--set``
    leaves nothing behind, and so does a source tree with uncommitted changes (see :func:`refuse_dirty_tree`).
    """
    if parallel < 1:
        raise ValueError(f"--parallel {parallel}: at least one run at a time")
    plan_runs(plan, output_dir, seeds, only, device, None)  # validation only: raises before anything exists
    refuse_dirty_tree(source_state(), allow_dirty)
    output_dir.mkdir(parents=True, exist_ok=True)
    with hold_run_lock(output_dir):
        return _run_locked(plan, output_dir, seeds, parallel, device, only, report, poll_seconds)


def _run_locked(
    plan: ExperimentPlan,
    output_dir: Path,
    seeds: int | Sequence[int],
    parallel: int,
    device: str,
    only: Sequence[str] | None,
    report: Callable[[str], None],
    poll_seconds: float,
) -> ExperimentOutcome:
    """Run the body of :func:`run_experiment`, with the experiment directory locked."""
    threads = max(1, usable_cpus() // parallel) if parallel > 1 else None
    runs = plan_runs(plan, output_dir, seeds, only, device, threads)
    results_path = output_dir / RESULTS_FILE
    recorded = {(record["variant"], int(record["seed"])): record for record in read_results(results_path)}
    outcome = ExperimentOutcome()
    pending = []
    for run in runs:
        if check_recorded(run, recorded.get((run.variant.name, run.seed)), results_path):
            outcome.skipped.append(run.name)
        elif (run.run_dir / RESULT_FILE).exists() and _harvest(run, plan, results_path):
            outcome.finished.append(
                run.name
            )  # scored by a worker whose runner was killed before recording it
        else:
            pending.append(run)
    if outcome.skipped:
        report(f"{plan.name}: {len(outcome.skipped)} run(s) already done: {', '.join(outcome.skipped)}")
    share_vocabulary(pending, output_dir, report)
    active: list[tuple[PlannedRun, subprocess.Popen[bytes], float]] = []
    try:
        while pending or active:
            while pending and len(active) < parallel:
                run = pending.pop(0)
                active.append((run, _start_worker(run, plan), time.monotonic()))
                state = "resuming" if (run.run_dir / "checkpoints" / "index.json").exists() else "starting"
                report(f"{plan.name}: {state} {run.name} (log: {run.run_dir / LOG_FILE})")
            time.sleep(poll_seconds if active else 0)
            for item in [item for item in active if item[1].poll() is not None]:
                active.remove(item)
                run, process, started = item
                if process.returncode == 0 and _harvest(run, plan, results_path):
                    outcome.finished.append(run.name)
                    record = json.loads((run.run_dir / RESULT_FILE).read_text(encoding="utf-8"))
                    report(
                        f"{plan.name}: finished {run.name} in {(time.monotonic() - started) / 60:.1f} min: "
                        f"dev BLEU {record['dev_bleu']:.2f}, perplexity {record['dev_perplexity']:.2f}"
                    )
                    rebuild_reports(plan, output_dir)
                else:
                    outcome.failed.append(f"{run.name} ({run.run_dir / LOG_FILE})")
                    report(
                        f"{plan.name}: {run.name} FAILED (exit status {process.returncode}): "
                        f"{_last_line(run.run_dir / LOG_FILE)} -- see {run.run_dir / LOG_FILE}"
                    )
    except BaseException:
        for _, process, _ in active:
            process.terminate()
        for _, process, _ in active:
            process.wait()
        raise
    rebuild_reports(plan, output_dir)
    return outcome


def _start_worker(run: PlannedRun, plan: ExperimentPlan) -> "subprocess.Popen[bytes]":
    """Write the run's ``run.json`` and start its worker, output to ``log.txt``."""
    run.run_dir.mkdir(parents=True, exist_ok=True)
    commit = git_commit()  # the code that trains it, recorded when the run starts or resumes
    commits = _earlier_commits(run.run_dir)
    spec = {
        "experiment": plan.name,
        "scale": plan.scale,
        "variant": run.variant.name,
        "group": run.variant.group,
        "seed": run.seed,
        "average_last": plan.average_last,
        "config": run.config,
        "commit": commit,
        "commits": commits + [commit] if not commits or commits[-1] != commit else commits,
    }
    write_json_atomically(run.run_dir / RUN_FILE, spec)
    (run.run_dir / RESULT_FILE).unlink(missing_ok=True)
    with open(run.run_dir / LOG_FILE, "ab") as log:
        log.write(f"\n=== {datetime.now(timezone.utc).isoformat(timespec='seconds')} {run.name}\n".encode())
        log.flush()
        return subprocess.Popen(
            [sys.executable, "-m", "transformer.experiments.common.worker", str(run.run_dir)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            preexec_fn=_stop_with_parent if sys.platform == "linux" else None,
        )


def _earlier_commits(run_dir: Path) -> list[str | None]:
    """Return the commits an interrupted run trained under so far (from its ``run.json``), oldest first."""
    try:
        spec = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    commits: list[str | None] = spec.get("commits") or [spec.get("commit")]
    return commits


def _stop_with_parent() -> None:
    """Ask Linux to send the worker SIGTERM when the runner dies, even by SIGKILL (no orphans training on)."""
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _harvest(run: PlannedRun, plan: ExperimentPlan, results_path: Path) -> bool:
    """Append a run's ``result.json`` to ``results.jsonl`` with its configuration and provenance."""
    result_file = run.run_dir / RESULT_FILE
    try:
        result = json.loads(result_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    spec = json.loads((run.run_dir / RUN_FILE).read_text(encoding="utf-8"))
    spec_commits = spec.get("commits") or [result.get("commit")]
    stored = {
        **keep_run_sentences(run.run_dir, results_path.parent),
        **keep_run_curves(run.run_dir, results_path.parent, run.name),
    }
    record = {
        **result,
        "config": run.config,
        "config_sha256": config_fingerprint(run.config),
        "reported": run.variant.reported,
        "overrides": run.variant.overrides,
        "commit": result.get("commit", git_commit()),
        # Every commit that trained the run (one unless it was resumed under other code), and whether any had
        # uncommitted changes: the report marks such runs.
        "commits": spec_commits,
        "dirty": any(commit is not None and commit.endswith("+dirty") for commit in spec_commits),
        **stored,
        "machine": describe_machine(str(run.config["train"]["device"])),
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    append_result(results_path, record)
    return True


def _last_line(log: Path) -> str:
    """Return the last non-empty line of a log (the error, for a run that failed)."""
    try:
        lines = [
            line for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()
        ]
    except OSError:
        return "(no log)"
    return lines[-1][-300:] if lines else "(empty log)"
