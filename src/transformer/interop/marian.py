"""Convert HuggingFace MarianMT (OPUS-MT) directories to our checkpoints and back.

``import_marian`` reads ``config.json``, the weights (``model.safetensors``, sharded safetensors or
``pytorch_model.bin``) and the tokenizer files, and writes a weights-only checkpoint whose tokenizer is the
Marian one (:class:`MarianTokenizer`). ``export_marian`` writes a directory that
``transformers.MarianMTModel.from_pretrained`` and ``MarianTokenizer.from_pretrained`` load with no missing
or unused weights. Neither needs ``transformers``.
"""

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor

from transformer.checkpoint.layout import MODEL_FILE, TOKENIZER_FILE
from transformer.checkpoint.model_checkpoint import save_checkpoint
from transformer.checkpoint.weights import load_model_tensors
from transformer.data.pipeline.marian_tokenizer import (
    SOURCE_SPM_FILE,
    TARGET_SPM_FILE,
    TOKENIZER_CONFIG_FILE,
    VOCAB_FILE,
    MarianTokenizer,
)
from transformer.data.pipeline.special_tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from transformer.data.pipeline.tokenizer import Tokenizer
from transformer.interop.export_checks import load_transformer_checkpoint
from transformer.interop.marian_config import (
    EXPORT_MAX_POSITIONS,
    check_exportable,
    config_to_marian,
    generation_settings,
    marian_to_config,
)
from transformer.interop.marian_weights import (
    interleaved_to_concatenated_order,
    marian_embeddings,
    marian_to_our_tensors,
    our_to_marian_tensors,
    permute_residual_basis,
)
from transformer.interop.output_directory import check_replaceable, staged_directory
from transformer.model.config import TransformerConfig
from transformer.model.transformer import Transformer

__all__ = ["MarianTokenizer", "export_marian", "import_marian", "read_marian_weights"]

CONFIG_FILE = "config.json"
GENERATION_CONFIG_FILE = "generation_config.json"
SAFETENSORS_INDEX_FILE = "model.safetensors.index.json"
PYTORCH_FILE = "pytorch_model.bin"


