"""``--engine onnxruntime`` for ``translate`` and ``evaluate``: check the options, load the export.

The searches are ours, so every search flag applies; what belongs to the PyTorch model (its kernels, shortlist,
ensembles, attention outputs) is refused by name before anything is loaded or read.
"""

import argparse
from pathlib import Path

from transformer.cli_arguments.search_options import decode_config_from_args
from transformer.device import resolve_device
from transformer.interop.onnx_translation import OnnxTranslator


def onnx_translator_from_args(args: argparse.Namespace) -> OnnxTranslator:
    """Load ``--checkpoint`` as an ONNX export with the search flags applied over its stored settings.

    Parameters
    ----------
    args : argparse.Namespace
        ``translate`` or ``evaluate`` arguments with ``--engine onnxruntime``.

    Returns
    -------
    OnnxTranslator
        The export, its tokenizer and the search settings.

    Raises
    ------
    ValueError
        Naming every option the engine does not take (:func:`refused_onnx_options`), a ``--device`` other
        than the CPU, more than one ``--checkpoint``, a directory that is not an ONNX export, or a
        ``--precision`` the export lacks.

    Notes
    -----
    onnxruntime runs on PyTorch's thread count (``OMP_NUM_THREADS``), so both engines are timed alike.
    """
    refused = refused_onnx_options(args)
    if refused:
        raise ValueError(f"--engine onnxruntime does not take {', '.join(refused)} (use --engine pytorch)")
    device = resolve_device(args.device, option="--device")
    if device.type != "cpu":
        raise ValueError(
            f"--device {args.device}: --engine onnxruntime runs on the CPU (use --device cpu or auto)"
        )
    if len(args.checkpoint) != 1:
        raise ValueError(
            f"--checkpoint: {len(args.checkpoint)} given; --engine onnxruntime decodes one export "
            "(ensembles need --engine pytorch)"
        )
    translator = OnnxTranslator.from_directory(Path(args.checkpoint[0]), args.precision)
    translator.decode_config = decode_config_from_args(args, translator.decode_config)
    return translator


def refused_onnx_options(args: argparse.Namespace) -> list[str]:
    """Name the options given that only the PyTorch engine follows.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed ``translate`` or ``evaluate`` arguments.

    Returns
    -------
    list of str
        The options, in a fixed order; empty when all given options apply.

    Notes
    -----
    ``--precision bf16`` is among them: onnxruntime's CPU kernels have no bfloat16 matrix products, and an
    emulated one would be slower than float32. ``--alignments`` and ``--flags`` read the PyTorch model's
    attention, which the exported graphs do not return.
    """
    given = {
        "--precision bf16": args.precision == "bf16",
        "--shortlist": bool(args.shortlist),
        "--no-cache": args.no_cache,
        "--fp32-kernels": args.fp32_kernels != "auto",
        "--workers": args.workers > 1,
        "--ensemble-mode": args.ensemble_mode != "prob",
        "--compute-type": getattr(args, "compute_type", "default") != "default",
        "--alignments": bool(getattr(args, "alignments", False)),
        "--flags": bool(getattr(args, "flags", False)),
    }
    return [option for option, used in given.items() if used]
