"""``transformer convert --to onnx``: a checkpoint as ONNX graphs that onnxruntime runs with our searches.

The directory holds the encoder and one decoder step (:mod:`~transformer.interop.onnx_graphs`) in float32,
optionally the same two graphs with onnxruntime's dynamic int8 quantisation, the checkpoint's tokenizer files,
our model config and :data:`ONNX_EXPORT_FILE`, which says what the graphs are. Only the network is exported:
the search (greedy, beam, sampling, length penalties, limits) stays ours and drives the graphs through the
step-model protocol (:mod:`~transformer.interop.onnx_step_model`), so both engines search alike; the run's
search settings are stored too, so an export searches as its checkpoint does unless told otherwise.
"""

import contextlib
import dataclasses
import io
import json
import logging
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from transformer.checkpoint.layout import STATE_FILE
from transformer.config.data import DataConfig
from transformer.interop.ctranslate2 import MODEL_CONFIG_FILE, TOKENIZER_FILES
from transformer.interop.ctranslate2_spec import position_table_size
from transformer.interop.export_checks import load_transformer_checkpoint
from transformer.interop.onnx_graphs import DECODER_STEP_FILE, ENCODER_FILE, ONNX_OPSET, export_graphs
from transformer.interop.output_directory import staged_directory
from transformer.model.config import TransformerConfig
from transformer.model.transformer import Transformer

#: What the export holds and how to run it: format version, opset, positions, graph files per precision.
ONNX_EXPORT_FILE = "onnx_export.json"
ONNX_EXPORT_VERSION = 1
#: The precisions an export can hold, and the graph files of each.
ONNX_PRECISIONS = ("fp32", "int8")
ONNX_QUANTIZATIONS = ("int8",)


def graph_files(precision: str) -> tuple[str, str]:
    """Name the encoder and decoder-step files of one precision.

    Parameters
    ----------
    precision : {"fp32", "int8"}
        The graphs' weights.

    Returns
    -------
    tuple of str
        ``("encoder.onnx", "decoder_step.onnx")`` for fp32; ``("encoder.int8.onnx",
        "decoder_step.int8.onnx")`` for int8.

    Notes
    -----
    One export may hold both, so ``--precision`` picks the graphs at translation time, as it picks our
    kernels for a checkpoint.
    """
    if precision == "fp32":
        return ENCODER_FILE, DECODER_STEP_FILE
    return ENCODER_FILE.replace(".onnx", ".int8.onnx"), DECODER_STEP_FILE.replace(".onnx", ".int8.onnx")


def check_onnx_exportable(config: TransformerConfig, source: str) -> None:
    """Refuse what the exported step graph cannot compute.

    Parameters
    ----------
    config : TransformerConfig
        The model's config.
    source : str
        The checkpoint, for the message.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Naming ``model.attention_window``: a windowed mask depends on the step, which the graph reads only
        from the cache's length, and our decoder builds it from Python integers.

    Notes
    -----
    Unlike CTranslate2 and Marian, which have one attention of their own, the graphs are traced from our
    modules, so additive scoring, other score scalings, other head widths, learned positions and both norm
    placements all export.
    """
    if config.attention_window is not None:
        raise ValueError(
            f"{source}: model.attention_window={config.attention_window} cannot be exported to ONNX (the step "
            "graph has no windowed mask); export a model with attention_window null"
        )


