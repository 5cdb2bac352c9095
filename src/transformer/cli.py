"""The ``transformer`` command: prepare data, train, average, translate, evaluate, plot.

Only this module parses arguments and prints; it calls the library and turns its errors into one-line
messages (exit status 2) instead of tracebacks. Each command checks its options and the files they name
(:mod:`transformer.cli_arguments`, :mod:`transformer.command_checks`), loads the model it names, makes one
library call for its work and prints the outcome; the options themselves are declared in
:mod:`transformer.cli_arguments`.
"""

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from transformer.averaging import select_last_checkpoints, write_average
from transformer.checkpoint.layout import resolve_checkpoint
from transformer.cli_arguments import training_commands, translation_commands
from transformer.cli_arguments.parser import OneLineErrorParser, UsageError
from transformer.cli_arguments.paths import (
    checkpoint_directories,
    checkpoint_directory,
    default_output_dir,
    named_file,
)
from transformer.cli_arguments.search_options import (
    alignment_layer_from_args,
    decode_config_from_args,
    translator_from_args,
)
from transformer.command_checks import (
    check_output_directory,
    check_output_file,
    refuse_control_characters,
    refuse_outputs_among_inputs,
)
from transformer.config.experiment import ExperimentConfig
from transformer.config.files import blame_override, load_config, resolve_config_path
from transformer.data.prepare import prepare_data
from transformer.decoding.backtranslation import backtranslate_file, check_backtranslation_request
from transformer.decoding.file_translation import translate_file
from transformer.decoding.translation_evaluation import evaluate_translator
from transformer.decoding.translation_progress import translation_progress_bar
from transformer.device import resolve_device
from transformer.evaluation.bleu import score_files
from transformer.experiments.command import ExperimentOptions, report_named_experiment, run_named_experiment
from transformer.experiments.quickstart import train_and_test
from transformer.interop.conversion import convert_model
from transformer.interop.ctranslate2_translation import (
    ctranslate2_model_directory,
    translate_file_with_ctranslate2,
)
from transformer.training.launch import claim_run_dir_if_main, is_main_process, train_experiment
from transformer.training.result import TrainingDivergedError
from transformer.visualization.checkpoint_attention import draw_checkpoint_attention
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


def run_translate(args: argparse.Namespace) -> int:
    """Translate lines of text with a checkpoint (PyTorch) or a CTranslate2 export.

    Parameters
    ----------
    args : argparse.Namespace
        ``--checkpoint``, ``--input``/``--output`` (standard input/output by default), the search flags,
        ``--device``, ``--precision`` and ``--engine``.

    Returns
    -------
    int
        The exit status: 0 (errors raise and :func:`main` turns them into status 2 with a one-line message).

    Notes
    -----
    The model is loaded before standard input is read, so a wrong ``--checkpoint`` fails before the user
    types. An ``--output`` that is an input (text, prefixes, a checkpoint's file) is refused first of all.
    """
    ctranslate2 = args.engine == "ctranslate2"
    model_dirs = [("--checkpoint", Path(path)) for path in args.checkpoint] if ctranslate2 else []
    refuse_outputs_among_inputs(
        [
            *named_file("--input", args.input),
            *named_file("--prefix-file", args.prefix_file),
            *(model_dirs if ctranslate2 else checkpoint_directories(args)),
        ],
        output_files=named_file("--output", args.output),
    )
    if ctranslate2:
        resolve_device(args.device, option="--device")
        model_dir = ctranslate2_model_directory(args.checkpoint)  # refused first: a run passed for its export
        settings = decode_config_from_args(args)  # an export keeps no run config: the paper's, then the flags
        translate_file_with_ctranslate2(
            model_dir, settings, args.input, args.output, args.device, args.compute_type, args.precision,
            args.prefix_file, args.alignments, args.scores,
        )  # fmt: skip
        return 0
    translator = translator_from_args(args)
    layer = alignment_layer_from_args(args, translator)
    truncated = translate_file(
        translator, args.input, args.output, args.prefix_file, layer, args.scores, translation_progress_bar
    )
    if truncated:
        print(
            f"note: {truncated} input(s) longer than {translator.max_input_tokens} tokens were truncated",
            file=sys.stderr,
        )
    return 0


def run_serve(args: argparse.Namespace) -> int:
    """Serve checkpoints over HTTP until SIGTERM or Ctrl-C (see docs/serving.md).

    Parameters
    ----------
    args : argparse.Namespace
        ``--checkpoint`` (repeatable, ``NAME=DIR``), ``--host``, ``--port``, ``--engine``, ``--device``,
        ``--precision``, the batching and queue limits and ``--api-keys``.

    Returns
    -------
    int
        0 after a graceful shutdown.

    Raises
    ------
    ValueError
        When the serve extra is not installed, naming the package to install.

    Notes
    -----
    The server lives in :mod:`transformer.serving`, an optional extra: without it installed the command
    says which one to install instead of failing on an import.
    """
    try:
        from transformer.serving.server import serve
    except ImportError as error:
        raise ValueError(
            f"the server needs the serve extra (missing {error.name}): pip install 'transformer[serve]'"
        ) from None
    resolve_device(args.device, option="--device")
    return serve(translation_commands.serve_config_from_args(args))


