import dataclasses

import pytest
import torch

from tests.decoding.oracle_step_model import TableStepModel
from transformer import Transformer, TransformerConfig
from transformer.config.decode import DecodeConfig
from transformer.decoding.beam_search import beam_search
from transformer.decoding.greedy import greedy_search
from transformer.decoding.step_model import TransformerStepModel, as_step_model, inference_context


def source_batch(config: TransformerConfig) -> torch.Tensor:
    src_tokens = torch.randint(4, config.vocab_size, (3, 6))
    src_tokens[:, -1] = config.eos_id
    src_tokens[1, 3], src_tokens[1, 4:] = config.eos_id, config.pad_id
    return src_tokens


def test_cached_and_uncached_steps_give_the_same_log_probs_through_reorders(tiny_config) -> None:
    model = Transformer(tiny_config).eval()
    src_tokens = source_batch(tiny_config)
    cached, uncached = (
        TransformerStepModel(model, use_cache=True),
        TransformerStepModel(model, use_cache=False),
    )
    with torch.inference_mode():
        cached_state, uncached_state = cached.start(src_tokens), uncached.start(src_tokens)
        last_tokens = torch.full((3,), tiny_config.bos_id)
        for row_indices in ([2, 0, 0, 1], [3, 1, 1], [0, 1, 2]):
            cached_log_probs = cached.log_probs(cached_state, last_tokens)
            torch.testing.assert_close(cached_log_probs, uncached.log_probs(uncached_state, last_tokens))
            assert cached_log_probs.dtype == torch.float32
            torch.testing.assert_close(cached_log_probs.logsumexp(dim=-1), torch.zeros(len(last_tokens)))
            indices = torch.tensor(row_indices)
            cached.reorder(cached_state, indices)
            uncached.reorder(uncached_state, indices)
            last_tokens = cached_log_probs.argmax(dim=-1)[indices]
    assert uncached_state.tgt_prefix.shape == (3, 3)
    assert cached_state.cache is not None and cached_state.cache.decoded_len == 3


def test_step_model_uses_the_model_special_ids(tiny_config) -> None:
    config = dataclasses.replace(tiny_config, pad_id=3, bos_id=2, eos_id=1, unk_id=0)
    step_model = as_step_model(Transformer(config), use_cache=True)
    assert isinstance(step_model, TransformerStepModel)
    assert (step_model.pad_id, step_model.bos_id, step_model.eos_id) == (3, 2, 1)
    oracle = TableStepModel({})
    assert as_step_model(oracle, use_cache=False) is oracle


def test_inference_context_restores_each_module_training_flag(tiny_config) -> None:
    model = Transformer(tiny_config).train()
    model.decoder.eval()  # a mixed state must come back as it was
    flags = [module.training for module in model.modules()]
    with inference_context(TransformerStepModel(model)):
        assert not any(module.training for module in model.modules())
        assert torch.is_inference_mode_enabled()
    assert [module.training for module in model.modules()] == flags
    with pytest.raises(RuntimeError, match="inside"), inference_context(TransformerStepModel(model)):
        raise RuntimeError("inside")
    assert [module.training for module in model.modules()] == flags


@pytest.mark.parametrize("search_function", [greedy_search, beam_search])
def test_search_runs_in_eval_mode_and_leaves_training_mode_on(tiny_config, search_function) -> None:
    model = Transformer(dataclasses.replace(tiny_config, dropout=0.3))
    src_tokens = source_batch(tiny_config)
    config = DecodeConfig(max_length_offset=4)
    model.train()
    in_training_mode = search_function(model, src_tokens, config)
    assert model.training and model.decoder.layers[0].feed_forward_residual.training
    model.eval()
    assert search_function(model, src_tokens, config) == in_training_mode  # dropout was off
    assert not model.training