def export_onnx(checkpoint_dir: Path, output_dir: Path, quantization: str | None = None) -> Path:
    """Write a checkpoint as an ONNX export directory.

    Parameters
    ----------
    checkpoint_dir : Path
        A checkpoint (or run) directory of a Transformer (ours or an imported Marian one).
    output_dir : Path
        Directory to write; replaced only if it holds an earlier ONNX export and nothing else.
    quantization : {"int8"} or None
        Also write onnxruntime's dynamic int8 quantisation of both graphs (int8 weights of every matrix
        product, activations quantised per call), used by ``--precision int8``.

    Returns
    -------
    Path
        ``output_dir``.

    Raises
    ------
    ValueError
        For the recurrent baseline, a windowed-attention model (:func:`check_onnx_exportable`) or an unknown
        quantization.
    ImportError
        When the ``onnx`` extra (onnx, onnxscript, onnxruntime) is not installed.

    Notes
    -----
    Weights are exported in float32 on the CPU whatever the checkpoint was trained in. The directory is filled
    in a hidden sibling and moved into place, so a failed export leaves an earlier one intact.
    """
    if quantization is not None and quantization not in ONNX_QUANTIZATIONS:
        raise ValueError(f"--quantization {quantization}: ONNX exports take {', '.join(ONNX_QUANTIZATIONS)}")
    import_onnx_packages()
    checkpoint, config = load_transformer_checkpoint(
        checkpoint_dir, "ONNX", "whose graphs are Transformers only"
    )
    check_onnx_exportable(config, str(checkpoint.path))
    model = checkpoint.build_model()
    assert isinstance(model, Transformer)
    model = model.float().eval()
    max_positions = position_table_size(config)
    precisions = ["fp32", *([quantization] if quantization else [])]
    with staged_directory(Path(output_dir), "onnx", checkpoint.path) as staging:
        with _quiet_exporter():
            export_graphs(model, staging, max_positions)
        if quantization == "int8":
            for fp32_file, int8_file in zip(graph_files("fp32"), graph_files("int8"), strict=True):
                _quantize_int8(staging / fp32_file, staging / int8_file)
        for name, contents in checkpoint.tokenizer_files().items():
            if name in TOKENIZER_FILES:
                (staging / name).write_bytes(contents)
        (staging / MODEL_CONFIG_FILE).write_text(json.dumps(config.to_dict(), indent=1), encoding="utf-8")
        description = {
            "version": ONNX_EXPORT_VERSION,
            "opset": ONNX_OPSET,
            "max_positions": max_positions,
            "precisions": {precision: list(graph_files(precision)) for precision in precisions},
            "torch": torch.__version__,
            "decode": dataclasses.asdict(checkpoint.decode_config) if checkpoint.decode_config else None,
            "languages": run_languages(checkpoint.path),
        }
        (staging / ONNX_EXPORT_FILE).write_text(json.dumps(description, indent=1), encoding="utf-8")
    return Path(output_dir)


def run_languages(directory: Path) -> list[str] | None:
    """Read the source and target languages a checkpoint's training run declared.

    Parameters
    ----------
    directory : Path
        The checkpoint directory.

    Returns
    -------
    list of str or None
        ``[source_lang, target_lang]`` from its ``trainer_state.json`` (the run's data settings, defaults
        filled in); None when it has none (an imported Marian model keeps its languages in a tokenizer file,
        which the export copies).

    Notes
    -----
    Stored in the export's description, so ``serve --engine onnxruntime`` names the languages the run was
    trained on (``GET /languages``, the sentence splitter) as ``serve`` names the checkpoint's.
    """
    state_file = directory / STATE_FILE
    if not state_file.is_file():
        return None
    try:
        data = json.loads(state_file.read_text(encoding="utf-8")).get("experiment", {}).get("data")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(data, dict):
        return None
    defaults = DataConfig()
    return [
        str(data.get("source_lang", defaults.source_lang)),
        str(data.get("target_lang", defaults.target_lang)),
    ]


def import_onnx_packages() -> tuple[Any, Any]:
    """Import onnx and onnxruntime, or explain how to install them.

    Returns
    -------
    tuple
        The ``onnx`` and ``onnxruntime`` modules.

    Raises
    ------
    ImportError
        Naming the extra to install.

    Notes
    -----
    Both are optional (the ``onnx`` extra), so the rest of the package imports without them.
    """
    try:
        import onnx
        import onnxruntime
    except ImportError as error:
        raise ImportError(
            f"ONNX export and --engine onnxruntime need the onnx extra: pip install 'transformer[onnx]' ({error})"
        ) from None
    return onnx, onnxruntime


def _quantize_int8(source: Path, destination: Path) -> None:
    """Write onnxruntime's dynamic int8 quantisation of one graph (signed weights, per-tensor scales)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # its advice to pre-process first is for convolution models
    try:
        quantize_dynamic(str(source), str(destination), weight_type=QuantType.QInt8)
    finally:
        root.setLevel(level)


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[None]:
    """Silence the exporter's progress lines and its notes on packages we do not use and on shared axis names.

    One ``Dim`` per axis across inputs is what we mean; torchvision's operators are not ours; the deprecation
    notes are the exporter's own.
    """
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.onnx")
            warnings.filterwarnings("ignore", category=FutureWarning)
            yield
    finally:
        logger.setLevel(level)
