"""Tensor names of HuggingFace MarianMT and of our Transformer, and the change of sinusoidal basis.

MarianMT adds ``[sin(pos w_0) .. sin(pos w_{d/2-1}), cos(pos w_0) .. cos(pos w_{d/2-1})]`` to the embeddings;
the paper (and our default) interleaves them: ``[sin(pos w_0), cos(pos w_0), sin(pos w_1), ...]``. Both are
the same vectors in a permuted basis of the residual stream: with ``order`` the permutation that takes the
interleaved columns to the concatenated ones, ``PE_concatenated = PE_interleaved[:, order]``. Permuting every
tensor that touches the residual stream the same way (embedding columns; input columns of every Linear that
reads the stream; output rows and bias of every Linear that writes it; LayerNorm weight and bias, which
LayerNorm's mean and variance do not notice) gives a model with the other layout and identical logits.
"""

import torch
from torch import Tensor

from transformer.model.config import TransformerConfig
from transformer.model.positional_encoding import sinusoidal_table

# Tensors indexed by the residual stream along their last axis (they read it) ...
READS_RESIDUAL = ("q_proj.weight", "k_proj.weight", "v_proj.weight", "linear_in.weight", "embedding.weight")
# ... along their first axis (they write it, or scale it elementwise) ...
WRITES_RESIDUAL = ("out_proj.weight", "out_proj.bias", "linear_out.weight", "linear_out.bias")
NORMALIZES_RESIDUAL = ("norm.weight", "norm.bias")
# ... or not at all (they live in the per-head or inner feed-forward or vocabulary space).
BASIS_FREE = ("q_proj.bias", "k_proj.bias", "v_proj.bias", "linear_in.bias", "output_bias")

ATTENTION_NAMES = {"self_attention": "self_attn", "cross_attention": "encoder_attn"}
FEED_FORWARD_NAMES = {"feed_forward.linear_in": "fc1", "feed_forward.linear_out": "fc2"}
POSITION_TABLES = ("model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight")


def layer_name_pairs(config: TransformerConfig) -> list[tuple[str, str]]:
    """List the per-layer tensors of both formats: (our name, Marian name).

    Parameters
    ----------
    config : TransformerConfig
        Supplies the numbers of encoder and decoder layers.

    Returns
    -------
    list of (str, str)
        E.g. ``("decoder.layers.0.cross_attention.q_proj.weight", "model.decoder.layers.0.encoder_attn.q_proj.weight")``.

    Notes
    -----
    Embeddings, the output projection and the logits bias are handled separately (they may be shared).
    """
    pairs = []
    for stack, num_layers in (("encoder", config.num_encoder_layers), ("decoder", config.num_decoder_layers)):
        for index in range(num_layers):
            for our_module, their_module in _layer_modules(stack).items():
                for parameter in ("weight", "bias"):
                    pairs.append(
                        (
                            f"{stack}.layers.{index}.{our_module}.{parameter}",
                            f"model.{stack}.layers.{index}.{their_module}.{parameter}",
                        )
                    )
    return pairs


def _layer_modules(stack: str) -> dict[str, str]:
    """Map our module names inside one encoder or decoder layer to Marian's."""
    attentions = dict(ATTENTION_NAMES) if stack == "decoder" else {"self_attention": "self_attn"}
    modules = dict(FEED_FORWARD_NAMES)
    modules["feed_forward_residual.norm"] = "final_layer_norm"
    for our_attention, their_attention in attentions.items():
        for projection in ("q_proj", "k_proj", "v_proj", "out_proj"):
            modules[f"{our_attention}.{projection}"] = f"{their_attention}.{projection}"
        modules[f"{our_attention}_residual.norm"] = f"{their_attention}_layer_norm"
    return modules


def _pick(tensors: dict[str, Tensor], names: tuple[str, ...], source: str) -> Tensor:
    """Return the first of ``names`` present (checkpoints store shared matrices under varying names)."""
    for name in names:
        if name in tensors:
            return tensors[name]
    raise ValueError(f"{source}: missing tensor {names[0]}")


