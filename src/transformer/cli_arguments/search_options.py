"""The search options of the commands that translate, and the translator they make.

``translate``, ``evaluate`` and ``backtranslate`` share these flags (``attention`` its ``--beam``). Every flag
defaults to None: a flag left out keeps the checkpoint's run config, else the paper's
(:func:`decode_config_from_args`), so ``transformer translate`` searches as the run was evaluated. Each limit
below bounds a flag at parsing, so a typo is refused before a model is loaded.
"""

import argparse
import dataclasses

import torch

from transformer.autotune.linear_probe import FP32_KERNEL_CHOICES
from transformer.command_checks import integer_in_range, number_in_range
from transformer.config.decode import MAX_LENGTH_OFFSET, MBR_CANDIDATE_SOURCES, MBR_UTILITIES, DecodeConfig
from transformer.config.search_limits import (
    MAX_ALPHA,
    MAX_BEAM,
    MAX_EPSILON,
    MAX_MBR,
    MAX_NGRAM,
    MAX_SEED,
    MAX_TEMPERATURE,
    MAX_TOP_K,
    MIN_TEMPERATURE,
    MIN_TOP_P,
)
from transformer.decoding.alignment import check_alignment_layer
from transformer.decoding.ensemble import ENSEMBLE_MODES
from transformer.decoding.inference_models import TRANSLATION_PRECISIONS
from transformer.decoding.translator import Translator
from transformer.device import resolve_device

# The flags' ranges are the config's and the server's: transformer.config.search_limits, and
# transformer.config.decode.MAX_LENGTH_OFFSET for --max-length-offset, --min-length and --max-length.


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
        help="gnmt: ((5+|Y|)/6)^alpha; power: |Y|^alpha (default: the run's, else gnmt; power for translate "
        "--engine ctranslate2, the only form CTranslate2 has)",
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
    parser.add_argument(
        "--shortlist",
        nargs="?",
        const=True,
        default=False,
        metavar="FILE",
        help="score each sentence over its vocabulary shortlist only (faster, see docs/shortlist.md): the "
        "checkpoint's shortlist.safetensors from 'transformer shortlist', or FILE",
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
    parser.add_argument(
        "--fp32-kernels",
        choices=FP32_KERNEL_CHOICES,
        default="auto",
        help="fp32 on the CPU: auto (default) times MKL's sgemm against oneDNN's packed linear for each layer "
        "shape on this machine (cached) and uses the faster; mkl or onednn forces one",
    )
    parser.add_argument(
        "--workers",
        type=integer_in_range(1, 256),
        default=1,
        metavar="N",
        help="search N batches at once, each on 1/N of PyTorch's threads (default 1): faster for small models "
        "on several CPUs, as CTranslate2's inter_threads; the translations are the same",
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

    Raises
    ------
    ValueError
        For a combination the settings refuse (``--nbest 5`` over a run's beam of 2), naming the flag the
        user typed, not the ``DecodeConfig`` field.

    Notes
    -----
    Only the flags given on the command line change anything, so ``transformer translate`` searches as the
    run's config says unless told otherwise. The flags are applied one at a time and the first that breaks
    the settings is blamed.
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

    Raises
    ------
    ValueError
        Naming ``--device`` for a device this machine cannot give (checked before anything loads),
        ``--fp32-kernels onednn`` with another ``--precision``, a
        checkpoint that is missing, damaged or of another vocabulary than the first, a ``--shortlist`` that
        is missing, damaged or of another vocabulary, or a search flag the
        settings refuse (:func:`decode_config_from_args`).

    Notes
    -----
    :meth:`Translator.from_checkpoints` already takes the (first) checkpoint's settings (else the paper's);
    see :func:`decode_config_from_args` for how flags combine with them. Several ``--checkpoint`` paths
    decode as an ensemble (``--ensemble-mode``). ``--workers N`` divides PyTorch's threads by N for the rest
    of the process (the search's workers share them).
    """
    resolve_device(args.device, option="--device")
    if args.fp32_kernels == "onednn" and args.precision != "fp32":
        raise ValueError(f"--fp32-kernels onednn applies to --precision fp32, not {args.precision}")
    translator = Translator.from_checkpoints(
        args.checkpoint,
        None,
        args.device,
        args.precision,
        args.ensemble_mode,
        shortlist=args.shortlist,
        fp32_kernels=args.fp32_kernels,
    )
    translator.decode_config = decode_config_from_args(args, translator.decode_config)
    if args.workers > 1:
        # Each worker runs its operations on its share of the threads (all of them would oversubscribe).
        torch.set_num_threads(max(1, torch.get_num_threads() // args.workers))
        translator.workers = args.workers
    return translator


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

    Raises
    ------
    ValueError
        Naming ``--alignment-layer`` when it is given without ``--alignments`` or names a layer the decoder
        lacks (with the valid range).

    Notes
    -----
    Checked after loading, before standard input is read, so a wrong layer fails at once rather than after
    the user has typed.
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
