"""The options of the commands that use a trained model.

``translate``, ``serve``, ``evaluate``, ``backtranslate``, ``average-checkpoints``, ``attention`` and
``convert``; the search options they share are in :mod:`transformer.cli_arguments.search_options`.
"""

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from transformer.autotune.linear_probe import FP32_KERNEL_CHOICES
from transformer.cli_arguments.parser import Subcommands
from transformer.cli_arguments.search_options import add_decode_arguments
from transformer.command_checks import integer_in_range, number_in_range
from transformer.config.search_limits import MAX_BEAM, MIN_SENTENCE_CHARS
from transformer.decoding.inference_models import TRANSLATION_PRECISIONS

if TYPE_CHECKING:
    from transformer.serving.config import ServeConfig


def add_translation_output_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``translate``'s ``--prefix-file``, ``--scores``, ``--confidence``, ``--flags`` and the alignment options.

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
        "--confidence",
        action="store_true",
        help="print each translation's confidence (0-1: the geometric mean of its tokens' probabilities) "
        "before it, then a tab (after the log-probability with --scores)",
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
    parser.add_argument(
        "--format",
        choices=["text", "html"],
        default="text",
        help="html: each input line is an HTML fragment; the text between block-level tags is translated and "
        "its inline tags (<b>, <a href=...>, ...) are put back around the aligned words; markup, comments and "
        "scripts are kept (not with the column options, --nbest or --prefix-file)",
    )
    parser.add_argument(
        "--flags",
        action="store_true",
        help="print each translation's quality flags last, after a tab: omission (source words the output "
        "does not attend to), hallucination (output the source does not explain), repetition (a loop), as "
        "kind:src[start:end] or kind:tgt[start:end] word spans joined by ';', empty when none fires",
    )


