"""The ``transformer`` command: prepare data, train, average, translate, evaluate, plot.

Only this module parses arguments and prints; it calls the library and turns its errors into one-line
messages (exit status 2) instead of tracebacks.
"""

import argparse
import contextlib
import dataclasses
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

import torch
from tqdm import tqdm

from transformer.architectures import architecture_of
from transformer.atomic_files import write_text_atomically
from transformer.averaging import (
    average_checkpoints,
    check_average_output,
    select_last_checkpoints,
    write_weights_checkpoint,
)
from transformer.checkpoint import CheckpointError, resolve_checkpoint
from transformer.command_checks import (
    integer_in_range,
    number_in_range,
    refuse_control_characters,
    refuse_outputs_among_inputs,
    seed_selection,
)
from transformer.config import (
    MAX_LENGTH_OFFSET,
    MBR_CANDIDATE_SOURCES,
    MBR_UTILITIES,
    DecodeConfig,
    ExperimentConfig,
    load_config,
)
from transformer.data.backtranslated_corpus import check_backtranslation_output
from transformer.data.dataset import CorpusError, read_lines, read_parallel_files
from transformer.data.prepare import prepare_data
from transformer.decoding.alignment import check_alignment_layer
from transformer.decoding.backtranslation import backtranslate, backtranslation_settings
from transformer.decoding.ensemble import ENSEMBLE_MODES
from transformer.decoding.translation_lines import format_translations
from transformer.decoding.translator import TRANSLATION_PRECISIONS, Translator
from transformer.evaluation.bleu import score_translations
from transformer.evaluation.perplexity import corpus_perplexity
from transformer.experiments.command import (
    ExperimentOptions,
    report_named_experiment,
    run_named_experiment,
)
from transformer.experiments.registry import EXPERIMENTS, SCALES
from transformer.interop.ctranslate2 import CTranslate2Translator, export_ctranslate2
from transformer.interop.marian import export_marian, import_marian
from transformer.model.transformer import Transformer
from transformer.training.launch import claim_run_dir_if_main, is_main_process, train_experiment
from transformer.training.trainer import TrainingDivergedError, TrainResult
from transformer.visualization.attention_html import write_attention_html
from transformer.visualization.attention_inputs import sentence_attention
from transformer.visualization.attention_plot import plot_attention_maps
from transformer.visualization.training_curves import plot_training_curves

REPO_CONFIGS = Path(__file__).resolve().parents[2] / "configs"
#: Largest ``--beam``: each beam multiplies the rows decoded together (memory and time), and translation
#: quality peaks at small beams (4 to 10) and falls beyond (Koehn and Knowles, 2017), so more is a typo.
MAX_BEAM = 64
#: Largest ``--max-length-offset``: inputs are cut at 1,024 BPE tokens, an output more than 1,024 tokens longer
#: than its input is a runaway rather than a translation, and the searches size their tables by the limit
#: before the first step (an offset of 10^8 ran for minutes without a word).
#: Largest ``--alpha``: an exponent of the output length; at 10 the penalty already outweighs any
#: log-probability, and beyond about 12 |Y|^alpha overflows float32 for the longest outputs allowed.
MAX_ALPHA = 10.0
#: Largest ``--temperature``: at 100 the distribution is already flat to within 1% for any sane model.
MAX_TEMPERATURE = 100.0
#: Smallest ``--temperature`` and ``--top-p``: below, sampling is greedy search under another name.
MIN_TEMPERATURE = MIN_TOP_P = 0.01
#: Largest ``--epsilon``: a token of probability above 0.5 is the only one above it, so more is greedy.
MAX_EPSILON = 0.5
#: Largest ``--top-k``: beyond any vocabulary this project trains.
MAX_TOP_K = 1_000_000
#: Largest ``--mbr``: the utilities cost N(N - 1) comparisons per sentence; 256 is already 65,280.
MAX_MBR = 256
#: Largest ``--no-repeat-ngram``: longer n-grams hardly ever repeat inside one sentence.
MAX_NGRAM = 32
#: Largest ``--seed``: a signed 64-bit integer.
MAX_SEED = 2**63 - 1
#: Seconds a translation runs before its progress bar appears (quicker ones print nothing extra).
PROGRESS_DELAY_SECONDS = 3.0


class UsageError(ValueError):
    """A command line argparse refuses; its message is the whole line to print.

    Notes
    -----
    Raised by :class:`OneLineErrorParser` and turned into exit status 2 by :func:`main`, like every other
    input error, so a caller of :func:`main` gets a status back instead of ``SystemExit``.
    """


class OneLineErrorParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, like every other error of the command.

    Notes
    -----
    argparse prints the whole usage before its error; the usage of ``translate`` is a dozen lines, which
    buries the one that says what is wrong. ``--help`` still prints it. Subcommand parsers are made of
    this class too (``add_subparsers`` takes the parent's class).
    """

    def error(self, message: str) -> NoReturn:
        """Raise :class:`UsageError` with ``PROG: error: MESSAGE``.

        Parameters
        ----------
        message : str
            argparse's message, naming the option (e.g. "argument --alpha: expected a finite number ...").

        Returns
        -------
        NoReturn
            Always raises.

        Notes
        -----
        :func:`main` prints the message on standard error and returns status 2, as argparse itself would.
        """
        raise UsageError(f"{self.prog}: error: {message}")


def resolve_config_path(name: str) -> Path:
    """Accept a YAML path or the bare name of a file in the repository's ``configs/``.

    Parameters
    ----------
    name : str
        ``configs/multi30k.yaml``, ``multi30k.yaml`` or ``multi30k``.

    Returns
    -------
    Path
        An existing file.

    Notes
    -----
    Raises ValueError listing the shipped configs when nothing matches.
    """
    path = Path(name)
    if path.exists():
        return path
    for candidate in (REPO_CONFIGS / name, REPO_CONFIGS / f"{name}.yaml"):
        if candidate.exists():
            return candidate
    shipped = sorted(item.stem for item in REPO_CONFIGS.glob("*.yaml")) if REPO_CONFIGS.exists() else []
    raise ValueError(f"--config {name}: no such file (shipped configs: {', '.join(shipped) or 'none'})")


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


def blame_override(path: Path, flagged_overrides: Sequence[tuple[str, str]], error: ValueError) -> ValueError:
    """Name the flag whose override made a config invalid, instead of the config file.

    Parameters
    ----------
    path : Path
        The config file.
    flagged_overrides : sequence of (str, str)
        Each override with the command-line flag that gave it, e.g. ``("--set train.max_steps=x",
        "train.max_steps=x")``, in the order applied.
    error : ValueError
        The error of loading ``path`` with every override.

    Returns
    -------
    ValueError
        The error of the first prefix of overrides that fails, its message starting with the flag of the
        last override in that prefix; ``error`` itself when the file alone fails or no prefix does.

    Notes
    -----
    :func:`load_config` names the file in every validation error, since it cannot tell the file's values
    from the overrides'. Loading again with more and more overrides finds the one that breaks the config;
    that happens only on the way to an error message, so the extra loads cost nothing in a good run.
    """
    for count in range(len(flagged_overrides) + 1):
        try:
            load_config(path, [override for _, override in flagged_overrides[:count]])
        except ValueError as prefix_error:
            if count == 0:
                return error
            message = str(prefix_error)
            if message.startswith("--set "):  # a malformed override, already named by load_config
                return prefix_error
            flag = flagged_overrides[count - 1][0]
            return ValueError(f"{flag}: {message.removeprefix(f'{path}: ')}")
    return error


def default_output_dir(args: argparse.Namespace) -> Path:
    """``--output-dir``, else ``runs/<config name>``.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments.

    Returns
    -------
    Path
        The run directory (not necessarily existing yet).

    Notes
    -----
    A run directory holds the data it generated, the vocabulary, checkpoints and metrics. Raises
    ValueError naming ``--output-dir`` when the path is a file.
    """
    run_dir = Path(args.output_dir) if args.output_dir else Path("runs") / Path(args.config).stem
    check_output_directory(run_dir, "--output-dir")
    return run_dir


def check_output_directory(path: Path, option: str) -> None:
    """Refuse an output directory that is an existing file, naming the option.

    Parameters
    ----------
    path : Path
        The directory the command will create or write into.
    option : str
        The flag that gave it (or whose default it is), e.g. ``"--output-dir"``.

    Returns
    -------
    None

    Notes
    -----
    Without this check the first ``mkdir`` fails with "[Errno 17] File exists", which names neither the
    option nor the problem.
    """
    if path.is_file():
        raise ValueError(f"{option} {path}: is a file; expected a directory")


def check_output_file(path: Path, option: str) -> None:
    """Refuse an output file that is an existing directory, naming the option.

    Parameters
    ----------
    path : Path
        The file the command will write.
    option : str
        The flag that gave it, e.g. ``"--output"``.

    Returns
    -------
    None

    Notes
    -----
    Without this check the final rename fails with "[Errno 21] Is a directory" and names the temporary file.
    """
    if path.is_dir():
        raise ValueError(f"{option} {path}: is a directory; expected a file")


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
        print(describe_result(result))
    return 0


def describe_result(result: TrainResult) -> str:
    """One line summarising a training run.

    Parameters
    ----------
    result : TrainResult
        The run's result.

    Returns
    -------
    str
        Steps, tokens, time, validation loss/perplexity and checkpoint.

    Notes
    -----
    Printed at the end of ``transformer train``.
    """
    valid = ""
    if result.valid_loss is not None and result.valid_perplexity is not None:
        valid = f", valid loss {result.valid_loss:.4f}, perplexity {result.valid_perplexity:.2f}"
    return (
        f"trained {result.step} steps ({result.tokens_seen:,} target tokens) in {result.elapsed_seconds / 60:.1f} min, "
        f"stopped by {result.stop_reason}{valid}; checkpoint {result.checkpoint}"
    )


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
    A second run reuses the finished run instead of training again, even one its time budget ended, so the
    README's first command is cheap to repeat; the test split is translated with the run's ``decode``
    settings.
    """
    args.config = args.config or "quickstart"
    experiment = load_experiment(args)
    run_dir = default_output_dir(args)
    resume = (run_dir / "checkpoints" / "index.json").exists()
    with claim_run_dir_if_main(run_dir):
        # Running the quick start again reuses its finished run, even one its time limit ended.
        result, data = train_experiment(experiment, run_dir, resume=resume, reuse_finished=True)
    print(describe_result(result))
    if "test" not in data.split_files:
        return 0
    pairs = read_parallel_files(*data.split_files["test"])
    translator = Translator.from_checkpoint(run_dir, experiment.decode)
    with translation_progress(len(pairs)) as progress:
        hypotheses = translator.translate([source for source, _ in pairs], progress)
    scores = score_translations(hypotheses, [target for _, target in pairs])
    print(f"test set ({len(pairs)} sentences, beam {experiment.decode.beam_size}):")
    print(scores.describe())
    for (source, reference), hypothesis in list(zip(pairs, hypotheses, strict=True))[: args.examples]:
        print(f"\n  source:     {source}\n  output:     {hypothesis}\n  reference:  {reference}")
    return 0


#: ``DecodeConfig`` field set by each search flag of ``translate`` and ``evaluate``.
DECODE_FLAGS = {
    "beam": "beam_size",
    "alpha": "length_penalty",
    "length_penalty_form": "length_penalty_form",
    "max_length_offset": "max_length_offset",
    "min_length": "min_length",
    "max_length": "max_length",
    "no_repeat_ngram": "no_repeat_ngram",
    # Before --nbest: they decide how many candidates --nbest may ask for.
    "sampling": "sampling",
    "temperature": "temperature",
    "top_k": "top_k",
    "top_p": "top_p",
    "epsilon": "epsilon",
    "seed": "seed",
    "mbr": "mbr",
    "mbr_candidates": "mbr_candidates",
    "mbr_utility": "mbr_utility",
    "nbest": "nbest",
}


def decode_config_from_args(args: argparse.Namespace, base: DecodeConfig | None = None) -> DecodeConfig:
    """Build search settings from ``--beam``, ``--alpha``, ``--nbest`` and friends over a base.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments; a search flag left out is None.
    base : DecodeConfig or None
        Settings the flags override: the checkpoint's (its run's ``decode`` section); None means the
        paper's (beam 4, alpha 0.6, GNMT penalty, input length + 50).

    Returns
    -------
    DecodeConfig
        Validated settings.

    Notes
    -----
    Only the flags given on the command line change anything, so ``transformer translate`` searches as the
    run's config says unless told otherwise. A combination the settings refuse (``--nbest 5`` over a run's
    beam of 2) raises ValueError naming the flag the user typed, not the ``DecodeConfig`` field: the flags
    are applied one at a time and the first that breaks the settings is blamed.
    """
    settings = base or DecodeConfig()
    for flag, field_name in DECODE_FLAGS.items():
        value = getattr(args, flag)
        if value is None:
            continue
        try:
            settings = dataclasses.replace(settings, **{field_name: value})
        except ValueError as error:
            option = "--" + flag.replace("_", "-")
            reason = str(error).removeprefix(f"DecodeConfig.{field_name}={value} ")
            if field_name == "nbest" and not settings.mbr and not settings.sampling:
                beam_source = "--beam" if args.beam is not None else "the checkpoint's; raise it with --beam"
                reason = f"must be between 1 and the beam size, {settings.beam_size} ({beam_source})"
            elif field_name == "nbest" and settings.mbr:
                reason = f"must be between 1 and the MBR candidates, {settings.mbr} (--mbr)"
            raise ValueError(f"{option} {value}: {reason}") from None
    return dataclasses.replace(settings, use_cache=False) if args.no_cache else settings


def translator_from_args(args: argparse.Namespace) -> Translator:
    """Load ``--checkpoint`` for ``translate`` / ``evaluate``, searching as its run did unless flags say otherwise.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments: ``--checkpoint``, the search flags, ``--device`` and ``--precision``.

    Returns
    -------
    Translator
        The checkpoint's model and tokenizer, with its decode settings (the paper's if it has none) and the
        given flags applied over them.

    Notes
    -----
    :meth:`Translator.from_checkpoints` already takes the (first) checkpoint's settings (else the paper's);
    see :func:`decode_config_from_args` for how flags combine with them. Several ``--checkpoint`` paths
    decode as an ensemble (``--ensemble-mode``); a vocabulary mismatch is refused naming the checkpoint.
    """
    check_device_flag(args.device)
    translator = Translator.from_checkpoints(
        args.checkpoint, None, args.device, args.precision, args.ensemble_mode
    )
    translator.decode_config = decode_config_from_args(args, translator.decode_config)
    return translator


def check_device_flag(device: str) -> None:
    """Refuse a ``--device`` this machine cannot give, naming the flag.

    Parameters
    ----------
    device : str
        The ``--device`` value: "auto", "cpu", "cuda" or "cuda:N".

    Returns
    -------
    None

    Notes
    -----
    The library's own check (:func:`transformer.training.distributed.resolve_device`) speaks of the
    ``train.device`` setting, which ``translate`` and ``evaluate`` do not have.
    """
    if not re.fullmatch(r"auto|cpu|cuda(:[0-9]+)?", device):
        raise ValueError(f"--device {device}: expected auto, cpu, cuda or cuda:N")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {device}: CUDA is not available on this machine; use --device cpu")
    gpu_index = int(device.partition(":")[2] or 0)
    if device.startswith("cuda") and gpu_index >= torch.cuda.device_count():
        raise ValueError(f"--device {device}: this machine has {torch.cuda.device_count()} GPU(s)")


def read_input_lines(path: str | None) -> list[str]:
    """Read sentences from a file (plain or .gz) or standard input.

    Parameters
    ----------
    path : str or None
        File path; None or "-" reads standard input.

    Returns
    -------
    list of str
        One sentence per line, newline removed.

    Notes
    -----
    Errors name the file, or standard input, and the line: bytes that are not UTF-8, and control characters
    other than tab (NUL, escape, ...), which are refused rather than stripped (see
    :func:`~transformer.command_checks.refuse_control_characters`).
    """
    if path is None or path == "-":
        lines = read_standard_input_lines()
        refuse_control_characters(lines, "standard input")
        return lines
    lines = read_lines(Path(path))
    refuse_control_characters(lines, path)
    return lines


def read_standard_input_lines() -> list[str]:
    """Read standard input as UTF-8 lines, refusing bytes that are not UTF-8.

    Returns
    -------
    list of str
        One sentence per line, without its line end (LF or CR LF); other spaces are kept.

    Notes
    -----
    The bytes are decoded here rather than by ``sys.stdin``, whose ``surrogateescape`` handler (in a C or
    C.UTF-8 locale) would pass bad bytes on to the tokenizer as a traceback. Raises CorpusError naming
    standard input and the line. A UTF-8 byte-order mark at the start is dropped, as :func:`read_lines`
    does for files.
    """
    byte_stream = getattr(sys.stdin, "buffer", None)
    if byte_stream is None:  # a text stream with no bytes below it (io.StringIO): already decoded
        lines = [line.removesuffix("\n").removesuffix("\r") for line in sys.stdin]
    else:
        lines = [decode_input_line(raw_line, number) for number, raw_line in enumerate(byte_stream, start=1)]
    if lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    return lines


def decode_input_line(raw_line: bytes, line_number: int) -> str:
    """Decode one line of standard input.

    Parameters
    ----------
    raw_line : bytes
        The line as read, with its line end.
    line_number : int
        Its number, from 1, for the error message.

    Returns
    -------
    str
        The text without its line end (LF or CR LF).

    Notes
    -----
    Raises CorpusError such as "standard input line 2: not valid UTF-8 (byte 7 of the line)".
    """
    try:
        return raw_line.decode("utf-8").removesuffix("\n").removesuffix("\r")
    except UnicodeDecodeError as error:
        raise CorpusError(
            f"standard input line {line_number}: not valid UTF-8 (byte {error.start} of the line)"
        ) from None


def write_output_lines(lines: Sequence[str], path: str | None) -> None:
    """Write lines to a file atomically, or to standard output.

    Parameters
    ----------
    lines : sequence of str
        Output lines.
    path : str or None
        Destination; None or "-" is standard output.

    Returns
    -------
    None

    Notes
    -----
    A file is written to a temporary sibling and renamed, so an interrupted run leaves no partial output.
    A destination that is a directory raises ValueError naming ``--output``.
    """
    text = "".join(line + "\n" for line in lines)
    if path is None or path == "-":
        sys.stdout.write(text)
        return
    destination = Path(path)
    check_output_file(destination, "--output")
    write_text_atomically(destination, text)


@contextlib.contextmanager
def translation_progress(total: int) -> Iterator[Callable[[int], None]]:
    """Show a progress bar on standard error for a translation that takes more than a few seconds.

    Parameters
    ----------
    total : int
        The sentences to translate.

    Returns
    -------
    Iterator[callable]
        A context manager yielding the ``progress`` callback of :meth:`Translator.translate`.

    Notes
    -----
    The bar (sentences done, rate, time left) appears only after :data:`PROGRESS_DELAY_SECONDS`, so a quick
    translation prints nothing extra, and it is cleared when done; standard output stays the translations'.
    A long search used to run for minutes without a word.
    """
    with tqdm(
        total=total,
        unit="sentence",
        file=sys.stderr,
        delay=PROGRESS_DELAY_SECONDS,
        leave=False,
        dynamic_ncols=True,
    ) as bar:

        def advance(count: int) -> None:
            bar.update(count)

        yield advance


def named_file(option: str, value: str | None) -> list[tuple[str, Path]]:
    """Pair a file option with its path, or nothing when it means standard input or output.

    Parameters
    ----------
    option : str
        The flag, e.g. ``"--output"``.
    value : str or None
        Its value; None and "-" stand for standard input or output.

    Returns
    -------
    list of (str, Path)
        ``[(option, Path(value))]``, or an empty list.

    Notes
    -----
    Standard input and output are never files of another option, so they are left out of the comparison
    of outputs with inputs (:func:`~transformer.command_checks.refuse_outputs_among_inputs`).
    """
    return [] if value is None or value == "-" else [(option, Path(value))]


def checkpoint_directory(args: argparse.Namespace) -> Path:
    """Find the checkpoint directory ``--checkpoint`` means, before loading it.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments with ``checkpoint``.

    Returns
    -------
    Path
        A directory holding ``model.safetensors``.

    Notes
    -----
    See :func:`~transformer.checkpoint.resolve_checkpoint` (a run directory means its best checkpoint, the
    weights file its directory); used to compare the outputs with the checkpoint's files before the model
    is loaded.
    """
    return resolve_checkpoint(Path(args.checkpoint))


def checkpoint_directories(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """Find the checkpoint directories of every ``--checkpoint`` (an ensemble has several).

    Parameters
    ----------
    args : argparse.Namespace
        Parsed ``translate`` or ``evaluate`` arguments; ``checkpoint`` is a list of paths.

    Returns
    -------
    list of (str, Path)
        ``("--checkpoint", directory)`` per path, for :func:`~transformer.command_checks.refuse_outputs_among_inputs`.

    Notes
    -----
    Resolved before anything is loaded, so an output that is one of the checkpoints' files is refused
    before the models are read.
    """
    return [("--checkpoint", resolve_checkpoint(Path(path))) for path in args.checkpoint or []]


def read_prefixes(args: argparse.Namespace, num_sentences: int) -> list[str] | None:
    """Read ``--prefix-file``: one target prefix per input line, or None without the option.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed ``translate`` arguments.
    num_sentences : int
        Lines of the input, which the prefixes must match.

    Returns
    -------
    list of str or None
        The prefixes (an empty line means no prefix for that sentence).

    Notes
    -----
    Raises ValueError naming both files when the line counts differ: a prefix paired with the wrong
    sentence would be forced on it silently.
    """
    if args.prefix_file is None:
        return None
    if args.prefix_file == "-":
        raise ValueError(
            "--prefix-file -: standard input holds the text to translate; give a file of prefixes"
        )
    prefixes = read_input_lines(args.prefix_file)
    if len(prefixes) != num_sentences:
        source = args.input if args.input not in (None, "-") else "standard input"
        raise ValueError(
            f"--prefix-file {args.prefix_file} has {len(prefixes)} lines but {source} has {num_sentences}"
        )
    return prefixes


def alignment_layer_from_args(args: argparse.Namespace, translator: Translator) -> int | None:
    """Check ``--alignments`` and ``--alignment-layer`` against the loaded model.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed ``translate`` arguments.
    translator : Translator
        The loaded translator (its first model gives the attention).

    Returns
    -------
    int or None
        The layer to align with, or None without ``--alignments``.

    Notes
    -----
    Checked after loading, before standard input is read: a layer the decoder lacks fails at once, with
    one line naming the option and the valid range.
    """
    if args.alignment_layer is not None and not args.alignments:
        raise ValueError(f"--alignment-layer {args.alignment_layer}: only used with --alignments")
    if not args.alignments:
        return None
    layer = args.alignment_layer if args.alignment_layer is not None else -1
    try:
        check_alignment_layer(translator.model, layer)
    except ValueError as error:
        raise ValueError(f"--alignment-layer {layer}: {error}") from None
    return layer


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
    The model is loaded before standard input is read, so a wrong ``--checkpoint`` fails at once instead of
    after the user has typed. The columns of a line (n-best index and rank score, ``--scores``,
    ``--alignments``) are those of :mod:`~transformer.decoding.translation_lines`. An ``--output`` that is
    the input file, the prefix file or a file of a checkpoint is refused before anything is read.
    """
    if args.engine == "ctranslate2":
        model_dirs = [("--checkpoint", Path(path)) for path in args.checkpoint]
    else:
        model_dirs = checkpoint_directories(args)
    refuse_outputs_among_inputs(
        [*named_file("--input", args.input), *named_file("--prefix-file", args.prefix_file), *model_dirs],
        output_files=named_file("--output", args.output),
    )
    if args.engine == "ctranslate2":
        write_output_lines(translate_with_ctranslate2(args), args.output)
        return 0
    # Load the model before reading standard input, so a wrong --checkpoint fails at once.
    translator = translator_from_args(args)
    alignment_layer = alignment_layer_from_args(args, translator)
    sentences = read_input_lines(args.input)
    prefixes = read_prefixes(args, len(sentences))
    with translation_progress(len(sentences)) as progress:
        results = translator.translate_nbest(sentences, progress, prefixes, alignment_layer)
    nbest = translator.decode_config.nbest > 1
    lines = format_translations(results, nbest, args.scores, alignment_layer is not None)
    write_output_lines(lines, args.output)
    if translator.truncated_count:
        print(
            f"note: {translator.truncated_count} input(s) longer than {translator.max_input_tokens} tokens "
            "were truncated",
            file=sys.stderr,
        )
    return 0


def run_serve(args: argparse.Namespace) -> int:
    """Serve checkpoints over HTTP until SIGTERM or Ctrl-C (see docs/serving.md).

    Parameters
    ----------
    args : argparse.Namespace
        ``--checkpoint`` (repeatable, ``NAME=DIR``), ``--host``, ``--port``, ``--engine``, ``--device``,
        ``--precision``, ``--batching``, ``--max-batch-tokens``, ``--max-queue``, ``--max-chars`` and
        ``--api-keys``.

    Returns
    -------
    int
        0 after a graceful shutdown.

    Notes
    -----
    The server lives in :mod:`transformer.serving`, an optional extra: without it installed the command
    says which one to install instead of failing on an import.
    """
    try:
        from transformer.serving.config import ServeConfig, parse_checkpoint_options, read_api_keys
        from transformer.serving.server import serve
    except ImportError as error:
        raise ValueError(
            f"the server needs the serve extra (missing {error.name}): pip install 'transformer[serve]'"
        ) from None
    check_device_flag(args.device)
    config = ServeConfig(
        checkpoints=parse_checkpoint_options(args.checkpoint),
        host=args.host,
        port=args.port,
        engine=args.engine,
        device=args.device,
        precision=args.precision,
        batching=args.batching or ("request" if args.engine == "ctranslate2" else "continuous"),
        max_batch_tokens=args.max_batch_tokens,
        max_queue=args.max_queue,
        max_chars=args.max_chars,
        api_keys=read_api_keys(Path(args.api_keys)) if args.api_keys else frozenset(),
    )
    return serve(config)


def is_pytorch_checkpoint(path: Path) -> bool:
    """Whether a path is one of this project's checkpoints (or a run holding one).

    Parameters
    ----------
    path : Path
        The ``--checkpoint`` of ``translate --engine ctranslate2``.

    Returns
    -------
    bool
        True when :func:`~transformer.checkpoint.resolve_checkpoint` finds a checkpoint there.

    Notes
    -----
    A CTranslate2 export holds ``model.bin``, not ``model.safetensors``, so the two never match each other.
    """
    try:
        resolve_checkpoint(path)
    except CheckpointError:
        return False
    return True


def translate_with_ctranslate2(args: argparse.Namespace) -> list[str]:
    """Translate with a directory written by ``transformer convert --to ctranslate2``.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed ``translate`` arguments; ``--checkpoint`` names the CTranslate2 directory, ``--input`` the text.

    Returns
    -------
    list of str
        Translations in input order (empty for empty lines).

    Notes
    -----
    CTranslate2 has only the ``power`` length penalty (score / |Y|^alpha); ``--length-penalty-form gnmt``
    is refused rather than silently changed. A PyTorch checkpoint or run directory is refused with the
    command that exports it.
    """
    check_device_flag(args.device)
    if len(args.checkpoint) > 1:
        raise ValueError("--engine ctranslate2 decodes one model: give one --checkpoint (no ensemble)")
    [model_dir] = args.checkpoint
    if is_pytorch_checkpoint(Path(model_dir)):
        raise ValueError(
            f"--checkpoint {model_dir}: a PyTorch checkpoint, not a CTranslate2 model; export it with "
            f"'transformer convert --to ctranslate2 {model_dir} OUTPUT_DIR' and pass OUTPUT_DIR, or drop "
            "--engine ctranslate2"
        )
    settings = decode_config_from_args(args)  # an export keeps no run config: the paper's, then the flags
    if settings.length_penalty_form != "power" and settings.length_penalty != 0:
        raise ValueError(
            "--engine ctranslate2 supports only --length-penalty-form power (or --alpha 0); "
            "CTranslate2 divides scores by |Y|^alpha"
        )
    if settings.nbest > 1 or args.no_cache or args.precision != "fp32":
        raise ValueError(
            "--engine ctranslate2 does not take --nbest, --no-cache or --precision (use --compute-type)"
        )
    pytorch_only = [flag for flag, given in pytorch_only_flags(args, settings).items() if given]
    if pytorch_only:
        raise ValueError(
            f"--engine ctranslate2 does not take {', '.join(pytorch_only)} (use --engine pytorch)"
        )
    translator = CTranslate2Translator.from_directory(
        Path(model_dir), "cuda" if args.device.startswith("cuda") else "cpu", args.compute_type
    )
    sentences = read_input_lines(args.input)
    return translator.translate(
        sentences,
        beam_size=settings.beam_size,
        length_penalty=settings.length_penalty,
        max_length_offset=settings.max_length_offset,
    )


def pytorch_only_flags(args: argparse.Namespace, settings: DecodeConfig) -> dict[str, bool]:
    """Which decoding options of this project's searches a command line uses.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed ``translate`` arguments.
    settings : DecodeConfig
        The settings the flags made.

    Returns
    -------
    dict of str to bool
        Per flag, whether it was used.

    Notes
    -----
    ``--engine ctranslate2`` runs CTranslate2's own search, which this project does not drive: these options
    would be ignored there, so they are refused instead.
    """
    defaults = DecodeConfig()
    return {
        "--sampling": settings.sampling,
        "--mbr": settings.mbr != defaults.mbr,
        "--no-repeat-ngram": settings.no_repeat_ngram != defaults.no_repeat_ngram,
        "--min-length": settings.min_length != defaults.min_length,
        "--max-length": settings.max_length != defaults.max_length,
        "--prefix-file": args.prefix_file is not None,
        "--alignments": args.alignments,
        "--scores": args.scores,
    }


def run_convert(args: argparse.Namespace) -> int:
    """Convert between this project's checkpoints, HuggingFace Marian and CTranslate2.

    Parameters
    ----------
    args : argparse.Namespace
        ``--from``/``--to`` and the paths: ``convert --from hf-marian MARIAN_DIR --to CHECKPOINT_DIR`` imports;
        ``convert --to hf-marian SOURCE OUTPUT`` and ``convert --to ctranslate2 SOURCE OUTPUT`` export a
        checkpoint (or a run's best checkpoint).

    Returns
    -------
    int
        The exit status: 0 (errors raise and :func:`main` turns them into status 2 with a one-line message).

    Notes
    -----
    An output directory is replaced only if it holds an earlier conversion of the same kind; anything else
    is refused, so a mistyped path never deletes a user's files.
    """
    if args.from_format == "hf-marian":
        if len(args.paths) != 1:
            raise ValueError("convert --from hf-marian MARIAN_DIR --to CHECKPOINT_DIR takes one MARIAN_DIR")
        refuse_outputs_among_inputs(
            [("MARIAN_DIR", Path(args.paths[0]))], replaced_directories=[("--to", Path(args.to))]
        )
        written = import_marian(Path(args.paths[0]), Path(args.to))
    else:
        if args.to not in ("hf-marian", "ctranslate2") or len(args.paths) != 2:
            raise ValueError("export with: convert --to hf-marian|ctranslate2 CHECKPOINT OUTPUT_DIR")
        source, destination = resolve_checkpoint(Path(args.paths[0])), Path(args.paths[1])
        refuse_outputs_among_inputs(
            [("CHECKPOINT", source)], replaced_directories=[("OUTPUT_DIR", destination)]
        )
        if args.to == "hf-marian":
            written = export_marian(source, destination)
        else:
            written = export_ctranslate2(source, destination, args.quantization)
    print(f"wrote {written}")
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

    Notes
    -----
    Perplexity is per target BPE token under teacher forcing (Table 2's "PPL (dev)"), so it compares models
    with the same vocabulary only; BLEU and chrF are printed with their sacreBLEU signatures. An ``--output``
    that is one of the inputs (the references, the source, a file of the checkpoint) is refused before
    anything is read: it used to be overwritten with the translations after the score was printed.
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
    references = read_input_lines(args.reference)
    if args.hypotheses:
        hypotheses = read_input_lines(args.hypotheses)
    else:
        if not args.checkpoint or not args.source:
            raise ValueError("evaluate needs --hypotheses, or --checkpoint with --source")
        translator = translator_from_args(args)
        sources = read_input_lines(args.source)
        if len(sources) != len(references):
            raise ValueError(
                f"{args.source} has {len(sources)} lines but {args.reference} has {len(references)}"
            )
        with translation_progress(len(sources)) as progress:
            hypotheses = translator.translate(sources, progress)
        if args.output:
            write_output_lines(hypotheses, args.output)
        perplexity = corpus_perplexity(
            translator.model, translator.tokenizer, list(zip(sources, references, strict=True))
        )
        whose = " of the first --checkpoint" if len(translator.models) > 1 else ""
        print(
            f"perplexity{whose} {perplexity.perplexity:.3f} (NLL {perplexity.nll_per_token:.4f} nats/token "
            f"over {perplexity.num_tokens} reference tokens)"
        )
    print(score_translations(hypotheses, references, lowercase=args.lowercase).describe())
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
    Samples by default (``--sampling`` settings apply); ``--beam N`` searches instead. The folder is what
    ``data.backtranslated_dir`` reads (:mod:`transformer.data.backtranslated_corpus`); it may only be new,
    empty or an earlier back-translation, checked before the model is loaded.
    """
    output_dir = Path(args.output)
    refuse_outputs_among_inputs(
        [*named_file("--input", args.input), *checkpoint_directories(args)],
        replaced_directories=[("--output", output_dir)],
    )
    check_backtranslation_output(output_dir)
    for option, language in (("--source-lang", args.source_lang), ("--target-lang", args.target_lang)):
        if not re.fullmatch(r"[A-Za-z0-9_-]+", language):
            raise ValueError(
                f"{option} {language!r}: expected a file suffix such as en (letters, digits, - or _)"
            )
    if args.source_lang == args.target_lang:
        raise ValueError(f"--source-lang and --target-lang are both {args.source_lang!r}")
    if args.beam is not None and args.sampling:
        raise ValueError("--beam and --sampling: back-translation samples unless --beam asks for beam search")
    translator = translator_from_args(args)
    translator.decode_config = backtranslation_settings(translator.decode_config, args.beam)
    targets = read_input_lines(args.input)
    provenance = {"checkpoint": " ".join(args.checkpoint), "input": args.input or "standard input"}
    languages = (args.source_lang, args.target_lang)
    with translation_progress(len(targets)) as progress:
        written = backtranslate(translator, targets, output_dir, languages, provenance, progress)
    print(f"wrote {written} synthetic pairs ({len(targets) - written} dropped: empty) to {output_dir}")
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

    Notes
    -----
    The output may only be new, empty or an earlier average (:func:`~transformer.averaging.check_average_output`),
    checked before any checkpoint is read.
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
    check_average_output(Path(args.output))
    averaged = average_checkpoints(paths)
    destination = write_weights_checkpoint(averaged, Path(args.output), paths)
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
    Runs on the CPU in float32 whatever the machine: the maps are for reading, and the explicit attention
    formula they need is quadratic in memory. The decoder axis starts with the model's start token. The
    maps are the Transformer's (encoder, decoder and cross-attention per layer and head): a checkpoint of the
    recurrent baseline is refused (its single alignment per target token is
    ``RNNEncoderDecoder.forward_with_attention``'s).
    """
    check_output_directory(Path(args.output_dir), "--output-dir")
    refuse_outputs_among_inputs(
        [("--checkpoint", checkpoint_directory(args))],
        written_directories=[("--output-dir", Path(args.output_dir))],
    )
    for option, text in (("--text", args.text), ("--target", args.target)):
        refuse_control_characters([text] if text is not None else [], option)
    translator = Translator.from_checkpoint(args.checkpoint, device="cpu")  # the run's search settings
    if not isinstance(translator.model, Transformer):
        raise ValueError(
            f"{args.checkpoint}: attention maps are drawn for Transformer models; this checkpoint's "
            f"model.architecture is {architecture_of(translator.model.config)!r}"
        )
    layers = min(translator.model.config.num_encoder_layers, translator.model.config.num_decoder_layers)
    if (
        not -layers <= args.layer < layers
    ):  # checked before translating; the plot draws this layer of each stack
        raise ValueError(
            f"--layer {args.layer}: the model has {layers} layer{'s' if layers > 1 else ''} per stack; "
            f"use 0..{layers - 1}, or -{layers}..-1 counting from the end"
        )
    if args.beam is not None:
        translator.decode_config = dataclasses.replace(translator.decode_config, beam_size=args.beam)
    target = args.target if args.target is not None else translator.translate([args.text])[0]
    maps = sentence_attention(translator.model, translator.tokenizer, args.text, target)
    output_dir = Path(args.output_dir)
    images = plot_attention_maps(
        maps.attention, maps.source_tokens, maps.target_tokens, args.layer, output_dir
    )
    page = write_attention_html(
        maps.attention,
        maps.source_tokens,
        maps.target_tokens,
        output_dir / "attention.html",
        title=f"{args.text} → {target}",
    )
    print(f"translation: {target}")
    for path in [*images.values(), page]:
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
    the flag rather than the file (:func:`blame_override`).
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


def add_decode_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the search settings of ``translate``, ``evaluate`` and ``attention``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The subcommand's parser.

    Returns
    -------
    None

    Notes
    -----
    Every flag defaults to None, not to a value: a flag left out takes the checkpoint's run config, else the
    paper's (:func:`decode_config_from_args`), so ``transformer translate`` searches as the run was evaluated.
    """
    parser.add_argument(
        "--beam",
        type=integer_in_range(1, MAX_BEAM),
        default=None,
        help=f"beam size from 1 (greedy) to {MAX_BEAM} (default: the run's decode.beam_size, else 4)",
    )
    parser.add_argument(
        "--alpha",
        type=number_in_range(0.0, MAX_ALPHA),
        default=None,
        help=f"length penalty alpha from 0 to {MAX_ALPHA:g} (default: the run's, else 0.6)",
    )
    parser.add_argument(
        "--length-penalty-form",
        choices=["gnmt", "power"],
        default=None,
        help="gnmt: ((5+|Y|)/6)^alpha; power: |Y|^alpha (default: the run's, else gnmt)",
    )
    parser.add_argument(
        "--max-length-offset",
        type=integer_in_range(0, MAX_LENGTH_OFFSET),
        default=None,
        help=f"output limit = input length + this, from 0 to {MAX_LENGTH_OFFSET} (default: the run's, else 50)",
    )
    parser.add_argument(
        "--nbest",
        type=integer_in_range(1, MAX_BEAM),
        default=None,
        help="candidates per sentence, tab-separated: at most the beam size; with --sampling, samples (any "
        "number); with --mbr, the best by expected utility, at most N (default: the run's, else 1)",
    )
    add_constraint_arguments(parser)
    add_sampling_arguments(parser)
    add_mbr_arguments(parser)
    parser.add_argument(
        "--ensemble-mode",
        choices=ENSEMBLE_MODES,
        default="prob",
        help="with several --checkpoint: prob averages the models' probabilities (default), logprob their "
        "log-probabilities (renormalised; one model ruling a token out vetoes it)",
    )
    parser.add_argument("--no-cache", action="store_true", help="recompute the prefix every step (slow)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    parser.add_argument(
        "--precision",
        choices=TRANSLATION_PRECISIONS,
        default="fp32",
        help="precision of translation: fp32 (default); bf16, weights and activations in bfloat16 (faster on "
        "GPUs and on CPUs with AMX); or int8, linear layers with int8 weights and dynamic int8 activations "
        "(CPU only; scores may move slightly)",
    )


def add_constraint_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the length limits and ``--no-repeat-ngram`` of ``translate`` and ``evaluate``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The subcommand's parser.

    Returns
    -------
    None

    Notes
    -----
    They apply to greedy search, beam search and sampling alike. Defaults are None, as for every search
    flag, so the run's settings hold unless a flag is given.
    """
    parser.add_argument(
        "--min-length",
        type=integer_in_range(0, MAX_LENGTH_OFFSET),
        default=None,
        help="no end of sentence before this many output tokens (default: the run's, else 0)",
    )
    parser.add_argument(
        "--max-length",
        type=integer_in_range(1, MAX_LENGTH_OFFSET),
        default=None,
        help="at most this many output tokens, whatever the input length (default: the run's, else no cap "
        "beyond --max-length-offset); a --prefix-file prefix may pass it",
    )
    parser.add_argument(
        "--no-repeat-ngram",
        type=integer_in_range(0, MAX_NGRAM),
        default=None,
        help="never repeat an n-gram of this many tokens inside an output; lower blocks more (0: off, the "
        "default)",
    )


def add_sampling_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--sampling`` and its settings (temperature, top-k, top-p, epsilon, seed).

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The subcommand's parser.

    Returns
    -------
    None

    Notes
    -----
    The settings also shape MBR's sampled candidates. Each help text says which way the option moves the
    output, as fairseq documents its search options.
    """
    parser.add_argument(
        "--sampling",
        action="store_true",
        default=None,
        help="draw each token at random instead of searching (--beam ignored); --nbest N draws N samples "
        "per sentence, listed best score first",
    )
    parser.add_argument(
        "--temperature",
        type=number_in_range(MIN_TEMPERATURE, MAX_TEMPERATURE),
        default=None,
        help=f"sampling: from {MIN_TEMPERATURE:g} to {MAX_TEMPERATURE:g}; lower is more conservative, higher "
        "more diverse (default 1)",
    )
    parser.add_argument(
        "--top-k",
        type=integer_in_range(0, MAX_TOP_K),
        default=None,
        help="sampling: only the k most probable tokens; lower is more conservative, 1 is greedy (default 0: all)",
    )
    parser.add_argument(
        "--top-p",
        type=number_in_range(MIN_TOP_P, 1.0),
        default=None,
        help=f"sampling: nucleus, the most probable tokens up to this probability mass, from {MIN_TOP_P:g} to "
        "1; lower is more conservative (default 1: all)",
    )
    parser.add_argument(
        "--epsilon",
        type=number_in_range(0.0, MAX_EPSILON),
        default=None,
        help=f"sampling: drop tokens less probable than this, from 0 to {MAX_EPSILON:g}; higher is more "
        "conservative, 0.02 is Freitag et al.'s choice for MBR (default 0: none)",
    )
    parser.add_argument(
        "--seed",
        type=integer_in_range(0, MAX_SEED),
        default=None,
        help="sampling: the same seed gives each sentence the same samples, however the input is batched "
        "(identical lines get identical samples; default 0)",
    )


def add_mbr_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--mbr`` and its candidate source and utility.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The subcommand's parser.

    Returns
    -------
    None

    Notes
    -----
    See :mod:`transformer.decoding.mbr`; ``--nbest`` then counts the MBR-ranked candidates returned.
    """
    parser.add_argument(
        "--mbr",
        type=integer_in_range(2, MAX_MBR),
        default=None,
        help=f"minimum Bayes risk decoding: draw N candidates (2 to {MAX_MBR}) and return the one that agrees "
        "most with the others; more candidates estimate the agreement better and cost more (N^2 "
        "comparisons per sentence)",
    )
    parser.add_argument(
        "--mbr-candidates",
        choices=MBR_CANDIDATE_SOURCES,
        default=None,
        help="where MBR's candidates come from: sampling (with the sampling options; default) or beam "
        "(beam search's N best)",
    )
    parser.add_argument(
        "--mbr-utility",
        choices=MBR_UTILITIES,
        default=None,
        help="what MBR maximises: chrf (sacreBLEU chrF2, default) or bleu (sentence BLEU)",
    )


def add_translation_output_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``translate``'s ``--prefix-file``, ``--scores``, ``--alignments`` and ``--alignment-layer``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The ``translate`` parser.

    Returns
    -------
    None

    Notes
    -----
    Output columns are described in :mod:`transformer.decoding.translation_lines`.
    """
    parser.add_argument(
        "--prefix-file",
        help="target prefixes, one per input line (empty: none): each translation starts with its prefix "
        "and the search goes on from there",
    )
    parser.add_argument(
        "--scores", action="store_true", help="print each translation's log-probability first, then a tab"
    )
    parser.add_argument(
        "--alignments",
        action="store_true",
        help="print word alignments after each translation and a tab, in Pharaoh format (i-j: source word i, "
        "target word j, from 0), from the cross-attention of --alignment-layer averaged over heads",
    )
    parser.add_argument(
        "--alignment-layer",
        type=int,
        default=None,
        help="decoder layer for --alignments; negative counts from the end (default -1, the last)",
    )


def add_serve_parser(commands: Any) -> None:
    """Add ``transformer serve`` and its options.

    Parameters
    ----------
    commands : argparse._SubParsersAction
        The subcommands of the ``transformer`` parser.

    Returns
    -------
    None

    Notes
    -----
    Each limit protects the server from one kind of overload; the README says what each one does.
    """
    serve = commands.add_parser("serve", help="translation server: HTTP API, LibreTranslate API and a page")
    serve.add_argument(
        "--checkpoint",
        action="append",
        required=True,
        help="checkpoint or run directory; repeat as NAME=DIR to serve several models (the first is the default)",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument(
        "--port", type=integer_in_range(0, 65535), default=8000, help="TCP port (default 8000)"
    )
    serve.add_argument(
        "--engine",
        choices=["pytorch", "ctranslate2"],
        default="pytorch",
        help="pytorch (default); ctranslate2: each --checkpoint is a 'convert --to ctranslate2' directory, "
        "batched per request",
    )
    serve.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    serve.add_argument(
        "--precision",
        choices=TRANSLATION_PRECISIONS,
        default="fp32",
        help="fp32 (default), bf16 or int8 (CPU)",
    )
    serve.add_argument(
        "--batching",
        choices=["continuous", "request"],
        default=None,
        help="continuous: sentences join and leave the batch at every decoder step (default with pytorch); "
        "request: each batch runs to its end (the baseline; the default, and the only mode, with ctranslate2)",
    )
    serve.add_argument(
        "--max-batch-tokens",
        type=integer_in_range(1, 10**7),
        default=4096,
        help="source tokens x beam of the sentences decoding together (default 4096)",
    )
    serve.add_argument(
        "--max-queue",
        type=integer_in_range(1, 10**7),
        default=1024,
        help="sentences waiting to join the batch; beyond it requests get 503 + Retry-After (default 1024)",
    )
    serve.add_argument(
        "--max-chars",
        type=integer_in_range(1, 10**8),
        default=5000,
        help="characters per request; beyond it 413 (LibreTranslate endpoint: 400) (default 5000)",
    )
    serve.add_argument("--api-keys", help="file of API keys, one per line; clients must send one")
    serve.set_defaults(handler=run_serve)


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser of every subcommand.

    Returns
    -------
    argparse.ArgumentParser
        The ``transformer`` parser.

    Notes
    -----
    Each subcommand stores its ``run_*`` function as ``handler``; :func:`main` calls it, so adding a command
    is one ``add_parser`` block and one handler, with no dispatch table to keep in step.
    """
    parser = OneLineErrorParser(prog="transformer", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    prepare = commands.add_parser(
        "prepare", help="fetch/generate the corpus and train the joint BPE vocabulary"
    )
    add_config_arguments(prepare)
    prepare.set_defaults(handler=run_prepare)

    train = commands.add_parser("train", help="train a model (run under torchrun for several processes)")
    add_config_arguments(train)
    train.add_argument("--resume", action="store_true", help="continue from the run's latest checkpoint")
    train.set_defaults(handler=run_train)

    quickstart = commands.add_parser("quickstart", help="train on the built-in corpus, then report test BLEU")
    add_config_arguments(quickstart, required=False)
    quickstart.add_argument(
        "--examples", type=integer_in_range(0), default=5, help="example translations to print"
    )
    quickstart.set_defaults(handler=run_quickstart)

    translate = commands.add_parser(
        "translate",
        help="translate text with a checkpoint",
        description="Translate lines of text. Each line of the output is [INDEX<TAB>RANK_SCORE<TAB>] (--nbest) "
        "[LOG_PROB<TAB>] (--scores) TRANSLATION [<TAB>ALIGNMENT] (--alignments).",
    )
    translate.add_argument(
        "--checkpoint",
        required=True,
        action="extend",
        nargs="+",
        help="checkpoint or run directory (or the checkpoint's model.safetensors); several (repeat the option "
        "or list them) decode as an ensemble and must share one vocabulary",
    )
    translate.add_argument("--input", help="input file (plain or .gz); default standard input")
    translate.add_argument("--output", help="output file; default standard output")
    translate.add_argument(
        "--engine",
        choices=["pytorch", "ctranslate2"],
        default="pytorch",
        help="ctranslate2: --checkpoint is a directory from 'convert --to ctranslate2' (power length penalty only)",
    )
    translate.add_argument("--compute-type", default="default", help="CTranslate2 compute type, e.g. int8")
    add_translation_output_arguments(translate)
    add_decode_arguments(translate)
    translate.set_defaults(handler=run_translate)

    add_serve_parser(commands)

    evaluate = commands.add_parser("evaluate", help="BLEU/chrF with sacreBLEU, and perplexity")
    evaluate.add_argument("--reference", required=True, help="reference translations, one per line")
    evaluate.add_argument("--hypotheses", help="score these translations instead of translating")
    evaluate.add_argument(
        "--checkpoint",
        action="extend",
        nargs="+",
        help="checkpoint or run directory to translate with; several decode as an ensemble",
    )
    evaluate.add_argument("--source", help="source sentences to translate")
    evaluate.add_argument("--output", help="also write the translations here")
    evaluate.add_argument("--lowercase", action="store_true", help="case-insensitive BLEU")
    add_decode_arguments(evaluate)
    evaluate.set_defaults(handler=run_evaluate)

    backtranslate_command = commands.add_parser(
        "backtranslate",
        help="turn target-language text into a synthetic parallel corpus with a target-to-source model",
        description="Back-translate: translate monolingual target-language lines with a target-to-source "
        "checkpoint into OUTPUT/train.SRC (synthetic sources) and OUTPUT/train.TGT (the lines), which train "
        "reads with data.backtranslated_dir (optionally data.backtranslation_tag and data.real_upsample). "
        "Samples by default; --beam N uses beam search.",
    )
    backtranslate_command.add_argument(
        "--checkpoint",
        required=True,
        action="extend",
        nargs="+",
        help="the target-to-source checkpoint or run directory; several decode as an ensemble",
    )
    backtranslate_command.add_argument(
        "--input", help="target-language text (plain or .gz); default standard input"
    )
    backtranslate_command.add_argument(
        "--output", required=True, help="corpus folder to write: new, empty or an earlier back-translation"
    )
    backtranslate_command.add_argument(
        "--source-lang", default="en", help="suffix of the synthetic sources' file (default en)"
    )
    backtranslate_command.add_argument(
        "--target-lang", default="de", help="suffix of the input lines' file (default de)"
    )
    add_decode_arguments(backtranslate_command)
    backtranslate_command.set_defaults(handler=run_backtranslate)

    average = commands.add_parser(
        "average-checkpoints", help="average checkpoints' weights (paper section 6.1)"
    )
    average.add_argument("--inputs", nargs="+", help="checkpoint directories to average")
    average.add_argument("--run", help="run directory: average its last --last checkpoints")
    average.add_argument(
        "--last", type=integer_in_range(1), default=5, help="how many of the run's checkpoints (default 5)"
    )
    average.add_argument(
        "--output", required=True, help="new checkpoint directory, or an earlier average to replace"
    )
    average.set_defaults(handler=run_average)

    attention = commands.add_parser("attention", help="plot attention maps of a sentence (PNG and HTML)")
    attention.add_argument(
        "--checkpoint",
        required=True,
        help="checkpoint or run directory (or the checkpoint's model.safetensors)",
    )
    attention.add_argument("--text", required=True, help="source sentence")
    attention.add_argument("--target", help="target sentence (default: the model's own translation)")
    attention.add_argument(
        "--layer", type=int, default=-1, help="layer to plot; negative counts from the end"
    )
    attention.add_argument(
        "--beam",
        type=integer_in_range(1, MAX_BEAM),
        default=None,
        help="beam size for the translation (default: the run's, else 4)",
    )
    attention.add_argument("--output-dir", default="attention", help="where to write the pictures")
    attention.set_defaults(handler=run_attention)

    convert = commands.add_parser(
        "convert",
        help="import HuggingFace Marian; export to Marian or CTranslate2",
        description="convert --from hf-marian MARIAN_DIR --to CHECKPOINT_DIR | "
        "convert --to hf-marian CHECKPOINT OUTPUT_DIR | convert --to ctranslate2 CHECKPOINT OUTPUT_DIR",
    )
    convert.add_argument(
        "--from",
        dest="from_format",
        choices=["checkpoint", "hf-marian"],
        default="checkpoint",
        help="input format",
    )
    convert.add_argument(
        "--to", required=True, help="hf-marian or ctranslate2 (export), or the new checkpoint dir (import)"
    )
    convert.add_argument("paths", nargs="+", metavar="PATH", help="MARIAN_DIR, or CHECKPOINT OUTPUT_DIR")
    convert.add_argument("--quantization", help="CTranslate2 weight quantization, e.g. int8")
    convert.set_defaults(handler=run_convert)

    plot = commands.add_parser("plot", help="plot a run's loss and learning-rate curves")
    plot.add_argument("--run", required=True, help="run directory (holds metrics.jsonl)")
    plot.add_argument("--output", help="PNG path (default RUN/training_curves.png)")
    plot.set_defaults(handler=run_plot)

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
    experiment.set_defaults(handler=run_experiment_command)
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
