"""``transformer experiment``: run, measure or report a named experiment, as library calls.

The command line parses its options into :class:`ExperimentOptions` and makes one call:
:func:`run_named_experiment` trains and scores a training experiment's runs (or runs a measurement, Table
1), :func:`report_named_experiment` regenerates or checks the experiment's section of EXPERIMENTS.md. Each
refuses, in one line naming them, the options that do not apply to what it does, rather than ignoring them.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from transformer.command_checks import check_output_directory
from transformer.device import resolve_device
from transformer.experiments.common.generated_sections import ReportOutcome, update_document
from transformer.experiments.common.plan import with_base_overrides
from transformer.experiments.common.runner import ExperimentOutcome, run_experiment
from transformer.experiments.registry import build_plan, measurement

#: Where an experiment's records go without ``--output-dir``: ``runs/experiments/NAME-SCALE``.
DEFAULT_EXPERIMENTS_DIR = Path("runs") / "experiments"
#: The document whose generated sections ``report`` rewrites without ``--document``.
DEFAULT_DOCUMENT = Path("EXPERIMENTS.md")


@dataclass(frozen=True)
class ExperimentOptions:
    """The options of ``transformer experiment``, as given on the command line.

    Parameters
    ----------
    name : str
        The experiment, or ``"report"``.
    report_of : str or None
        With ``report``: the experiment whose records are reported (the second positional argument).
    document : str or None
        ``--document``: the Markdown file with the generated sections (None: EXPERIMENTS.md).
    check : bool
        ``--check``: compare the section with the records, write nothing.
    scale : str
        ``--scale``: ``tiny``, ``cpu``, ``gpu`` or ``paper``.
    seeds : tuple of int
        ``--seeds``: the seeds of every variant.
    parallel : int
        ``--parallel``: runs trained at once.
    device : str
        ``--device``: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.
    output_dir : str or None
        ``--output-dir`` (None: ``runs/experiments/NAME-SCALE``).
    only : str or None
        ``--only``: comma-separated variants or groups.
    allow_dirty : bool
        ``--allow-dirty``: run although the package's source has uncommitted changes.
    overrides : tuple of str
        ``--set SECTION.KEY=VALUE`` items, changing the base configuration of every variant.

    Notes
    -----
    The defaults are the command line's: an option counts as given when its value differs from its default
    (:func:`training_flags`, :func:`refuse_flags`).
    """

    name: str
    report_of: str | None = None
    document: str | None = None
    check: bool = False
    scale: str = "cpu"
    seeds: tuple[int, ...] = (1,)
    parallel: int = 1
    device: str = "auto"
    output_dir: str | None = None
    only: str | None = None
    allow_dirty: bool = False
    overrides: tuple[str, ...] = ()

    def experiment_dir(self, experiment: str) -> Path:
        """Give the directory of an experiment's records: ``--output-dir`` or ``runs/experiments/NAME-SCALE``.

        Parameters
        ----------
        experiment : str
            The experiment's name (for ``report``, the one reported).

        Returns
        -------
        Path
            The directory (not necessarily existing yet).

        Notes
        -----
        The default holds the scale, so runs of two scales never share a results file.
        """
        if self.output_dir:
            return Path(self.output_dir)
        return DEFAULT_EXPERIMENTS_DIR / f"{experiment}-{self.scale}"

    def selected_variants(self) -> list[str] | None:
        """Split ``--only`` into variant or group names.

        Returns
        -------
        list of str or None
            The names, blanks dropped; None without ``--only`` (every variant).

        Notes
        -----
        A name that is neither a variant nor a group is refused by the plan, with the choices
        (:meth:`~transformer.experiments.common.plan.ExperimentPlan.select`).
        """
        if not self.only:
            return None
        return [name.strip() for name in self.only.split(",") if name.strip()]


@dataclass(frozen=True)
class ExperimentRunOutcome:
    """What ``transformer experiment NAME`` did: the runs of a training, or a measurement's report.

    Parameters
    ----------
    name : str
        The experiment.
    output_dir : Path
        Its records' directory.
    runs : ExperimentOutcome or None
        The runs finished, skipped and failed; None for a measurement.
    report_path : Path or None
        The measurement's report (``table1.md``); None for a training.

    Notes
    -----
    The command prints :meth:`summary` and :meth:`failures` and exits with :attr:`status`.
    """

    name: str
    output_dir: Path
    runs: ExperimentOutcome | None = None
    report_path: Path | None = None

    @property
    def status(self) -> int:
        """The command's exit status.

        Returns
        -------
        int
            1 when a run failed, else 0.

        Notes
        -----
        The runner goes on with the other runs after a failure, so status 1 comes with every other result
        recorded.
        """
        return 1 if self.runs is not None and self.runs.failed else 0

    def summary(self) -> str:
        """Say in one line what the invocation did.

        Returns
        -------
        str
            ``NAME: report: PATH`` for a measurement; ``NAME: F run(s) finished now, S done before, X failed;
            table: DIR/table.md`` for a training.

        Notes
        -----
        Printed on standard output after the runner's progress lines.
        """
        if self.runs is None:
            return f"{self.name}: report: {self.report_path}"
        return (
            f"{self.name}: {len(self.runs.finished)} run(s) finished now, "
            f"{len(self.runs.skipped)} done before, {len(self.runs.failed)} failed; "
            f"table: {self.output_dir / 'table.md'}"
        )

    def failures(self) -> list[str]:
        """Name every failed run with its log, one line each.

        Returns
        -------
        list of str
            ``failed: RUN (LOG)`` lines; empty when nothing failed.

        Notes
        -----
        Printed on standard error, so a script sees the failures apart from the progress.
        """
        return [] if self.runs is None else [f"failed: {failure}" for failure in self.runs.failed]


def training_flags(options: ExperimentOptions) -> list[tuple[str, object, object]]:
    """List the ``experiment`` options that only a training uses, with their values and defaults.

    Parameters
    ----------
    options : ExperimentOptions
        The parsed ``experiment`` command.

    Returns
    -------
    list of tuple
        ``(flag, value, default)`` for ``--seeds``, ``--parallel``, ``--only`` and ``--set``.

    Notes
    -----
    A measurement or a report refuses each of them given (:func:`refuse_flags`) instead of ignoring it.
    """
    return [
        ("--seeds", options.seeds, (1,)),
        ("--parallel", options.parallel, 1),
        ("--only", options.only, None),
        ("--set", options.overrides, ()),
    ]


def refuse_flags(reason: str, flags: Sequence[tuple[str, object, object]]) -> None:
    """Refuse the options given that do not apply, in one line.

    Parameters
    ----------
    reason : str
        Why they do not apply, e.g. ``"table1 is a measurement, not a training"``.
    flags : sequence of tuple
        ``(flag, value, default)``; a value other than its default counts as given.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Naming every option given, e.g. "table1 is a measurement, not a training: --seeds does not apply".

    Notes
    -----
    Every option is named at once, so one correction of the command line is enough.
    """
    given = [flag for flag, value, default in flags if value != default]
    if given:
        verb = "does" if len(given) == 1 else "do"
        raise ValueError(f"{reason}: {', '.join(given)} {verb} not apply")


def run_named_experiment(options: ExperimentOptions, report: Callable[[str], None]) -> ExperimentRunOutcome:
    """Run (or continue) an experiment: train and score its variants and rebuild its table, or measure it.

    Parameters
    ----------
    options : ExperimentOptions
        The command's options; ``name`` is the experiment.
    report : callable
        Receives one-line progress notes.

    Returns
    -------
    ExperimentRunOutcome
        The runs finished, skipped and failed, or the measurement's report.

    Raises
    ------
    ValueError
        Naming the option at fault: a report's option, a ``--device`` this machine lacks, an ``--output-dir``
        that is a file, a training's option given to a measurement, a bad ``--set``, ``--only`` or scale.

    Notes
    -----
    Rerunning the same command skips finished runs and resumes interrupted ones; ``--set`` changes the
    configuration, so runs recorded without it are refused rather than mixed with new ones. A measurement
    experiment (one whose ``run`` module has ``run_measurement``, e.g. ``table1``) trains nothing: it is
    called directly, and ``--seeds``, ``--parallel``, ``--only`` and ``--set`` are refused for it. Every
    option is checked before anything is written.
    """
    refuse_flags(
        f"{options.name} trains or measures, it does not report",
        [
            ("NAME", options.report_of, None),
            ("--document", options.document, None),
            ("--check", options.check, False),
        ],
    )
    resolve_device(options.device, option="--device")
    output_dir = options.experiment_dir(options.name)
    check_output_directory(output_dir, "--output-dir")
    measure = measurement(options.name)
    if measure is not None:
        refuse_flags(f"{options.name} is a measurement, not a training", training_flags(options))
        report_path = measure(output_dir, options.device, options.scale, report, options.allow_dirty)
        return ExperimentRunOutcome(options.name, output_dir, report_path=report_path)
    plan = with_base_overrides(build_plan(options.name, options.scale), options.overrides)
    runs = run_experiment(
        plan,
        output_dir,
        options.seeds,
        options.parallel,
        options.device,
        options.selected_variants(),
        report=report,
        allow_dirty=options.allow_dirty,
    )
    return ExperimentRunOutcome(options.name, output_dir, runs=runs)


def report_named_experiment(options: ExperimentOptions) -> ReportOutcome:
    """Regenerate (or check) an experiment's section of EXPERIMENTS.md from its committed records.

    Parameters
    ----------
    options : ExperimentOptions
        ``report NAME``, ``--output-dir`` (the records' directory, default runs/experiments/NAME-SCALE),
        ``--document`` (default EXPERIMENTS.md) and ``--check``.

    Returns
    -------
    ReportOutcome
        The section, whether it changed, and the line to print (:meth:`ReportOutcome.message`).

    Raises
    ------
    ValueError
        Without NAME, for a training's option, or for records or a document that cannot be reported.

    Notes
    -----
    The section is the one between the markers named after the records' directory
    (:mod:`transformer.experiments.common.generated_sections`).
    """
    if options.report_of is None:
        raise ValueError("report: name the experiment, e.g. transformer experiment report table2")
    refuse_flags(
        "report reads records, it trains nothing",
        [
            *training_flags(options),
            ("--allow-dirty", options.allow_dirty, False),
            ("--device", options.device, "auto"),
        ],
    )
    document = Path(options.document) if options.document else DEFAULT_DOCUMENT
    return update_document(
        options.report_of, options.experiment_dir(options.report_of), document, options.check
    )
