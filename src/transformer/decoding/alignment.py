"""Hard word alignments from cross-attention, written in the Pharaoh format (``i-j``: source word i, target j).

For each output subword, the source subword it attends to most (one decoder layer's cross-attention,
averaged over heads) is its aligned subword; the subword pairs are mapped to the words holding them and
merged, so a word pair is aligned when any of their subwords are (the usual conversion, e.g. in
awesome-align). The attention is read by teacher-forcing each finished hypothesis through the model once,
after the search: the search's cached steps compute exactly these weights (cached decoding equals full
decoding, tested), and keeping them out of the step loop leaves the search's fast attention path (which
does not materialise the weights) untouched.
"""

import dataclasses
from collections.abc import Sequence

import torch
from torch import Tensor

from transformer.architectures import SequenceModel
from transformer.data.pipeline.batch import pad_sequences
from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.decoding.candidate import Candidate
from transformer.model.transformer import Transformer

#: The marker SentencePiece puts on a piece that starts a word.
WORD_START = "\u2581"


def word_indices(pieces: Sequence[str]) -> list[int | None]:
    """Give each subword piece the index of the word it belongs to.

    Parameters
    ----------
    pieces : sequence of str
        SentencePiece pieces of a sentence, in order.

    Returns
    -------
    list of int or None
        Word index (from 0) per piece; None for a piece of a word with no characters but "▁" (a run of
        spaces), which the text's words do not count.

    Notes
    -----
    SentencePiece marks whitespace with "▁", so a piece starting with it starts a word, and the words are
    the sentence's whitespace-separated words (what Pharaoh indices count): "▁" alone followed by "▁Hund"
    is a double space, not a word, while "▁" followed by "Hund" is the word "Hund". A first piece without
    the marker still starts a word.
    """
    words: list[list[int]] = []  # piece positions per word, counting words of spaces too
    for position, piece in enumerate(pieces):
        if position == 0 or piece.startswith(WORD_START):
            words.append([])
        words[-1].append(position)
    indices: list[int | None] = [None] * len(pieces)
    word = 0
    for positions in words:
        if any(pieces[position].strip(WORD_START) for position in positions):
            for position in positions:
                indices[position] = word
            word += 1
    return indices


def check_alignment_layer(model: SequenceModel, layer: int) -> int:
    """Resolve a decoder layer index (negative counts from the end), refusing one the model lacks.

    Parameters
    ----------
    model : Transformer or RNNEncoderDecoder
        The model.
    layer : int
        The requested layer.

    Returns
    -------
    int
        The layer index from 0.

    Raises
    ------
    ValueError
        Naming the valid range when ``layer`` is outside the decoder's layers.

    Notes
    -----
    The recurrent baseline has one attention, which counts as its single layer (0 or -1).
    """
    num_layers = model.config.num_decoder_layers if isinstance(model, Transformer) else 1
    if not -num_layers <= layer < num_layers:
        raise ValueError(
            f"alignment layer {layer} is out of range: the decoder has {num_layers} attention layer(s), "
            f"so use -{num_layers} to {num_layers - 1}"
        )
    return layer % num_layers


def cross_attention(
    model: SequenceModel, src_tokens: Tensor, outputs: Sequence[Sequence[int]], layer: int
) -> Tensor:
    """Teacher-force outputs through the model and return one layer's cross-attention, averaged over heads.

    Parameters
    ----------
    model : Transformer or RNNEncoderDecoder
        The model, in eval mode.
    src_tokens : torch.Tensor, shape (rows, src_len), int64
        The source of each output, right-padded.
    outputs : sequence of sequence of int
        One output per row (no BOS, no EOS).
    layer : int
        Decoder layer (negative counts from the end; see :func:`check_alignment_layer`).

    Returns
    -------
    torch.Tensor, shape (rows, max_output_len, src_len), float32
        Row t of a sentence is the attention used to predict its output token t; rows past an output's
        length are meaningless.

    Notes
    -----
    The decoder input is the start token and the output without its last token, so position t predicts
    token t. Padding at the end of shorter outputs cannot change earlier positions (causal self-attention).
    """
    layer = check_alignment_layer(model, layer)
    start_id, pad_id = model.config.start_id, model.config.pad_id
    decoder_inputs = [[start_id, *output[:-1]] if output else [start_id] for output in outputs]
    tgt_tokens = pad_sequences(decoder_inputs, pad_id).to(src_tokens.device)
    with torch.inference_mode():
        if isinstance(model, Transformer):
            _, weights = model.forward_with_attention(src_tokens, tgt_tokens)
            return weights.cross[layer].float().mean(dim=1)  # (rows, tgt_len, src_len)
        _, alignment = model.forward_with_attention(src_tokens, tgt_tokens)
        return alignment.float()  # (rows, tgt_len, src_len): one attention, no heads


