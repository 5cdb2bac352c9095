"""Handlers of the commands that use trained models.

The commands ``translate``, ``serve``, ``convert``, ``evaluate``, ``backtranslate``, ``average-checkpoints``
and ``attention``. Each checks its options and the files they name, loads the model it names, makes one library call and
prints; :func:`transformer.cli.main` turns their errors into one line and exit status 2.
"""

import argparse
import sys
from pathlib import Path

from transformer.averaging import select_last_checkpoints, write_average
from transformer.checkpoint.layout import resolve_checkpoint
from transformer.cli_arguments import translation_commands
from transformer.cli_arguments.paths import (
    checkpoint_directories,
    checkpoint_directory,
    named_file,
)
from transformer.cli_arguments.search_options import (
    alignment_layer_from_args,
    decode_config_from_args,
    translator_from_args,
)
from transformer.cli_commands.onnx_engine import onnx_translator_from_args
from transformer.command_checks import (
    check_output_directory,
    refuse_control_characters,
    refuse_outputs_among_inputs,
)
from transformer.data.text_lines import read_input_lines, write_output_lines
from transformer.decoding.backtranslation import backtranslate_file, check_backtranslation_request
from transformer.decoding.constrained_beam_search import check_term_search
from transformer.decoding.file_translation import translate_file
from transformer.decoding.glossary import Glossary
from transformer.decoding.quality_flags import FlagThresholds
from transformer.decoding.simultaneous import translate_text_wait_k
from transformer.decoding.text_translator import TextTranslator
from transformer.decoding.translation_evaluation import evaluate_translator
from transformer.decoding.translation_progress import translation_progress_bar
from transformer.device import resolve_device
from transformer.evaluation.bleu import score_files
from transformer.interop.conversion import convert_model
from transformer.interop.ctranslate2_translation import (
    CTRANSLATE2_DEFAULT_SEARCH,
    ctranslate2_model_directory,
    ctranslate2_vocabulary_map,
    translate_file_with_ctranslate2,
)
from transformer.model.transformer import Transformer
from transformer.visualization.checkpoint_attention import draw_checkpoint_attention


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
    export = args.engine != "pytorch"  # a directory from 'transformer convert', not a checkpoint
    model_dirs = [("--checkpoint", Path(path)) for path in args.checkpoint] if export else []
    refuse_outputs_among_inputs(
        [
            *named_file("--input", args.input),
            *named_file("--prefix-file", args.prefix_file),
            *named_file("--glossary", args.glossary),
            *(model_dirs if export else checkpoint_directories(args)),
        ],
        output_files=named_file("--output", args.output),
    )
    glossary = glossary_from_args(args)
    if glossary is not None and ctranslate2:
        raise ValueError("--glossary applies to --engine pytorch: CTranslate2 has no constrained search")
    if args.format == "html":
        return _translate_html(args)
    if args.wait_k is not None:
        return _translate_wait_k(args)
    if ctranslate2:
        if args.workers > 1:
            raise ValueError(
                f"--workers {args.workers} applies to --engine pytorch; CTranslate2 runs its own threads"
            )
        resolve_device(args.device, option="--device")
        model_dir = ctranslate2_model_directory(args.checkpoint)  # refused first: a run passed for its export
        # An export keeps no run config: the paper's search with CTranslate2's power penalty, then the flags.
        settings = decode_config_from_args(args, CTRANSLATE2_DEFAULT_SEARCH)
        translate_file_with_ctranslate2(
            model_dir, settings, args.input, args.output, args.device, args.compute_type, args.precision,
            args.prefix_file, args.alignments, args.scores, ctranslate2_vocabulary_map(args.shortlist),
            args.confidence, args.flags,
        )  # fmt: skip
        return 0
    translator: TextTranslator
    if args.engine == "onnxruntime":
        translator = onnx_translator_from_args(args)
        layer = None
    else:
        translator = translator_from_args(args)
        layer = alignment_layer_from_args(args, translator)
    check_glossary_search(glossary, translator)
    truncated = translate_file(
        translator, args.input, args.output, args.prefix_file, layer, args.scores, translation_progress_bar,
        args.confidence, FlagThresholds() if args.flags else None, glossary,
    )  # fmt: skip
    if truncated:
        print(
            f"note: {truncated} input(s) longer than {translator.max_input_tokens} tokens were truncated",
            file=sys.stderr,
        )
    return 0


