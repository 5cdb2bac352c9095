"""Handlers of the commands that prepare data, train and run experiments.

The commands ``prepare``, ``train``, ``quickstart``, ``plot`` and ``experiment``. Each checks its options, makes one library call and prints; :func:`transformer.cli.main` turns their errors
into one line and exit status 2.
"""

import argparse
import sys
from pathlib import Path

from transformer.cli_arguments.paths import (
    default_output_dir,
)
from transformer.command_checks import (
    refuse_outputs_among_inputs,
)
from transformer.config.experiment import ExperimentConfig
from transformer.config.files import blame_override, load_config, resolve_config_path
from transformer.data.prepare import prepare_data
from transformer.decoding.translation_progress import translation_progress_bar
from transformer.experiments.command import ExperimentOptions, report_named_experiment, run_named_experiment
from transformer.experiments.quickstart import train_and_test
from transformer.training.launch import claim_run_dir_if_main, is_main_process, train_experiment
from transformer.visualization.training_curves import plot_training_curves


def load_experiment(args: argparse.Namespace) -> ExperimentConfig:
    """Read ``--config`` with its ``--set`` overrides.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments with ``config`` and ``overrides``.

    Returns
    -------
    ExperimentConfig
        The validated configuration.

    Notes
    -----
    See :func:`transformer.config.load_config`. An error that an override causes names its flag
    (``--set KEY=VALUE`` or ``--data-dir DIR``) rather than the file; see :func:`blame_override`.
    """
    path = resolve_config_path(args.config)
    flagged_overrides = [(f"--set {override}", override) for override in args.overrides]
    if getattr(args, "data_dir", None):
        data_dir_flag = f"--data-dir {args.data_dir}"
        flagged_overrides += [
            (data_dir_flag, "data.corpus=directory"),
            (data_dir_flag, f"data.data_dir={args.data_dir}"),
        ]
    try:
        return load_config(path, [override for _, override in flagged_overrides])
    except ValueError as error:
        raise blame_override(path, flagged_overrides, error) from None


def run_prepare(args: argparse.Namespace) -> int:
    """Prepare the corpus and the joint BPE vocabulary of a config, without training.

    Parameters
    ----------
    args : argparse.Namespace
        ``--config``, ``--set`` overrides and ``--output-dir``.

    Returns
    -------
    int
        The exit status: 0 (errors raise and :func:`main` turns them into status 2 with a one-line message).

    Notes
    -----
    Writes exactly what ``train`` would write first (``data/``, ``tokenizer.model``), so a vocabulary can be
    inspected, or prepared on one machine and trained on another; ``train`` then reuses it. It takes the run
    directory's lock as ``train`` does, so a ``prepare`` and a ``train`` of one directory never write its
    data at the same time (the second is refused, naming the first).
    """
    experiment = load_experiment(args)
    run_dir = default_output_dir(args)
    with claim_run_dir_if_main(run_dir):
        data = prepare_data(experiment.data, experiment.model.vocab_size, run_dir, message=print)
    print(f"prepared {len(data.train)} training pairs and {data.tokenizer.vocab_size} pieces in {run_dir}")
    return 0


def run_train(args: argparse.Namespace) -> int:
    """Train a model from a config.

    Parameters
    ----------
    args : argparse.Namespace
        ``--config``, ``--set`` overrides, ``--output-dir`` and ``--resume``.

    Returns
    -------
    int
        The exit status: 0 (errors raise and :func:`main` turns them into status 2 with a one-line message).

    Notes
    -----
    The run directory is locked for the run (:func:`~transformer.training.launch.claim_run_dir_if_main`); under
    ``torchrun`` only rank 0 prints the summary, as only it writes the run directory.
    """
    experiment = load_experiment(args)
    run_dir = default_output_dir(args)
    with claim_run_dir_if_main(run_dir):
        result, _ = train_experiment(experiment, run_dir, args.resume)
    if is_main_process():
        print(result.describe())
    return 0


