"""``transformer convert``: import a HuggingFace Marian model, or export a checkpoint to Marian, CTranslate2 or ONNX.

The command's paths are positional (``convert --from hf-marian MARIAN_DIR --to CHECKPOINT_DIR``, ``convert --to
hf-marian|ctranslate2|onnx CHECKPOINT OUTPUT_DIR``), so their number and the target format are checked here, with
the output compared to the input before anything is read.
"""

from collections.abc import Sequence
from pathlib import Path

from transformer.checkpoint.layout import resolve_checkpoint
from transformer.command_checks import refuse_outputs_among_inputs
from transformer.interop.ctranslate2 import export_ctranslate2
from transformer.interop.marian import export_marian, import_marian
from transformer.interop.onnx_export import export_onnx
from transformer.interop.output_directory import check_replaceable


def convert_model(from_format: str, to: str, paths: Sequence[str], quantization: str | None = None) -> Path:
    """Import a HuggingFace Marian directory, or export a checkpoint (or a run's best) to another format.

    Parameters
    ----------
    from_format : {"checkpoint", "hf-marian"}
        ``--from``: "hf-marian" imports, "checkpoint" exports.
    to : str
        ``--to``: the new checkpoint directory of an import, or the export's format ("hf-marian",
        "ctranslate2" or "onnx").
    paths : sequence of str
        ``MARIAN_DIR`` for an import; ``CHECKPOINT OUTPUT_DIR`` for an export.
    quantization : str or None
        Weight quantization: CTranslate2's (e.g. "int8"), or "int8" for ONNX (onnxruntime's dynamic
        quantisation, written beside the float32 graphs); refused for Marian.

    Returns
    -------
    Path
        The directory written.

    Raises
    ------
    ValueError
        For the wrong number of paths or an unknown export format (with the command's usage), an output that
        is or holds the input, an output holding something other than an earlier conversion of the same
        kind, or a model the format cannot represent.

    Notes
    -----
    An output directory is replaced only if it holds an earlier conversion of the same kind and nothing else
    (:func:`~transformer.interop.output_directory.check_replaceable`): an export's own record, or an import's
    exact set of files. A folder that merely holds a file of the same name (a training checkpoint's
    ``model.safetensors``, a user's ``config.json`` or ``model.bin``) is refused, so a mistyped path never
    deletes a user's files.
    """
    if from_format == "hf-marian":
        if len(paths) != 1:
            raise ValueError("convert --from hf-marian MARIAN_DIR --to CHECKPOINT_DIR takes one MARIAN_DIR")
        refuse_outputs_among_inputs(
            [("MARIAN_DIR", Path(paths[0]))], replaced_directories=[("--to", Path(to))]
        )
        return import_marian(Path(paths[0]), Path(to))
    if to not in ("hf-marian", "ctranslate2", "onnx") or len(paths) != 2:
        raise ValueError("export with: convert --to hf-marian|ctranslate2|onnx CHECKPOINT OUTPUT_DIR")
    if to == "hf-marian" and quantization is not None:
        raise ValueError(f"--quantization {quantization}: a HuggingFace Marian export keeps float32 weights")
    source, destination = resolve_checkpoint(Path(paths[0])), Path(paths[1])
    refuse_outputs_among_inputs([("CHECKPOINT", source)], replaced_directories=[("OUTPUT_DIR", destination)])
    check_replaceable(destination, to, "OUTPUT_DIR")  # before anything is read
    if to == "hf-marian":
        return export_marian(source, destination)
    if to == "onnx":
        return export_onnx(source, destination, quantization)
    return export_ctranslate2(source, destination, quantization)
