"""The options of the commands that train or read runs.

``prepare``, ``train``, ``quickstart``, ``plot`` and ``experiment``; the config options (``--config``, ``--set``,
``--output-dir``, ``--data-dir``) are shared by the first three.
"""

import argparse

from transformer.cli_arguments.parser import Subcommands
from transformer.command_checks import integer_in_range, seed_selection
from transformer.experiments.registry import EXPERIMENTS, SCALES


def add_config_arguments(parser: argparse.ArgumentParser, required: bool = True) -> None:
    """Add ``--config``, ``--set`` and ``--output-dir``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The subcommand's parser (``train``, ``prepare``, ``quickstart``).
    required : bool
        Whether ``--config`` must be given (``quickstart`` defaults to ``configs/quickstart.yaml``).

    Returns
    -------
    None

    Notes
    -----
    ``--set key=value`` may repeat; overrides apply in order after the YAML file, and an error in one names
    the flag rather than the file. ``--data-dir`` is an override too (``data.corpus=directory``).
    """
    parser.add_argument("--config", required=required, help="YAML file, or the name of one in configs/")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a config value, e.g. --set train.max_steps=2000 (repeatable)",
    )
    parser.add_argument("--output-dir", help="run directory (default: runs/<config name>)")
    parser.add_argument(
        "--data-dir",
        help="train on the files {train,valid,test}.{en,de}[.gz] in this folder instead of the config's corpus "
        "(the suffixes are data.source_lang and data.target_lang: en and de unless the config says otherwise)",
    )


def add_prepare_parser(commands: Subcommands) -> argparse.ArgumentParser:
    """Add ``transformer prepare``: fetch or generate the corpus and train the vocabulary.

    Parameters
    ----------
    commands : argparse._SubParsersAction
        The subcommands of the ``transformer`` parser.

    Returns
    -------
    argparse.ArgumentParser
        The subcommand's parser; :func:`transformer.cli.build_parser` sets its handler.

    Notes
    -----
    It takes ``train``'s config options, so a vocabulary prepared on one machine is the one ``train`` reuses
    on another.
    """
    prepare = commands.add_parser(
        "prepare", help="fetch/generate the corpus and train the joint BPE vocabulary"
    )
    add_config_arguments(prepare)
    return prepare


def add_train_parser(commands: Subcommands) -> argparse.ArgumentParser:
    """Add ``transformer train`` and its ``--resume``.

    Parameters
    ----------
    commands : argparse._SubParsersAction
        The subcommands of the ``transformer`` parser.

    Returns
    -------
    argparse.ArgumentParser
        The subcommand's parser; :func:`transformer.cli.build_parser` sets its handler.

    Notes
    -----
    ``--resume`` is a flag rather than automatic: a typo in ``--output-dir`` must not silently start a new
    run, nor a wanted new run continue an old one.
    """
    train = commands.add_parser("train", help="train a model (run under torchrun for several processes)")
    add_config_arguments(train)
    train.add_argument("--resume", action="store_true", help="continue from the run's latest checkpoint")
    return train


def add_quickstart_parser(commands: Subcommands) -> argparse.ArgumentParser:
    """Add ``transformer quickstart``: train on the built-in corpus, then report test BLEU.

    Parameters
    ----------
    commands : argparse._SubParsersAction
        The subcommands of the ``transformer`` parser.

    Returns
    -------
    argparse.ArgumentParser
        The subcommand's parser; :func:`transformer.cli.build_parser` sets its handler.

    Notes
    -----
    ``--config`` is optional here (``configs/quickstart.yaml``), so the README's first command needs no
    argument.
    """
    quickstart = commands.add_parser("quickstart", help="train on the built-in corpus, then report test BLEU")
    add_config_arguments(quickstart, required=False)
    quickstart.add_argument(
        "--examples", type=integer_in_range(0), default=5, help="example translations to print"
    )
    return quickstart


def add_plot_parser(commands: Subcommands) -> argparse.ArgumentParser:
    """Add ``transformer plot``: a run's loss and learning-rate curves.

    Parameters
    ----------
    commands : argparse._SubParsersAction
        The subcommands of the ``transformer`` parser.

    Returns
    -------
    argparse.ArgumentParser
        The subcommand's parser; :func:`transformer.cli.build_parser` sets its handler.

    Notes
    -----
    It reads only ``metrics.jsonl``, so it can draw a run that is still training.
    """
    plot = commands.add_parser("plot", help="plot a run's loss and learning-rate curves")
    plot.add_argument("--run", required=True, help="run directory (holds metrics.jsonl)")
    plot.add_argument("--output", help="PNG path (default RUN/training_curves.png)")
    return plot


def add_experiment_parser(commands: Subcommands) -> argparse.ArgumentParser:
    """Add ``transformer experiment``: train and score an experiment's variants, or report one.

    Parameters
    ----------
    commands : argparse._SubParsersAction
        The subcommands of the ``transformer`` parser.

    Returns
    -------
    argparse.ArgumentParser
        The subcommand's parser; :func:`transformer.cli.build_parser` sets its handler.

    Notes
    -----
    ``report`` is a choice of the same positional as the experiments' names (``experiment report table2``),
    so the report of an experiment is found where its runs are.
    """
    experiment = commands.add_parser(
        "experiment",
        help="train and score the variants of one of the paper's experiments (resumable), or measure one "
        "(table1)",
    )
    experiment.add_argument(
        "name",
        choices=[*sorted(EXPERIMENTS), "report"],
        help="the experiment, or 'report' to regenerate an experiment's section of EXPERIMENTS.md",
    )
    experiment.add_argument(
        "report_of",
        nargs="?",
        choices=sorted(EXPERIMENTS),
        metavar="NAME",
        help="with 'report': the experiment whose records --output-dir holds",
    )
    experiment.add_argument(
        "--document",
        help="with 'report': the Markdown file holding the section's markers (default EXPERIMENTS.md)",
    )
    experiment.add_argument(
        "--check",
        action="store_true",
        help="with 'report': write nothing; exit 1 when the section differs from what the records give",
    )
    experiment.add_argument(
        "--scale", choices=SCALES, default="cpu", help="model and data size (default cpu)"
    )
    experiment.add_argument(
        "--seeds",
        type=seed_selection,
        default=(1,),
        help="a count (3: seeds 1-3) or the seeds themselves (1,5,7 or 4-6; 7-7 for seed 7 alone); default 1",
    )
    experiment.add_argument(
        "--parallel", type=integer_in_range(1), default=1, help="runs trained at once (default 1)"
    )
    experiment.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    experiment.add_argument("--output-dir", help="default runs/experiments/NAME-SCALE")
    experiment.add_argument("--only", help="comma-separated variants or groups, e.g. base,A,E1")
    experiment.add_argument(
        "--allow-dirty",
        action="store_true",
        help="run even though the package's source has uncommitted changes (the records say so); by default "
        "refused, so every result names the commit that made it",
    )
    experiment.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="change the base configuration of every variant, e.g. data.mirror=DIR (repeatable)",
    )
    return experiment
