import torch

from transformer import Transformer, TransformerConfig
from transformer.decoding.cache_rows import reorder_decoder_cache
from transformer.model.masks import build_padding_mask


def random_batch(config: TransformerConfig, batch: int = 3, src_len: int = 7, tgt_len: int = 6):
    src = torch.randint(4, config.vocab_size, (batch, src_len))
    tgt = torch.randint(4, config.tgt_vocab_size, (batch, tgt_len))
    tgt[:, 0] = config.bos_id
    return src, tgt


def test_cache_reorder_follows_selected_rows(tiny_config) -> None:
    model = Transformer(tiny_config).eval()
    src, tgt = random_batch(tiny_config)
    memory = model.encode(src)
    cache = model.init_decoder_cache(memory, build_padding_mask(src, tiny_config.pad_id))
    model.decode(tgt[:, :2], None, None, cache)
    order = torch.tensor([2, 2, 0])
    reorder_decoder_cache(cache, order)
    next_logits = model.decode(tgt[order, 2:3], None, None, cache)
    expected = model(src[order], tgt[order, :3])[:, 2:3]
    torch.testing.assert_close(next_logits, expected, atol=1e-5, rtol=1e-5)


def test_beams_share_the_encoder_side_of_the_cache(tiny_config) -> None:
    model = Transformer(tiny_config).eval()
    src, tgt = random_batch(tiny_config, batch=3)
    cache = model.init_decoder_cache(model.encode(src), build_padding_mask(src, tiny_config.pad_id))
    beam = 4
    reorder_decoder_cache(cache, torch.arange(3).repeat_interleave(beam))  # batch -> batch x beam
    assert cache.rows_per_source == beam and cache.layers[0].cross_key.size(0) == 3
    expanded_tgt = tgt.repeat_interleave(beam, dim=0)
    first = model.decode(expanded_tgt[:, :1], None, None, cache)
    # Sentence 1 finishes: its beams are dropped; the others' beams are shuffled within their sentence.
    keep = torch.tensor([3, 1, 1, 0, 9, 8, 11, 10])
    reorder_decoder_cache(cache, keep)
    assert cache.rows_per_source == beam and cache.layers[0].cross_key.size(0) == 2
    second = model.decode(expanded_tgt[keep, 1:2], None, None, cache)
    full = model(src.repeat_interleave(beam, dim=0)[keep], expanded_tgt[keep, :2])
    torch.testing.assert_close(second, full[:, 1:2], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(first[keep], full[:, :1], atol=1e-5, rtol=1e-5)


def test_rows_out_of_sentence_order_get_their_own_copy_of_the_source(tiny_config) -> None:
    model = Transformer(tiny_config).eval()
    src, tgt = random_batch(tiny_config, batch=3)
    cache = model.init_decoder_cache(model.encode(src), build_padding_mask(src, tiny_config.pad_id))
    order = torch.tensor([1, 0, 1, 2])  # sentence 1 twice, not consecutive: no shared layout possible
    reorder_decoder_cache(cache, order)
    assert cache.rows_per_source == 1 and cache.layers[0].cross_key.size(0) == 4
    step = model.decode(tgt[order, :1], None, None, cache)
    torch.testing.assert_close(step, model(src[order], tgt[order, :1]), atol=1e-5, rtol=1e-5)
