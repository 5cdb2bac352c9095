"""Small Marian and Transformer models with random weights, and the helpers the interop tests share.

Nothing can be downloaded, so every "pretrained" model here is built from a config: tiny SentencePiece
models trained on the built-in synthetic corpus, a ``transformers.MarianMTModel`` with random weights saved
with ``save_pretrained``, and our own ``Transformer`` saved as a checkpoint.
"""

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sentencepiece
import torch
from torch import Tensor, nn

from transformer.checkpoint.model_checkpoint import save_checkpoint
from transformer.data.corpora.synthetic import generate_pairs
from transformer.data.pipeline.tokenizer import Tokenizer
from transformer.model.config import TransformerConfig
from transformer.model.transformer import Transformer

PAIRS = generate_pairs(300, seed=11)
ENGLISH = [english for english, _ in PAIRS]
GERMAN = [german for _, german in PAIRS]
SOURCE_SENTENCES = [
    "The man sees the dog.",
    "A small child gives the teacher a red book without the umbrella.",
    "Bottles are green.",
    "Zürich ✓ has naïve cafés.",  # characters the tiny vocabulary lacks: <unk>
]


def train_spm(sentences: list[str], vocab_size: int) -> bytes:
    """Train a unigram SentencePiece model like Marian's (ids: <unk> 0, <s> 1, </s> 2)."""
    writer = io.BytesIO()
    sentencepiece.SentencePieceTrainer.Train(
        sentence_iterator=iter(sentences),
        model_writer=writer,
        model_type="unigram",
        vocab_size=vocab_size,
        character_coverage=1.0,
        num_threads=1,
        minloglevel=2,
    )
    return writer.getvalue()