def add_glossary_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--glossary FILE``: target terms the translations must use.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The ``translate`` or ``evaluate`` parser.

    Returns
    -------
    None

    Notes
    -----
    The file's format and the search it runs are in :mod:`transformer.decoding.glossary`.
    """
    parser.add_argument(
        "--glossary",
        metavar="FILE",
        help="tab-separated 'source term<TAB>target term' lines: where a source term occurs (whole words, any "
        "case), its target term, exactly as written, appears in the translation (lexically constrained beam "
        "search with dynamic beam allocation; needs --beam 2 or more)",
    )


def add_translate_parser(commands: Subcommands) -> argparse.ArgumentParser:
    """Add ``transformer translate``: translate lines of text with a checkpoint or a CTranslate2 export.

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
    ``--checkpoint`` extends (``nargs="+"`` and repeatable): several checkpoints decode as an ensemble.
    The output columns are described in :mod:`transformer.decoding.translation_lines`.
    """
    translate = commands.add_parser(
        "translate",
        help="translate text with a checkpoint",
        description="Translate lines of text. Each line of the output is [INDEX<TAB>RANK_SCORE<TAB>] (--nbest) "
        "[LOG_PROB<TAB>] (--scores) [CONFIDENCE<TAB>] (--confidence) TRANSLATION [<TAB>ALIGNMENT] "
        "(--alignments) [<TAB>FLAGS] (--flags).",
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
        choices=["pytorch", "ctranslate2", "onnxruntime"],
        default="pytorch",
        help="ctranslate2: --checkpoint is a directory from 'convert --to ctranslate2' (power length penalty "
        "only); onnxruntime: a directory from 'convert --to onnx' (our searches, --precision fp32 or int8)",
    )
    translate.add_argument("--compute-type", default="default", help="CTranslate2 compute type, e.g. int8")
    translate.add_argument(
        "--wait-k",
        type=integer_in_range(1, 1_000_000),
        metavar="K",
        help="simultaneous translation (test-time wait-k, greedy): each target token is written after reading "
        "K more source tokens than tokens written; prints the mean Average Lagging (docs/streaming.md)",
    )
    add_translation_output_arguments(translate)
    add_glossary_argument(translate)
    add_decode_arguments(translate)
    return translate


def add_serve_parser(commands: Subcommands) -> argparse.ArgumentParser:
    """Add ``transformer serve`` and its options.

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
        choices=["pytorch", "ctranslate2", "onnxruntime"],
        default="pytorch",
        help="pytorch (default); ctranslate2 or onnxruntime: each --checkpoint is a 'convert --to ctranslate2' "
        "or 'convert --to onnx' directory, batched per request",
    )
    serve.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    serve.add_argument(
        "--precision",
        choices=TRANSLATION_PRECISIONS,
        default="fp32",
        help="fp32 (default), bf16 or int8 (CPU)",
    )
    serve.add_argument(
        "--fp32-kernels",
        choices=FP32_KERNEL_CHOICES,
        default="auto",
        help="fp32 on the CPU: auto (default) uses MKL or oneDNN per layer shape as timed on this machine "
        "(cached); mkl or onednn forces one",
    )
    serve.add_argument(
        "--shortlist",
        action="store_true",
        help="decode each model over its checkpoint's vocabulary shortlist (from 'transformer shortlist'; "
        "with ctranslate2, the export's vmap.txt)",
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
        help="sentences waiting to join the batch; beyond it requests get 503 + Retry-After, and a request of "
        "more sentences than this gets 413 (default 1024)",
    )
    serve.add_argument(
        "--admit-every",
        type=integer_in_range(1, 64),
        default=2,
        help="while sentences decode, let waiting ones join every N decoder steps (or once 8 wait): higher "
        "batches the encoder better and copies the caches less, at up to N steps of wait (default 2; 1: every "
        "step)",
    )
    serve.add_argument(
        "--max-chars",
        type=integer_in_range(MIN_SENTENCE_CHARS, 10**8),
        default=5000,
        help="work budget of a request, in characters: its texts and prefixes, each sentence counting at least "
        f"{MIN_SENTENCE_CHARS} (and min_length x 4); beyond it 413 (LibreTranslate endpoint: 400) (default 5000)",
    )
    serve.add_argument("--api-keys", help="file of API keys, one per line; clients must send one")
    serve.add_argument(
        "--keep-alive-timeout",
        type=number_in_range(0.001, 3600),
        default=5.0,
        help="seconds an idle connection stays open after a response (default 5)",
    )
    serve.add_argument(
        "--read-timeout",
        type=number_in_range(0.001, 3600),
        default=10.0,
        help="seconds a client has to send a request's line and headers, and again its body; slower: 408 and "
        "the connection closed (default 10)",
    )
    serve.add_argument(
        "--cache-size",
        type=integer_in_range(0, 10**9),
        default=0,
        help="keep the translations of this many sentences and answer a sentence seen before (same model and "
        "settings) from them; hits and misses in /metrics (default 0: off)",
    )
    serve.add_argument(
        "--cache-bytes",
        type=integer_in_range(1, 2**40),
        default=64 * 1024 * 1024,
        help="the cache's estimated size at most, in bytes (default 64 MiB)",
    )
    serve.add_argument(
        "--retry-omissions",
        action="store_true",
        help="retry a sentence whose translation is flagged as an omission (source words it does not attend "
        "to) in two pieces, split where the unread words start, and keep the retry if it leaves fewer unread; "
        "counted in /metrics (off by default: a second search per flagged sentence)",
    )
    return serve