def marian_embeddings(tensors: dict[str, Tensor], source: str) -> tuple[Tensor, Tensor]:
    """Find the source and target embedding matrices of a Marian checkpoint.

    Parameters
    ----------
    tensors : dict of str to torch.Tensor
        The checkpoint's tensors.
    source : str
        The checkpoint, for error messages.

    Returns
    -------
    source_embedding : torch.Tensor, shape (vocab_size, d_model)
    target_embedding : torch.Tensor, shape (decoder_vocab_size, d_model)

    Notes
    -----
    Shared models store one matrix as ``model.shared.weight`` and may repeat it under the encoder's and
    decoder's ``embed_tokens`` names.
    """
    source_embedding = _pick(tensors, ("model.encoder.embed_tokens.weight", "model.shared.weight"), source)
    target_embedding = _pick(tensors, ("model.decoder.embed_tokens.weight", "model.shared.weight"), source)
    return source_embedding, target_embedding


def check_position_tables(tensors: dict[str, Tensor], source: str) -> None:
    """Refuse stored position tables that are not Marian's sinusoids (e.g. learned ones).

    Parameters
    ----------
    tensors : dict of str to torch.Tensor
        The checkpoint's tensors; older checkpoints store ``embed_positions``, newer ones do not.
    source : str
        The checkpoint, for error messages.

    Returns
    -------
    None

    Notes
    -----
    Our model computes the same table (``sinusoidal_layout="concatenated"``) for any length.
    """
    for name in POSITION_TABLES:
        if name in tensors:
            table = tensors[name].float()
            expected = sinusoidal_table(table.size(0), table.size(1), "concatenated")
            if not torch.allclose(table, expected, atol=1e-4):
                raise ValueError(
                    f"{source}: {name} is not the sinusoidal table; learned positions are not supported"
                )


def marian_to_our_tensors(
    tensors: dict[str, Tensor], config: TransformerConfig, source: str
) -> dict[str, Tensor]:
    """Rename a Marian checkpoint's tensors to ours.

    Parameters
    ----------
    tensors : dict of str to torch.Tensor
        The checkpoint's tensors (``model.safetensors`` names).
    config : TransformerConfig
        The config :func:`~transformer.interop.marian_config.marian_to_config` built for it.
    source : str
        The checkpoint, for error messages.

    Returns
    -------
    dict of str to torch.Tensor
        Our state-dict entries, each shared matrix once, as ``load_model_tensors`` expects.

    Raises
    ------
    ValueError
        Naming a missing tensor, or a tensor left over that our model has no place for.

    Notes
    -----
    A tensor left over is an error rather than ignored: it would be a part of the Marian model that ours would
    silently drop.
    """
    check_position_tables(tensors, source)
    source_embedding, target_embedding = marian_embeddings(tensors, source)
    ours = {"src_embedding.embedding.weight": source_embedding}
    if not config.share_embeddings:
        ours["tgt_embedding.embedding.weight"] = target_embedding
    if not config.tie_output_projection:
        ours["output_projection.weight"] = _pick(tensors, ("lm_head.weight",), source)
    if config.output_bias:
        ours["output_bias"] = _pick(tensors, ("final_logits_bias",), source).reshape(-1)
    for our_name, their_name in layer_name_pairs(config):
        ours[our_name] = _pick(tensors, (their_name,), source)
    used = {their_name for _, their_name in layer_name_pairs(config)}
    used |= {"model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"}
    used |= {"lm_head.weight", "final_logits_bias", *POSITION_TABLES}
    leftover = sorted(set(tensors) - used)
    if leftover:
        raise ValueError(f"{source}: tensor(s) {leftover[:5]} have no counterpart in our model")
    return {name: tensor.float() for name, tensor in ours.items()}