def marian_vocabulary(spm_bytes: bytes, pad_position: int | None = None) -> dict[str, int]:
    """Build an OPUS-MT style vocab.json: </s> 0, <unk> 1, the other pieces, <pad> last (or at a position)."""
    processor = sentencepiece.SentencePieceProcessor()
    processor.LoadFromSerializedProto(spm_bytes)
    pieces = ["</s>", "<unk>"]
    pieces += [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    pieces = list(dict.fromkeys(piece for piece in pieces if piece != "<s>"))
    pieces.insert(len(pieces) if pad_position is None else pad_position, "<pad>")
    return {piece: token_id for token_id, piece in enumerate(pieces)}


def randomize_(module: nn.Module, seed: int) -> None:
    """Give every weight and the logits bias random values, so that outputs depend on the input."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, tensor in [*module.named_parameters(), *module.named_buffers()]:
            if "embed_positions" in name or "positional_encoding" in name:
                continue
            noise = torch.randn(tensor.shape, generator=generator)
            if "norm" in name and name.endswith("weight"):
                tensor.copy_(1.0 + 0.1 * noise)
            elif tensor.dim() < 2 or any(
                word in name
                for word in ("final_logits_bias", "embed", "shared", "lm_head", "output_projection")
            ):
                tensor.copy_(0.3 * noise)
            else:
                # Sharp attention (large query/key weights) makes outputs depend on the input.
                gain = 2.5 if any(word in name for word in ("q_proj", "k_proj")) else 1.5
                tensor.copy_(gain * tensor.size(1) ** -0.5 * noise)


def eos_logit_boost(logits: Tensor, eos_id: int, quantile: float = 0.15) -> float:
    """How much to raise the EOS logit so that EOS is the best token at about ``quantile`` of positions.

    Random models almost never pick EOS; a calibrated boost makes outputs end at varied lengths, which
    exercises how each search finishes hypotheses.
    """
    gaps = logits.max(dim=-1).values - logits[..., eos_id]
    return float(torch.quantile(gaps.flatten().float(), quantile))


def probe_batch(
    vocab_size: int, target_vocab_size: int, eos_id: int, start_id: int, seed: int
) -> tuple[Tensor, Tensor]:
    """Random source rows ending in EOS and decoder inputs starting with the start token (no padding)."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(2, vocab_size - 1, (4, 12), generator=generator)
    src[:, -1] = eos_id
    tgt = torch.randint(2, target_vocab_size - 1, (4, 16), generator=generator)
    tgt[:, 0] = start_id
    return src, tgt


@dataclass
class MarianSpec:
    """Options of a random Marian model."""

    separate_vocabs: bool = False
    tie_word_embeddings: bool = True
    activation_function: str = "swish"
    scale_embedding: bool = True


def write_random_marian(directory: Path, spec: MarianSpec, seed: int = 0) -> Path:
    """Save a random ``MarianMTModel`` and its tokenizer files, as an OPUS-MT directory looks."""
    from transformers import MarianConfig, MarianMTModel

    source_spm = train_spm(ENGLISH + GERMAN if not spec.separate_vocabs else ENGLISH, 100)
    target_spm = train_spm(GERMAN, 80) if spec.separate_vocabs else source_spm
    target_vocab = marian_vocabulary(target_spm)
    pad_id = len(target_vocab) - 1
    # transformers pads both embeddings with one id, so <pad> must have it in both vocabularies.
    source_vocab = marian_vocabulary(source_spm, pad_position=pad_id if spec.separate_vocabs else None)
    config = MarianConfig(
        vocab_size=len(source_vocab),
        decoder_vocab_size=len(target_vocab),
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        activation_function=spec.activation_function,
        scale_embedding=spec.scale_embedding,
        share_encoder_decoder_embeddings=not spec.separate_vocabs,
        tie_word_embeddings=spec.tie_word_embeddings,
        pad_token_id=pad_id,
        decoder_start_token_id=pad_id,
        eos_token_id=0,
        forced_eos_token_id=0,
        max_position_embeddings=128,
    )
    torch.manual_seed(seed)
    model = MarianMTModel(config).eval()
    randomize_(model, seed)
    src, tgt = probe_batch(config.vocab_size, config.decoder_vocab_size, 0, pad_id, seed)
    with torch.no_grad():
        logits = model(input_ids=src, decoder_input_ids=tgt).logits
        model.final_logits_bias[0, 0] += eos_logit_boost(logits, eos_id=0)
    model.save_pretrained(directory)
    tokenizer_config: dict[str, Any] = {
        "separate_vocabs": spec.separate_vocabs,
        "tokenizer_class": "MarianTokenizer",
    }
    (directory / "source.spm").write_bytes(source_spm)
    (directory / "target.spm").write_bytes(target_spm)
    (directory / "vocab.json").write_text(json.dumps(source_vocab, ensure_ascii=False), encoding="utf-8")
    if spec.separate_vocabs:
        (directory / "target_vocab.json").write_text(
            json.dumps(target_vocab, ensure_ascii=False), encoding="utf-8"
        )
    (directory / "tokenizer_config.json").write_text(json.dumps(tokenizer_config), encoding="utf-8")
    return directory


def write_our_checkpoint(directory: Path, seed: int = 0, **overrides: Any) -> Path:
    """Save a random model of ours (paper layout: interleaved sinusoids, ReLU) with a joint BPE tokenizer.

    With ``output_bias=True`` the EOS logit is raised so that outputs end at varied lengths.
    """
    tokenizer = Tokenizer.train(
        ENGLISH + GERMAN, directory.parent / f"{directory.name}.model", vocab_size=100
    )
    settings: dict[str, Any] = {
        "vocab_size": tokenizer.vocab_size,
        "d_model": 32,
        "d_ff": 64,
        "num_heads": 4,
        "num_encoder_layers": 2,
        "num_decoder_layers": 2,
        "dropout": 0.0,
        **overrides,
    }
    config = TransformerConfig.from_dict(settings)
    torch.manual_seed(seed)
    model = Transformer(config).eval()
    randomize_(model, seed)
    if model.output_bias is not None:
        src, tgt = probe_batch(
            config.src_vocab_size, config.tgt_vocab_size, config.eos_id, config.start_id, seed
        )
        with torch.no_grad():
            model.output_bias[config.eos_id] += eos_logit_boost(model(src, tgt), config.eos_id)
    return save_checkpoint(directory, model, config, {"tokenizer.model": tokenizer.serialized()})


def pad_batch(sequences: list[list[int]], pad_id: int) -> Tensor:
    """Right-pad token id lists into a (batch, max_len) int64 tensor."""
    width = max(len(ids) for ids in sequences)
    batch = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    for row, ids in enumerate(sequences):
        batch[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return batch


def random_batches(config: TransformerConfig, seed: int) -> tuple[Tensor, Tensor]:
    """A padded source batch (rows ending in EOS) and decoder inputs starting with the start token."""
    generator = torch.Generator().manual_seed(seed)
    special = {config.pad_id, config.eos_id, config.bos_id, config.start_id}
    ordinary_src = [i for i in range(config.src_vocab_size) if i not in special]
    ordinary_tgt = [i for i in range(config.tgt_vocab_size) if i not in special]
    sources, targets = [], []
    for length in (9, 5, 2):
        picks = torch.randint(len(ordinary_src), (length,), generator=generator).tolist()
        sources.append([ordinary_src[i] for i in picks] + [config.eos_id])
        picks = torch.randint(len(ordinary_tgt), (6,), generator=generator).tolist()
        targets.append([config.start_id] + [ordinary_tgt[i] for i in picks])
    return pad_batch(sources, config.pad_id), pad_batch(targets, config.pad_id)


def strip_generated(row: list[int], start_id: int, eos_id: int, pad_id: int) -> list[int]:
    """Turn a ``generate()`` output row into our hypothesis tokens: no start token, nothing from EOS on."""
    tokens = row[1:] if row and row[0] == start_id else row
    if eos_id in tokens:
        tokens = tokens[: tokens.index(eos_id)]
    while tokens and tokens[-1] == pad_id and pad_id != eos_id:
        tokens = tokens[:-1]
    return tokens
