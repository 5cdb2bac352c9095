import pytest
import torch

from transformer.training.schedule import build_scheduler, inverse_sqrt_learning_rate, scale_for_peak


def test_equation_3_warmup_peak_and_decay() -> None:
    d_model, warmup = 512, 4000
    peak = inverse_sqrt_learning_rate(warmup, d_model, warmup)
    assert peak == pytest.approx((d_model * warmup) ** -0.5)
    assert peak == pytest.approx(6.99e-4, rel=1e-3)
    # Linear warm-up: proportional to the step.
    assert inverse_sqrt_learning_rate(1000, d_model, warmup) == pytest.approx(peak / 4)
    # Inverse square root decay after warm-up.
    assert inverse_sqrt_learning_rate(16000, d_model, warmup) == pytest.approx(peak / 2)
    assert inverse_sqrt_learning_rate(0, d_model, warmup) == inverse_sqrt_learning_rate(1, d_model, warmup)


def test_peak_scaling_and_cooldown() -> None:
    scale = scale_for_peak(2e-3, 256, 800)
    assert inverse_sqrt_learning_rate(800, 256, 800, scale) == pytest.approx(2e-3)
    full = inverse_sqrt_learning_rate(900, 256, 800, scale)
    cooled = inverse_sqrt_learning_rate(900, 256, 800, scale, total_steps=1000, cooldown_steps=200)
    assert cooled == pytest.approx(full * 0.5)
    assert inverse_sqrt_learning_rate(1000, 256, 800, scale, total_steps=1000, cooldown_steps=200) == 0.0


def test_scheduler_sets_optimizer_rate_per_step() -> None:
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.Adam([parameter], lr=1.0)
    scheduler = build_scheduler(optimizer, d_model=512, warmup_steps=4)
    rates = []
    for _ in range(6):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    expected = [inverse_sqrt_learning_rate(step, 512, 4) for step in range(1, 7)]
    assert rates == pytest.approx(expected)
    assert rates.index(max(rates)) == 3  # the peak is at step 4