def run_quickstart(args: argparse.Namespace) -> int:
    """Train on the built-in corpus, then translate its test split and print BLEU and examples.

    Parameters
    ----------
    args : argparse.Namespace
        ``--config`` (default ``quickstart``), ``--set`` overrides, ``--output-dir`` and ``--examples``.

    Returns
    -------
    int
        The exit status: 0 (errors raise and :func:`main` turns them into status 2 with a one-line message).

    Notes
    -----
    See :func:`~transformer.experiments.quickstart.train_and_test`: a second run reuses the finished run, so
    the README's first command is cheap to repeat. The training summary is printed as soon as training ends.
    """
    args.config = args.config or "quickstart"
    experiment = load_experiment(args)
    outcome = train_and_test(experiment, default_output_dir(args), print, translation_progress_bar)
    if outcome.scores is None:
        return 0
    print(f"test set ({len(outcome.pairs)} sentences, beam {outcome.beam_size}):")
    print(outcome.scores.describe())
    examples = list(zip(outcome.pairs, outcome.hypotheses, strict=True))
    for (source, reference), hypothesis in examples[: args.examples]:
        print(f"\n  source:     {source}\n  output:     {hypothesis}\n  reference:  {reference}")
    return 0


def run_plot(args: argparse.Namespace) -> int:
    """Draw loss and learning-rate curves of a run.

    Parameters
    ----------
    args : argparse.Namespace
        ``--run`` and optionally ``--output`` (default ``RUN/training_curves.png``).

    Returns
    -------
    int
        The exit status: 0 (errors raise and :func:`main` turns them into status 2 with a one-line message).

    Notes
    -----
    Reads only ``metrics.jsonl``, so it works on a run still training; the PNG is written atomically.
    """
    metrics = Path(args.run) / "metrics.jsonl"
    output = Path(args.output) if args.output else Path(args.run) / "training_curves.png"
    refuse_outputs_among_inputs([("--run", metrics)], output_files=[("--output", output)])
    print(f"wrote {plot_training_curves(metrics, output)}")
    return 0


def experiment_options(args: argparse.Namespace) -> ExperimentOptions:
    """Collect the parsed ``experiment`` command's options.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed ``experiment`` command.

    Returns
    -------
    ExperimentOptions
        Every option as given, defaults included.

    Notes
    -----
    The library decides which options apply (:mod:`transformer.experiments.command`).
    """
    return ExperimentOptions(
        name=args.name,
        report_of=args.report_of,
        document=args.document,
        check=args.check,
        scale=args.scale,
        seeds=args.seeds,
        parallel=args.parallel,
        device=args.device,
        output_dir=args.output_dir,
        only=args.only,
        allow_dirty=args.allow_dirty,
        overrides=tuple(args.overrides),
    )


def run_experiment_command(args: argparse.Namespace) -> int:
    """Run (or continue) an experiment: train and score its variants, then rebuild its table.

    Parameters
    ----------
    args : argparse.Namespace
        The experiment's name, ``--scale``, ``--seeds``, ``--parallel``, ``--device``, ``--output-dir``,
        ``--only``, ``--allow-dirty`` and ``--set`` overrides of the base configuration.

    Returns
    -------
    int
        0 when every selected run has a result, 1 when some failed (each named with its log).

    Notes
    -----
    ``report`` is handed to :func:`run_experiment_report`; everything else is
    :func:`transformer.experiments.command.run_named_experiment`.
    """
    if args.name == "report":
        return run_experiment_report(args)
    outcome = run_named_experiment(experiment_options(args), report=print)
    print(outcome.summary())
    for failure in outcome.failures():
        print(failure, file=sys.stderr)
    return outcome.status


def run_experiment_report(args: argparse.Namespace) -> int:
    """Regenerate (or check) an experiment's section of EXPERIMENTS.md from its committed records.

    Parameters
    ----------
    args : argparse.Namespace
        ``report NAME``, ``--output-dir`` (the records' directory, default runs/experiments/NAME-SCALE),
        ``--document`` (default EXPERIMENTS.md) and ``--check``.

    Returns
    -------
    int
        0 when the section is (now) current; 1 with ``--check`` when it differs.

    Notes
    -----
    See :func:`transformer.experiments.command.report_named_experiment`; a stale section found by
    ``--check`` is reported on standard error.
    """
    outcome = report_named_experiment(experiment_options(args))
    print(outcome.message(), file=sys.stderr if outcome.status else sys.stdout)
    return outcome.status