def run_convert(args: argparse.Namespace) -> int:
    """Convert between this project's checkpoints, HuggingFace Marian and CTranslate2.

    Parameters
    ----------
    args : argparse.Namespace
        ``--from``/``--to``, the paths and ``--quantization`` (see
        :func:`~transformer.interop.conversion.convert_model`).

    Returns
    -------
    int
        The exit status: 0 (errors raise and :func:`main` turns them into status 2 with a one-line message).

    Notes
    -----
    An output directory is replaced only if it holds an earlier conversion of the same kind; anything else
    is refused, so a mistyped path never deletes a user's files.
    """
    print(f"wrote {convert_model(args.from_format, args.to, args.paths, args.quantization)}")
    return 0


def run_evaluate(args: argparse.Namespace) -> int:
    """Score translations with sacreBLEU, and with ``--checkpoint`` the model's perplexity on the references.

    Parameters
    ----------
    args : argparse.Namespace
        ``--reference`` and either ``--hypotheses`` or ``--checkpoint`` with ``--source`` (then the search
        flags, ``--output`` for the translations), and ``--lowercase``.

    Returns
    -------
    int
        The exit status: 0 (errors raise and :func:`main` turns them into status 2 with a one-line message).

    Raises
    ------
    ValueError
        For ``--output`` with ``--hypotheses`` (nothing to write), or neither ``--hypotheses`` nor
        ``--checkpoint`` with ``--source``.

    Notes
    -----
    BLEU and chrF are printed with their sacreBLEU signatures. An ``--output`` that is one of the inputs is
    refused before anything is read: it used to be overwritten with the translations after the score.
    """
    inputs = [
        *named_file("--reference", args.reference),
        *named_file("--hypotheses", args.hypotheses),
        *named_file("--source", args.source),
    ]
    if args.checkpoint and not args.hypotheses:
        inputs.extend(checkpoint_directories(args))
    refuse_outputs_among_inputs(inputs, output_files=named_file("--output", args.output))
    if args.hypotheses and args.output:
        raise ValueError(
            f"--output {args.output}: evaluate writes the translations it makes; with --hypotheses it makes "
            "none (drop --output)"
        )
    if args.hypotheses:
        print(score_files(args.hypotheses, args.reference, args.lowercase).describe())
        return 0
    if not args.checkpoint or not args.source:
        raise ValueError("evaluate needs --hypotheses, or --checkpoint with --source")
    translator = translator_from_args(args)
    evaluation = evaluate_translator(
        translator, args.source, args.reference, args.output, args.lowercase, translation_progress_bar
    )
    perplexity = evaluation.perplexity
    whose = " of the first --checkpoint" if len(translator.models) > 1 else ""
    print(
        f"perplexity{whose} {perplexity.perplexity:.3f} (NLL {perplexity.nll_per_token:.4f} nats/token "
        f"over {perplexity.num_tokens} reference tokens)"
    )
    print(evaluation.scores.describe())
    return 0


def run_backtranslate(args: argparse.Namespace) -> int:
    """Translate target-language text with a target-to-source checkpoint into a synthetic corpus folder.

    Parameters
    ----------
    args : argparse.Namespace
        ``--checkpoint`` (one, or several for an ensemble), ``--input`` (standard input by default),
        ``--output`` (the folder), ``--source-lang``/``--target-lang`` and the search flags.

    Returns
    -------
    int
        The exit status: 0 (errors raise and :func:`main` turns them into status 2 with a one-line message).

    Notes
    -----
    Samples by default; ``--beam N`` searches instead. The folder (what ``data.backtranslated_dir`` reads) may
    only be new, empty or an earlier back-translation, checked before the model is loaded.
    """
    output_dir = Path(args.output)
    refuse_outputs_among_inputs(
        [*named_file("--input", args.input), *checkpoint_directories(args)],
        replaced_directories=[("--output", output_dir)],
    )
    languages = (args.source_lang, args.target_lang)
    check_backtranslation_request(output_dir, languages, args.beam, args.sampling)
    translator = translator_from_args(args)
    checkpoints = " ".join(args.checkpoint)
    written, read = backtranslate_file(
        translator, args.input, output_dir, languages, args.beam, checkpoints, translation_progress_bar
    )
    print(f"wrote {written} synthetic pairs ({read - written} dropped: empty) to {output_dir}")
    return 0


