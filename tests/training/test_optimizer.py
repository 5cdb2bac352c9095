import pytest
import torch

from transformer.config.train import TrainConfig
from transformer.model.config import TransformerConfig
from transformer.model.transformer import Transformer
from transformer.training.optimizer import build_optimizer_and_schedule

CONFIG = TransformerConfig(
    vocab_size=30, d_model=16, d_ff=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=1
)


def learning_rates(recipe: TrainConfig, steps: int) -> list[float]:
    """The rate of each optimizer step 1..steps."""
    optimizer, scheduler = build_optimizer_and_schedule(
        Transformer(CONFIG), CONFIG, recipe, torch.device("cpu")
    )
    rates = []
    for _ in range(steps):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return rates


def test_adam_takes_the_papers_settings_from_the_recipe() -> None:
    optimizer, _ = build_optimizer_and_schedule(
        Transformer(CONFIG), CONFIG, TrainConfig(), torch.device("cpu")
    )
    group = optimizer.param_groups[0]
    assert (group["betas"], group["eps"], group["fused"]) == ((0.9, 0.98), 1e-9, False)


def test_the_rate_is_eq_3_at_the_models_width() -> None:
    # lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), with d_model 16 and warm-up 4.
    expected = [16**-0.5 * min(step**-0.5, step * 4**-1.5) for step in range(1, 7)]
    assert learning_rates(TrainConfig(warmup_steps=4), 6) == pytest.approx(expected)


def test_a_peak_learning_rate_rescales_eq_3_to_peak_there() -> None:
    rates = learning_rates(TrainConfig(warmup_steps=4, peak_learning_rate=1e-3), 6)
    assert max(rates) == pytest.approx(1e-3) and rates.index(max(rates)) == 3  # the last warm-up step
    assert rates[0] == pytest.approx(2.5e-4)