def hard_word_alignment(
    attention: Tensor, source_words: Sequence[int | None], target_words: Sequence[int | None]
) -> list[tuple[int, int]]:
    """Align each target subword to its most attended source subword, then merge to word pairs.

    Parameters
    ----------
    attention : torch.Tensor, shape (tgt_len, src_len), float32
        One sentence's attention (at least ``len(target_words)`` rows, ``len(source_words)`` columns).
    source_words : sequence of int or None
        Word index of each source subword, EOS excluded (:func:`word_indices`); None for no word.
    target_words : sequence of int or None
        Word index of each output subword.

    Returns
    -------
    list of (int, int)
        Sorted, distinct (source word, target word) pairs.

    Notes
    -----
    The source EOS (and padding) columns are left out of the argmax: attention heads often park on EOS, a
    "no alignment" sink that is not a word; so are source pieces of no word. A target piece of no word
    aligns nothing. An empty source or output gives no pairs.
    """
    in_words = torch.tensor([word is not None for word in source_words], dtype=torch.bool)
    if not bool(in_words.any()) or not target_words:
        return []
    scores = attention[: len(target_words), : len(source_words)].masked_fill(~in_words, float("-inf"))
    best_sources = scores.argmax(dim=1).tolist()  # (tgt_subwords,)
    pairs = set()
    for target_position, source_position in enumerate(best_sources):
        source_word, target_word = source_words[source_position], target_words[target_position]
        if source_word is not None and target_word is not None:
            pairs.add((source_word, target_word))
    return sorted(pairs)


def format_pharaoh(pairs: Sequence[tuple[int, int]]) -> str:
    """Write alignment pairs as ``i-j`` separated by spaces.

    Parameters
    ----------
    pairs : sequence of (int, int)
        (source word, target word) pairs.

    Returns
    -------
    str
        E.g. "0-0 1-2 2-1"; empty for no pairs.

    Notes
    -----
    The format of fast_align, Moses and fairseq's ``--print-alignment``; indices from 0.
    """
    return " ".join(f"{source}-{target}" for source, target in pairs)


def word_alignments(
    model: SequenceModel,
    tokenizer: TextTokenizer,
    sources: Sequence[Sequence[int]],
    outputs: Sequence[Sequence[int]],
    layer: int,
) -> list[list[tuple[int, int]]]:
    """Hard word alignments of outputs to their sources, from one decoder layer's cross-attention.

    Parameters
    ----------
    model : Transformer or RNNEncoderDecoder
        The model, in eval mode (an ensemble's first model).
    tokenizer : TextTokenizer
        Its tokenizer: the subword pieces say where words start.
    sources : sequence of sequence of int
        Per row, the source token ids (EOS and padding included or not).
    outputs : sequence of sequence of int
        Per row, an output's token ids (no BOS, no EOS).
    layer : int
        Decoder layer (negative counts from the end).

    Returns
    -------
    list of list of (int, int)
        Per row, (source word, target word) pairs, word-level, 0-based (Pharaoh's ``i-j``).

    Raises
    ------
    ValueError
        When the layer does not exist.

    Notes
    -----
    One teacher-forced pass over all rows (:func:`cross_attention`), heads averaged, subwords merged into
    words (:func:`hard_word_alignment`); what ``translate --alignments`` and the server's ``alignments`` use.
    """
    if not outputs:
        return []
    check_alignment_layer(model, layer)
    eos_id, pad_id = model.config.eos_id, model.config.pad_id
    source_ids = [[i for i in source if i not in (eos_id, pad_id)] for source in sources]
    device = next(model.parameters()).device
    row_sources = pad_sequences([[*ids, eos_id] for ids in source_ids], pad_id).to(device)
    attention = cross_attention(model, row_sources, outputs, layer).cpu()  # (rows, tgt_len, src_len)
    alignments = []
    for row, (source, output) in enumerate(zip(source_ids, outputs, strict=True)):
        source_words = word_indices([tokenizer.source_id_to_piece(i) for i in source])
        target_words = word_indices([tokenizer.id_to_piece(i) for i in output])
        alignments.append(hard_word_alignment(attention[row], source_words, target_words))
    return alignments


def align_candidates(
    model: SequenceModel,
    tokenizer: TextTokenizer,
    src_tokens: Tensor,
    candidates: list[list[Candidate]],
    layer: int,
) -> list[list[Candidate]]:
    """Add word alignments to a batch's candidates, from the model's cross-attention.

    Parameters
    ----------
    model : SequenceModel
        The (first) model decoded, a Transformer.
    tokenizer : TextTokenizer
        Its tokenizer (to map pieces to words).
    src_tokens : torch.Tensor, shape (batch, src_len), int64
        The batch's source ids, one row per sentence.
    candidates : list of list of Candidate
        Per sentence of the batch, its candidates.
    layer : int
        The decoder layer whose cross-attention aligns (negative counts from the end).

    Returns
    -------
    list of list of Candidate
        The same candidates, each with its ``alignment`` set.

    Notes
    -----
    Every candidate of every sentence is aligned in one :func:`word_alignments` call (one teacher-forced
    pass), each row against its own sentence's source.
    """
    sources = src_tokens.tolist()
    rows = [sentence for sentence, found in enumerate(candidates) for _ in found]
    outputs = [candidate.tokens for found in candidates for candidate in found]
    row_sources = [sources[sentence] for sentence in rows]
    pairs = iter(word_alignments(model, tokenizer, row_sources, outputs, layer))
    return [
        [dataclasses.replace(candidate, alignment=next(pairs)) for candidate in found] for found in candidates
    ]