def _read_json(path: Path) -> dict[str, Any]:
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path}: missing (is {path.parent} a HuggingFace Marian directory?)") from None
    except ValueError as error:
        raise ValueError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(values, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return values


def read_marian_weights(marian_dir: Path) -> dict[str, Tensor]:
    """Read every tensor of a HuggingFace model directory.

    Parameters
    ----------
    marian_dir : Path
        Holds ``model.safetensors``, ``model.safetensors.index.json`` with its shards, or
        ``pytorch_model.bin``.

    Returns
    -------
    dict of str to torch.Tensor
        Tensor name to tensor, on the CPU.

    Raises
    ------
    ValueError
        Naming the directory when none of the files is there.

    Notes
    -----
    ``pytorch_model.bin`` is read with ``torch.load(weights_only=True)``, which refuses pickled code.
    """
    marian_dir = Path(marian_dir)
    if (marian_dir / MODEL_FILE).exists():
        return load_file(str(marian_dir / MODEL_FILE))
    if (marian_dir / SAFETENSORS_INDEX_FILE).exists():
        weight_map = _read_json(marian_dir / SAFETENSORS_INDEX_FILE).get("weight_map", {})
        tensors: dict[str, Tensor] = {}
        for shard in sorted(set(weight_map.values())):
            tensors.update(load_file(str(marian_dir / shard)))
        return tensors
    if (marian_dir / PYTORCH_FILE).exists():
        loaded = torch.load(marian_dir / PYTORCH_FILE, map_location="cpu", weights_only=True)
        return {str(name): tensor for name, tensor in loaded.items()}
    raise ValueError(f"{marian_dir}: no weights ({MODEL_FILE}, {SAFETENSORS_INDEX_FILE} or {PYTORCH_FILE})")


def _imported_config(
    values: dict[str, Any], tokenizer: MarianTokenizer, tensors: dict[str, Tensor], source: str
) -> TransformerConfig:
    """Build our config from ``config.json``, checked against the vocabulary and the weights."""
    source_embedding, target_embedding = marian_embeddings(tensors, source)
    # Recent transformers unties a "shared" model's embeddings when tie_word_embeddings is false: trust the
    # tensors, not the flag.
    share = bool(values.get("share_encoder_decoder_embeddings", True)) and (
        source_embedding.shape == target_embedding.shape and torch.equal(source_embedding, target_embedding)
    )
    logits_bias = tensors.get("final_logits_bias")
    config = marian_to_config(
        values,
        source,
        unk_id=tokenizer.unk_id,
        share_embeddings=share,
        output_bias=logits_bias is not None and bool(logits_bias.any()),
    )
    if tokenizer.source_vocab_size != config.src_vocab_size or tokenizer.vocab_size != config.tgt_vocab_size:
        raise ValueError(
            f"{tokenizer.origin}: the vocabularies have {tokenizer.source_vocab_size} source and "
            f"{tokenizer.vocab_size} target pieces, config.json says vocab_size={config.src_vocab_size} "
            f"and decoder_vocab_size={config.tgt_vocab_size}"
        )
    if tokenizer.eos_id != config.eos_id:
        raise ValueError(
            f"{tokenizer.origin}/{VOCAB_FILE}: </s> has id {tokenizer.eos_id}, config.json says eos_token_id={config.eos_id}"
        )
    return config


def import_marian(marian_dir: Path, output_dir: Path) -> Path:
    """Convert a HuggingFace MarianMT directory into one of our checkpoints.

    Parameters
    ----------
    marian_dir : Path
        Holds ``config.json``, the weights, ``source.spm``, ``target.spm``, ``vocab.json`` (and, for separate
        vocabularies, ``target_vocab.json``).
    output_dir : Path
        The checkpoint directory to write (weights only); replaced only if it holds an earlier import
        (:func:`~transformer.interop.output_directory.holds_earlier_import`), never a training checkpoint.

    Returns
    -------
    Path
        ``output_dir``, loadable with ``load_checkpoint`` and ``Translator.from_checkpoint``.

    Raises
    ------
    ValueError
        Naming the ``config.json`` field or tensor for a feature our model cannot represent.

    Notes
    -----
    The model keeps Marian's concatenated sinusoids, swish activation, ``final_logits_bias`` (as
    ``output_bias``), decoder start token (its PAD) and vocabularies; its logits equal ``MarianMTModel``'s.
    """
    marian_dir = Path(marian_dir)
    source = str(marian_dir / CONFIG_FILE)
    check_replaceable(Path(output_dir), "checkpoint", "--to")
    values = _read_json(marian_dir / CONFIG_FILE)
    tokenizer = MarianTokenizer.load(marian_dir)
    tensors = read_marian_weights(marian_dir)
    config = _imported_config(values, tokenizer, tensors, source)
    model = Transformer(config)
    load_model_tensors(model, marian_to_our_tensors(tensors, config, str(marian_dir)), str(marian_dir))
    return save_checkpoint(Path(output_dir), model, config, tokenizer.files())


def joint_spm_as_marian(spm_bytes: bytes, config: TransformerConfig, source: str) -> dict[str, bytes]:
    """Describe this project's joint SentencePiece model as Marian tokenizer files.

    Parameters
    ----------
    spm_bytes : bytes
        Our ``tokenizer.model``.
    config : TransformerConfig
        The model; its special ids must be the tokenizer's fixed ones.
    source : str
        The checkpoint, for error messages.

    Returns
    -------
    dict of str to bytes
        ``source.spm`` and ``target.spm`` (both our model), ``vocab.json`` and ``tokenizer_config.json``.

    Notes
    -----
    ``vocab.json`` maps each piece to its own SentencePiece id, so ``transformers.MarianTokenizer`` gives the
    ids our tokenizer gives (tested).
    """
    tokenizer = Tokenizer.from_serialized(spm_bytes)
    for name, token_id in {"pad_id": PAD_ID, "bos_id": BOS_ID, "eos_id": EOS_ID, "unk_id": UNK_ID}.items():
        if getattr(config, name) != token_id:
            raise ValueError(
                f"{source}: TransformerConfig.{name}={getattr(config, name)} but {TOKENIZER_FILE} has {token_id}"
            )
    vocabulary = {tokenizer.id_to_piece(token_id): token_id for token_id in range(tokenizer.vocab_size)}
    settings = {
        "tokenizer_class": "MarianTokenizer",
        "separate_vocabs": False,
        "source_lang": None,
        "target_lang": None,
        "model_max_length": EXPORT_MAX_POSITIONS,
        "unk_token": tokenizer.id_to_piece(UNK_ID),
        "eos_token": tokenizer.id_to_piece(EOS_ID),
        "pad_token": tokenizer.id_to_piece(PAD_ID),
    }
    return {
        SOURCE_SPM_FILE: spm_bytes,
        TARGET_SPM_FILE: spm_bytes,
        VOCAB_FILE: json.dumps(vocabulary, ensure_ascii=False, indent=1).encode("utf-8"),
        TOKENIZER_CONFIG_FILE: json.dumps(settings, indent=1).encode("utf-8"),
    }


def marian_tokenizer_files(
    tokenizer_files: dict[str, bytes], config: TransformerConfig, source: str
) -> dict[str, bytes]:
    """Turn a checkpoint's tokenizer into Marian's files.

    Parameters
    ----------
    tokenizer_files : dict of str to bytes
        ``Checkpoint.tokenizer_files()``: our ``tokenizer.model``, or the files of an imported Marian model.
    config : TransformerConfig
        The model, whose vocabulary sizes the tokenizer must match.
    source : str
        The checkpoint, for error messages.

    Returns
    -------
    dict of str to bytes
        ``source.spm``, ``target.spm``, ``vocab.json``, ``tokenizer_config.json`` (and ``target_vocab.json``
        when the vocabularies are separate).

    Raises
    ------
    ValueError
        Naming the checkpoint when the tokenizer is missing or its vocabulary sizes differ from the model's.

    Notes
    -----
    An imported Marian model's files are written back unchanged.
    """
    if TOKENIZER_FILE in tokenizer_files:
        files = joint_spm_as_marian(tokenizer_files[TOKENIZER_FILE], config, source)
    elif VOCAB_FILE in tokenizer_files:
        files = dict(tokenizer_files)
    else:
        raise ValueError(f"{source}: no tokenizer ({TOKENIZER_FILE}, or {VOCAB_FILE} with source/target.spm)")
    marian = MarianTokenizer(files, origin=source)
    if marian.source_vocab_size != config.src_vocab_size or marian.vocab_size != config.tgt_vocab_size:
        raise ValueError(
            f"{source}: the tokenizer has {marian.source_vocab_size}/{marian.vocab_size} source/target pieces, "
            f"the model {config.src_vocab_size}/{config.tgt_vocab_size}"
        )
    return marian.files()


def concatenated_weights(weights: dict[str, Tensor], config: TransformerConfig) -> dict[str, Tensor]:
    """Express a model's weights in the concatenated sinusoidal layout.

    Parameters
    ----------
    weights : dict of str to torch.Tensor
        Our state-dict entries.
    config : TransformerConfig
        Their model's config.

    Returns
    -------
    dict of str to torch.Tensor
        The same weights for ``sinusoidal_layout="concatenated"``; unchanged when already so.

    Notes
    -----
    MarianMT always builds its sinusoids concatenated (all sines, then all cosines); our models interleave
    them (Section 3.5's ``PE(pos, 2i)`` sine, ``PE(pos, 2i+1)`` cosine). Re-indexing every residual-stream
    axis with one permutation moves the position signal into Marian's layout without changing the logits,
    since each sum over ``d_model`` runs over the same terms in another order
    (:func:`~transformer.interop.marian_weights.permute_residual_basis`).
    """
    if config.sinusoidal_layout == "concatenated":
        return weights
    return permute_residual_basis(weights, interleaved_to_concatenated_order(config.d_model))


def export_marian(checkpoint_dir: Path, output_dir: Path) -> Path:
    """Write one of our checkpoints as a HuggingFace MarianMT directory.

    Parameters
    ----------
    checkpoint_dir : Path
        A checkpoint (or run) directory.
    output_dir : Path
        Directory to write; replaced only if it holds an earlier HuggingFace Marian export and nothing else
        (its ``converted_from.json`` lists the files).

    Returns
    -------
    Path
        ``output_dir``, holding ``config.json``, ``generation_config.json``, ``model.safetensors``,
        ``source.spm``, ``target.spm``, ``vocab.json``, ``tokenizer_config.json`` and ``converted_from.json``
        (the record of what the export wrote).

    Raises
    ------
    ValueError
        Naming the config field for a model MarianMT cannot represent: the recurrent baseline, pre-norm,
        learned positions, additive or windowed attention, other head widths.

    Notes
    -----
    An interleaved-layout model is exported exactly by permuting the basis of its residual stream.
    ``generation_config.json`` forbids PAD and BOS as our search does; HuggingFace's length penalty is our
    "power" form, so set ``length_penalty_form="power"`` (and HuggingFace's ``early_stopping=True``) to
    compare beams.
    """
    checkpoint, config = load_transformer_checkpoint(
        checkpoint_dir, "HuggingFace Marian", "which holds Transformer models only"
    )
    source = str(checkpoint.path)
    check_exportable(config, source)
    tokenizer_files = marian_tokenizer_files(checkpoint.tokenizer_files(), config, source)
    tensors = our_to_marian_tensors(concatenated_weights(checkpoint.weights, config), config)
    with staged_directory(Path(output_dir), "hf-marian", checkpoint.path) as staging:
        (staging / CONFIG_FILE).write_text(json.dumps(config_to_marian(config), indent=2), encoding="utf-8")
        generation = json.dumps(generation_settings(config), indent=2)
        (staging / GENERATION_CONFIG_FILE).write_text(generation, encoding="utf-8")
        save_file(tensors, str(staging / MODEL_FILE), metadata={"format": "pt"})
        for name, contents in tokenizer_files.items():
            (staging / name).write_bytes(contents)
    return Path(output_dir)