def _translate_wait_k(args: argparse.Namespace) -> int:
    """``translate --wait-k K``: refuse what the simultaneous search does not take, then translate greedily."""
    given = {
        "--scores": args.scores, "--confidence": args.confidence, "--alignments": args.alignments,
        "--flags": args.flags, "--prefix-file": args.prefix_file is not None, "--nbest": args.nbest not in (None, 1),
        "--beam": args.beam not in (None, 1), "--sampling": bool(args.sampling), "--mbr": bool(args.mbr),
        "--glossary": args.glossary is not None, "--shortlist": bool(args.shortlist),
        "--engine": args.engine != "pytorch", "several --checkpoint": len(args.checkpoint) > 1,
    }  # fmt: skip
    refused = [option for option, used in given.items() if used]
    if refused:
        raise ValueError(f"--wait-k is a greedy search of its own: it does not take {', '.join(refused)}")
    translator = translator_from_args(args)
    if not isinstance(translator.model, Transformer):
        raise ValueError("--wait-k needs a Transformer checkpoint, not the recurrent baseline")
    sentences = read_input_lines(args.input)
    translations, lagging = translate_text_wait_k(
        translator.model, translator.tokenizer, sentences, args.wait_k
    )
    write_output_lines(translations, args.output)
    print(f"wait-{args.wait_k}: mean Average Lagging {lagging:.2f} source tokens", file=sys.stderr)
    return 0


def _translate_html(args: argparse.Namespace) -> int:
    """``translate --format html``: refuse the options it does not take, then translate the fragments."""
    given = {
        "--scores": args.scores, "--confidence": args.confidence, "--alignments": args.alignments,
        "--flags": args.flags, "--prefix-file": args.prefix_file is not None, "--nbest": args.nbest not in (None, 1),
        "--engine ctranslate2": args.engine == "ctranslate2", "--glossary": args.glossary is not None,
        "--engine onnxruntime": args.engine == "onnxruntime",
    }  # fmt: skip
    refused = [option for option, used in given.items() if used]
    if refused:
        raise ValueError(f"--format html writes HTML alone: it does not take {', '.join(refused)}")
    from transformer.serving.html_translation import translate_html_file  # the markup parser, not the server

    translator = translator_from_args(args)
    truncated = translate_html_file(translator, args.input, args.output, translation_progress_bar)
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
        onnx = args.engine == "onnxruntime"
        inputs.extend(
            [("--checkpoint", Path(path)) for path in args.checkpoint]
            if onnx
            else checkpoint_directories(args)
        )
    inputs.extend(named_file("--glossary", args.glossary))
    refuse_outputs_among_inputs(inputs, output_files=named_file("--output", args.output))
    if args.hypotheses and args.glossary:
        raise ValueError(
            f"--glossary {args.glossary}: evaluate uses it when it translates; with --hypotheses it does not"
        )
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
    glossary = glossary_from_args(args)
    translator = (
        onnx_translator_from_args(args) if args.engine == "onnxruntime" else translator_from_args(args)
    )
    check_glossary_search(glossary, translator)
    evaluation = evaluate_translator(
        translator,
        args.source,
        args.reference,
        args.output,
        args.lowercase,
        translation_progress_bar,
        glossary,
    )
    perplexity = evaluation.perplexity
    whose = " of the first --checkpoint" if len(args.checkpoint) > 1 else ""
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


def glossary_from_args(args: argparse.Namespace) -> Glossary | None:
    """Read ``--glossary FILE`` before any model is loaded, so a bad line fails at once.

    Parameters
    ----------
    args : argparse.Namespace
        The command's options; ``args.glossary`` is the path or None.

    Returns
    -------
    Glossary or None
        The glossary, or None without the option.

    Raises
    ------
    GlossaryError
        Naming the file and line that does not parse.

    Notes
    -----
    ``--glossary -`` is refused: standard input holds the text to translate.
    """
    if args.glossary is None:
        return None
    if args.glossary == "-":
        raise ValueError("--glossary -: standard input holds the text to translate; give a glossary file")
    return Glossary.from_file(args.glossary)


def check_glossary_search(glossary: Glossary | None, translator: TextTranslator) -> None:
    """Refuse ``--glossary`` with a search that cannot take it, naming the options.

    Parameters
    ----------
    glossary : Glossary or None
        The glossary, if any.
    translator : TextTranslator
        Its decode config is the search the command will run.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        For greedy search, sampling or MBR with a glossary.

    Notes
    -----
    Checked before the input is read, so a long file is not read for a search that would be refused.
    """
    if glossary is None:
        return
    try:
        check_term_search(translator.decode_config)
    except ValueError as error:
        raise ValueError(f"--glossary: {error} (set --beam 2 or more)") from None