def serve_config_from_args(args: argparse.Namespace) -> "ServeConfig":
    """Build the server's configuration from ``transformer serve``'s options.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed ``serve`` arguments.

    Returns
    -------
    ServeConfig
        What to serve and how (:class:`transformer.serving.config.ServeConfig`).

    Raises
    ------
    ValueError
        For a model name given twice or a malformed ``NAME=DIR``, an API key file with a bad line, or limits
        the configuration refuses.

    Notes
    -----
    ``--batching`` defaults by engine: continuous batching for PyTorch, per-request batches for CTranslate2 and onnxruntime,
    whose searches take whole batches. The serving package is imported here, not at the top, so the
    other commands never load it.
    """
    from transformer.serving.config import ServeConfig, parse_checkpoint_options, read_api_keys

    return ServeConfig(
        checkpoints=parse_checkpoint_options(args.checkpoint),
        host=args.host,
        port=args.port,
        engine=args.engine,
        device=args.device,
        precision=args.precision,
        fp32_kernels=args.fp32_kernels,
        shortlist=args.shortlist,
        batching=args.batching or ("request" if args.engine != "pytorch" else "continuous"),
        max_batch_tokens=args.max_batch_tokens,
        max_queue=args.max_queue,
        admit_every=args.admit_every,
        max_chars=args.max_chars,
        api_keys=read_api_keys(Path(args.api_keys)) if args.api_keys else frozenset(),
        keep_alive_timeout=args.keep_alive_timeout,
        read_timeout=args.read_timeout,
        retry_omissions=args.retry_omissions,
        cache_size=args.cache_size,
        cache_bytes=args.cache_bytes,
    )


def add_evaluate_parser(commands: Subcommands) -> argparse.ArgumentParser:
    """Add ``transformer evaluate``: BLEU/chrF with sacreBLEU, and perplexity.

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
    ``--hypotheses`` scores translations made by any system; ``--checkpoint`` with ``--source`` translates
    first and adds the model's perplexity on the references.
    """
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
    evaluate.add_argument(
        "--engine",
        choices=["pytorch", "onnxruntime"],
        default="pytorch",
        help="onnxruntime: --checkpoint is a directory from 'convert --to onnx' (--precision fp32 or int8)",
    )
    add_glossary_argument(evaluate)
    add_decode_arguments(evaluate)
    return evaluate


def add_backtranslate_parser(commands: Subcommands) -> argparse.ArgumentParser:
    """Add ``transformer backtranslate``: a synthetic parallel corpus from target-language text.

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
    The variable is not called ``backtranslate``, the library function of that name, to keep one meaning per
    name; sampling is the default search (Edunov et al., 2018).
    """
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
    return backtranslate_command


def add_average_parser(commands: Subcommands) -> argparse.ArgumentParser:
    """Add ``transformer average-checkpoints`` (section 6.1).

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
    ``--inputs`` names checkpoints; ``--run`` with ``--last`` takes a run's last ones, as the paper averages
    the last 5 (base) or 20 (big).
    """
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
    return average


def add_attention_parser(commands: Subcommands) -> argparse.ArgumentParser:
    """Add ``transformer attention``: attention maps of a sentence as PNG and HTML.

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
    ``--layer`` is a plain ``int``: any index may be typed, and a wrong one is named with the model's
    layer count once the checkpoint is loaded.
    """
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
    return attention


def add_convert_parser(commands: Subcommands) -> argparse.ArgumentParser:
    """Add ``transformer convert``: import HuggingFace Marian; export to Marian or CTranslate2.

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
    ``--to`` is a format for an export and a directory for an import, so it is free text, checked by the
    handler rather than by ``choices``.
    """
    convert = commands.add_parser(
        "convert",
        help="import HuggingFace Marian; export to Marian, CTranslate2 or ONNX",
        description="convert --from hf-marian MARIAN_DIR --to CHECKPOINT_DIR | "
        "convert --to hf-marian|ctranslate2|onnx CHECKPOINT OUTPUT_DIR",
    )
    convert.add_argument(
        "--from",
        dest="from_format",
        choices=["checkpoint", "hf-marian"],
        default="checkpoint",
        help="input format",
    )
    convert.add_argument(
        "--to",
        required=True,
        help="hf-marian, ctranslate2 or onnx (export), or the new checkpoint dir (import)",
    )
    convert.add_argument("paths", nargs="+", metavar="PATH", help="MARIAN_DIR, or CHECKPOINT OUTPUT_DIR")
    convert.add_argument(
        "--quantization",
        help="CTranslate2 weight quantization, e.g. int8; onnx: int8 also writes onnxruntime's int8 graphs",
    )
    return convert