def our_to_marian_tensors(tensors: dict[str, Tensor], config: TransformerConfig) -> dict[str, Tensor]:
    """Rename our (concatenated-layout) tensors to a Marian checkpoint's, as ``save_pretrained`` writes them.

    Parameters
    ----------
    tensors : dict of str to torch.Tensor
        Our weights, each shared matrix once (``Checkpoint.weights``), already in the concatenated layout.
    config : TransformerConfig
        Our model's config.

    Returns
    -------
    dict of str to torch.Tensor
        ``model.safetensors`` entries; contiguous clones, so no two share memory.

    Notes
    -----
    A shared, tied model stores its one matrix as ``model.shared.weight`` only. Untied or unshared models
    store every embedding under its own name, which recent ``transformers`` loads into separate parameters.
    """
    source_embedding = tensors["src_embedding.embedding.weight"]
    target_embedding = (
        source_embedding if config.share_embeddings else tensors["tgt_embedding.embedding.weight"]
    )
    output_bias = tensors.get("output_bias", torch.zeros(config.tgt_vocab_size))
    theirs = {"final_logits_bias": output_bias.reshape(1, -1)}
    if config.share_embeddings:
        theirs["model.shared.weight"] = source_embedding
    if not (config.share_embeddings and config.tie_output_projection):
        theirs["model.encoder.embed_tokens.weight"] = source_embedding
        theirs["model.decoder.embed_tokens.weight"] = target_embedding
    if not config.tie_output_projection:
        theirs["lm_head.weight"] = tensors["output_projection.weight"]
    for our_name, their_name in layer_name_pairs(config):
        theirs[their_name] = tensors[our_name]
    return {name: tensor.detach().float().contiguous().clone() for name, tensor in theirs.items()}


def residual_axes(name: str) -> tuple[int, ...]:
    """Say which axes of one of our tensors index the residual stream.

    Parameters
    ----------
    name : str
        A state-dict name of our Transformer.

    Returns
    -------
    tuple of int
        ``(1,)`` for tensors that read the stream (input columns), ``(0,)`` for those that write or normalise
        it, ``()`` for tensors in another space.

    Raises
    ------
    ValueError
        For a name it does not know.

    Notes
    -----
    An unknown name is an error, so a new kind of parameter cannot be silently left in the old basis.
    """
    if name.endswith(READS_RESIDUAL) or name == "output_projection.weight":
        return (1,)
    if name.endswith(WRITES_RESIDUAL + NORMALIZES_RESIDUAL):
        return (0,)
    if name.endswith(BASIS_FREE):
        return ()
    raise ValueError(f"cannot tell how tensor {name!r} relates to the residual stream")


def interleaved_to_concatenated_order(d_model: int) -> Tensor:
    """Return the permutation that turns interleaved sinusoid columns into concatenated ones.

    Parameters
    ----------
    d_model : int
        Model width (even).

    Returns
    -------
    torch.Tensor, shape (d_model,), int64
        ``[0, 2, 4, .., d_model - 2, 1, 3, .., d_model - 1]``: column c of the concatenated basis is column
        ``order[c]`` of the interleaved one.

    Notes
    -----
    ``sinusoidal_table(n, d, "interleaved")[:, order] == sinusoidal_table(n, d, "concatenated")``.
    """
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def permute_residual_basis(tensors: dict[str, Tensor], order: Tensor) -> dict[str, Tensor]:
    """Express a model's weights in a permuted basis of its residual stream.

    Parameters
    ----------
    tensors : dict of str to torch.Tensor
        Our state-dict entries.
    order : torch.Tensor, shape (d_model,), int64
        New residual coordinate c is old coordinate ``order[c]``.

    Returns
    -------
    dict of str to torch.Tensor
        The same entries with every residual-stream axis re-indexed by ``order``.

    Notes
    -----
    Exact: every output is the same function of the input, since each sum over the residual stream runs
    over the same terms in another order (LayerNorm's statistics included).
    """
    permuted = {}
    for name, tensor in tensors.items():
        for axis in residual_axes(name):
            tensor = tensor.index_select(axis, order)
        permuted[name] = tensor
    return permuted
