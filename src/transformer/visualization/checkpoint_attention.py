"""Draw a checkpoint's attention maps for one sentence: ``transformer attention``.

The model translates the sentence (or takes a given target), runs the pair once with teacher forcing
(:mod:`~transformer.visualization.attention_inputs`), and the maps are written as one PNG per kind for one
layer (:mod:`~transformer.visualization.attention_plot`) and an HTML page of every layer and head
(:mod:`~transformer.visualization.attention_html`).
"""

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from transformer.architectures import architecture_of
from transformer.decoding.translator import Translator
from transformer.model.transformer import Transformer
from transformer.visualization.attention_html import write_attention_html
from transformer.visualization.attention_inputs import sentence_attention
from transformer.visualization.attention_plot import plot_attention_maps

#: Most words ``--text`` or ``--target`` may hold. The page stores every layer's and head's maps, which grow with
#: the square of the length (2,100 words made a 362 MB page on the quick-start model, so 100 words make about
#: 1 MB there), and a map of more rows than a screen holds cannot be read anyway.
MAX_ATTENTION_WORDS = 100
#: Most characters they may hold: a text without spaces (``aaaa...``, Chinese) is one word but as many pieces as
#: characters, so words alone did not bound the page. 100 words of about 7 characters with their spaces.
MAX_ATTENTION_CHARS = 800


@dataclass(frozen=True)
class DrawnAttention:
    """The maps of one sentence as written.

    Parameters
    ----------
    target : str
        The target the maps were drawn for: the given one, or the model's translation.
    files : list of Path
        The PNG of each attention kind, then the HTML page.

    Notes
    -----
    The target is returned because, when the model translated, it is what the decoder axis shows.
    """

    target: str
    files: list[Path]


def check_layer_index(model: Transformer, layer: int) -> None:
    """Refuse a layer index that names no layer of both stacks.

    Parameters
    ----------
    model : Transformer
        The model whose layers are drawn.
    layer : int
        The ``--layer``: from 0, or negative from the end.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Naming ``--layer`` and the valid range.

    Notes
    -----
    The PNGs draw this layer of the encoder and of the decoder, so it must exist in the shorter stack;
    checked before translating, so a wrong index costs no translation.
    """
    layers = min(model.config.num_encoder_layers, model.config.num_decoder_layers)
    if not -layers <= layer < layers:
        raise ValueError(
            f"--layer {layer}: the model has {layers} layer{'s' if layers > 1 else ''} per stack; "
            f"use 0..{layers - 1}, or -{layers}..-1 counting from the end"
        )


def check_attention_text(text: str, option: str) -> None:
    """Refuse a sentence too long to draw, naming the option and the limit.

    Parameters
    ----------
    text : str
        The ``--text`` or ``--target`` given.
    option : str
        Its flag, for the message.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Such as "--text: 2,100 words; attention maps are drawn for at most 100 words (the page grows with the
        square of the length)".

    Notes
    -----
    Words (split on whitespace) rather than tokens, so the check runs before the model and its tokenizer are
    loaded and the limit is one a user can count; see :data:`MAX_ATTENTION_WORDS` for why it is there. A
    character limit (:data:`MAX_ATTENTION_CHARS`) bounds a text without spaces, one word of many pieces.
    """
    words = len(text.split())
    if words > MAX_ATTENTION_WORDS:
        raise ValueError(
            f"{option}: {words:,} words; attention maps are drawn for at most {MAX_ATTENTION_WORDS} words "
            "(the page grows with the square of the length)"
        )
    if len(text) > MAX_ATTENTION_CHARS:
        raise ValueError(
            f"{option}: {len(text):,} characters; attention maps are drawn for at most {MAX_ATTENTION_CHARS} "
            "characters (the page grows with the square of the length)"
        )


def draw_checkpoint_attention(
    checkpoint: str | Path,
    text: str,
    target: str | None,
    beam_size: int | None,
    layer: int,
    output_dir: Path,
) -> DrawnAttention:
    """Draw the attention maps of one sentence under a checkpoint's model.

    Parameters
    ----------
    checkpoint : str or Path
        Checkpoint or run directory (or the checkpoint's ``model.safetensors``).
    text : str
        The source sentence.
    target : str or None
        The target sentence; None takes the model's own translation.
    beam_size : int or None
        Beam size of that translation; None keeps the run's search settings.
    layer : int
        The layer the PNGs draw (negative counts from the end); the HTML page holds every layer.
    output_dir : Path
        Where the pictures go (created if missing).

    Returns
    -------
    DrawnAttention
        The target drawn and the files written.

    Raises
    ------
    ValueError
        For a text or target over :data:`MAX_ATTENTION_WORDS` words (:func:`check_attention_text`, before
        anything is loaded), a checkpoint of another architecture than the Transformer (naming
        ``model.architecture``), or a layer the model lacks (:func:`check_layer_index`).

    Notes
    -----
    Runs on the CPU in float32 whatever the machine: the maps are for reading, and the explicit attention
    formula they need is quadratic in memory. The decoder axis starts with the model's start token. A
    checkpoint of the recurrent baseline is refused: its single alignment per target token is
    ``RNNEncoderDecoder.forward_with_attention``'s, not per layer and head.
    """
    check_attention_text(text, "--text")
    if target is not None:
        check_attention_text(target, "--target")
    translator = Translator.from_checkpoint(checkpoint, device="cpu")  # the run's search settings
    if not isinstance(translator.model, Transformer):
        raise ValueError(
            f"{checkpoint}: attention maps are drawn for Transformer models; this checkpoint's "
            f"model.architecture is {architecture_of(translator.model.config)!r}"
        )
    check_layer_index(translator.model, layer)
    if beam_size is not None:
        translator.decode_config = dataclasses.replace(translator.decode_config, beam_size=beam_size)
    target = target if target is not None else translator.translate([text])[0]
    maps = sentence_attention(translator.model, translator.tokenizer, text, target)
    images = plot_attention_maps(maps.attention, maps.source_tokens, maps.target_tokens, layer, output_dir)
    page = write_attention_html(
        maps.attention,
        maps.source_tokens,
        maps.target_tokens,
        output_dir / "attention.html",
        title=f"{text} → {target}",
    )
    return DrawnAttention(target, [*images.values(), page])