def run_average(args: argparse.Namespace) -> int:
    """Average the weights of several checkpoints into a new one (section 6.1).

    Parameters
    ----------
    args : argparse.Namespace
        ``--inputs DIR ...`` or ``--run DIR --last N``, and ``--output``.

    Returns
    -------
    int
        The exit status: 0 (errors raise and :func:`main` turns them into status 2 with a one-line message).

    Raises
    ------
    ValueError
        When neither ``--inputs`` nor ``--run`` is given.

    Notes
    -----
    The output may only be new, empty or an earlier average (:func:`~transformer.averaging.write_average`),
    and none of the inputs, checked before any checkpoint is read.
    """
    if args.inputs:
        paths = [resolve_checkpoint(Path(path)) for path in args.inputs]
    elif args.run:
        paths = select_last_checkpoints(Path(args.run), args.last)
    else:
        raise ValueError("average-checkpoints needs --inputs DIR [DIR ...] or --run DIR [--last N]")
    option = "--inputs" if args.inputs else "--run"
    refuse_outputs_among_inputs(
        [(option, path) for path in paths], replaced_directories=[("--output", Path(args.output))]
    )
    destination = write_average(paths, Path(args.output))
    print(f"averaged {len(paths)} checkpoints ({', '.join(path.name for path in paths)}) -> {destination}")
    return 0


def run_attention(args: argparse.Namespace) -> int:
    """Plot attention maps of one sentence (PNG per kind for one layer, and an HTML page of all).

    Parameters
    ----------
    args : argparse.Namespace
        ``--checkpoint``, ``--text``, optionally ``--target`` (else the model's own translation), ``--beam``,
        ``--layer`` and ``--output-dir``.

    Returns
    -------
    int
        The exit status: 0 (errors raise and :func:`main` turns them into status 2 with a one-line message).

    Notes
    -----
    The output directory, the checkpoint and the texts are checked before the model is loaded; the maps are
    :func:`~transformer.visualization.checkpoint_attention.draw_checkpoint_attention`'s (CPU, float32).
    """
    output_dir = Path(args.output_dir)
    check_output_directory(output_dir, "--output-dir")
    refuse_outputs_among_inputs(
        [("--checkpoint", checkpoint_directory(args))], written_directories=[("--output-dir", output_dir)]
    )
    for option, text in (("--text", args.text), ("--target", args.target)):
        refuse_control_characters([text] if text is not None else [], option)
    drawn = draw_checkpoint_attention(
        args.checkpoint, args.text, args.target, args.beam, args.layer, output_dir
    )
    print(f"translation: {drawn.target}")
    for path in drawn.files:
        print(f"wrote {path}")
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
    check_output_file(output, "--output")
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


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser of every subcommand.

    Returns
    -------
    argparse.ArgumentParser
        The ``transformer`` parser.

    Notes
    -----
    Each subcommand's options are declared in :mod:`transformer.cli_arguments`; here each parser stores its
    ``run_*`` function as ``handler``, which :func:`main` calls, so adding a command is one ``add_*_parser``
    function and one handler, with no dispatch table to keep in step. The order is the order of ``--help``.
    """
    parser = OneLineErrorParser(prog="transformer", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    training_commands.add_prepare_parser(commands).set_defaults(handler=run_prepare)
    training_commands.add_train_parser(commands).set_defaults(handler=run_train)
    training_commands.add_quickstart_parser(commands).set_defaults(handler=run_quickstart)
    translation_commands.add_translate_parser(commands).set_defaults(handler=run_translate)
    translation_commands.add_serve_parser(commands).set_defaults(handler=run_serve)
    translation_commands.add_evaluate_parser(commands).set_defaults(handler=run_evaluate)
    translation_commands.add_backtranslate_parser(commands).set_defaults(handler=run_backtranslate)
    translation_commands.add_average_parser(commands).set_defaults(handler=run_average)
    translation_commands.add_attention_parser(commands).set_defaults(handler=run_attention)
    translation_commands.add_convert_parser(commands).set_defaults(handler=run_convert)
    training_commands.add_plot_parser(commands).set_defaults(handler=run_plot)
    training_commands.add_experiment_parser(commands).set_defaults(handler=run_experiment_command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``transformer`` command.

    Parameters
    ----------
    argv : sequence of str or None
        Arguments without the program name; None reads ``sys.argv``.

    Returns
    -------
    int
        Exit status: 0 on success, 2 on a usage or input error (one line on standard error).

    Notes
    -----
    Known errors (bad config, bad data, mismatched checkpoint, diverged training) print one line naming
    the file, line or option at fault; anything else is a bug and keeps its traceback.
    """
    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:  # named with the subcommand, like any other usage error of it
            raise UsageError(
                f"transformer {args.command}: error: unrecognized arguments: {' '.join(unknown)}"
            )
    except UsageError as error:
        print(error, file=sys.stderr)
        return 2
    try:
        status: int = args.handler(args)
    except (ValueError, OSError, TrainingDivergedError) as error:
        print(f"transformer {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"transformer {args.command}: interrupted", file=sys.stderr)
        return 130
    return status


if __name__ == "__main__":
    sys.exit(main())
