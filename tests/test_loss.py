import pytest
import torch
from torch.nn import functional as F

from transformer import loss as loss_module
from transformer.loss import label_smoothed_nll_loss


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.3])
def test_matches_torch_cross_entropy_with_label_smoothing(epsilon: float) -> None:
    logits = torch.randn(3, 5, 11)
    target = torch.randint(1, 11, (3, 5))
    target[0, 3:] = 0  # padding
    loss, nll = label_smoothed_nll_loss(logits, target, epsilon, ignore_index=0)
    expected = F.cross_entropy(
        logits.reshape(-1, 11), target.reshape(-1), ignore_index=0, label_smoothing=epsilon, reduction="sum"
    )
    torch.testing.assert_close(loss, expected, atol=1e-4, rtol=1e-5)
    expected_nll = F.cross_entropy(
        logits.reshape(-1, 11), target.reshape(-1), ignore_index=0, reduction="sum"
    )
    torch.testing.assert_close(nll, expected_nll, atol=1e-4, rtol=1e-5)


def test_padding_contributes_nothing() -> None:
    logits = torch.randn(2, 4, 7, requires_grad=True)
    target = torch.tensor([[3, 4, 0, 0], [5, 0, 0, 0]])
    loss, _ = label_smoothed_nll_loss(logits, target, 0.1, ignore_index=0)
    loss.backward()
    assert logits.grad is not None
    assert (logits.grad[0, 2:] == 0).all() and (logits.grad[1, 1:] == 0).all()
    assert logits.grad[0, 0].abs().sum() > 0


def test_smoothing_penalises_overconfidence() -> None:
    # With eps > 0 the loss is minimised by a distribution that is not one-hot: a confident-but-right model
    # pays more than a slightly less confident one, while plain NLL prefers the confident one.
    target = torch.tensor([[2]])
    confident = torch.full((1, 1, 5), -20.0)
    confident[0, 0, 2] = 20.0
    softer = torch.zeros(1, 1, 5)
    softer[0, 0, 2] = 5.0
    smooth_confident, nll_confident = label_smoothed_nll_loss(confident, target, 0.1, ignore_index=0)
    smooth_softer, nll_softer = label_smoothed_nll_loss(softer, target, 0.1, ignore_index=0)
    assert smooth_softer < smooth_confident
    assert nll_confident < nll_softer


def test_bf16_logits_are_scored_in_float32() -> None:
    logits = torch.randn(2, 3, 50)
    target = torch.randint(1, 50, (2, 3))
    loss32, _ = label_smoothed_nll_loss(logits, target, 0.1, 0)
    loss16, _ = label_smoothed_nll_loss(logits.bfloat16(), target, 0.1, 0)
    assert loss16.dtype == torch.float32
    torch.testing.assert_close(loss16, loss32, rtol=2e-2, atol=1e-1)


@pytest.mark.parametrize("epsilon", [0.0, 0.1])
def test_gradient_matches_autograd_through_torch_cross_entropy(epsilon: float) -> None:
    torch.manual_seed(0)
    logits = torch.randn(3, 4, 13, dtype=torch.float64, requires_grad=True)
    target = torch.randint(1, 13, (3, 4))
    target[1, 2:] = 0  # padding
    loss, _ = label_smoothed_nll_loss(logits, target, epsilon, ignore_index=0)
    (2.5 * loss).backward()
    expected_logits = logits.detach().clone().requires_grad_(True)
    expected = F.cross_entropy(
        expected_logits.reshape(-1, 13),
        target.reshape(-1),
        ignore_index=0,
        label_smoothing=epsilon,
        reduction="sum",
    )
    (2.5 * expected).backward()
    assert logits.grad is not None and expected_logits.grad is not None
    torch.testing.assert_close(logits.grad, expected_logits.grad, atol=1e-12, rtol=1e-10)
    assert torch.autograd.gradcheck(
        lambda values: label_smoothed_nll_loss(values, target, epsilon, ignore_index=0)[0],
        (logits.detach().clone().requires_grad_(True),),
    )


def test_chunked_rows_and_bf16_gradient(monkeypatch: pytest.MonkeyPatch) -> None:
    # Many chunks (one row of 50 each): the result must not depend on the chunking.
    torch.manual_seed(0)
    logits = torch.randn(4, 6, 50)
    target = torch.randint(1, 50, (4, 6))
    whole, whole_nll = label_smoothed_nll_loss(logits, target, 0.1, 0)
    monkeypatch.setattr(loss_module, "CHUNK_ELEMENTS", 50)
    bf16_logits = logits.bfloat16().requires_grad_(True)
    chunked, chunked_nll = label_smoothed_nll_loss(bf16_logits, target, 0.1, 0)
    torch.testing.assert_close(chunked, whole, rtol=2e-2, atol=1e-1)
    torch.testing.assert_close(chunked_nll, whole_nll, rtol=2e-2, atol=1e-1)
    chunked.backward()
    assert bf16_logits.grad is not None and bf16_logits.grad.dtype == torch.bfloat16
    reference = logits.clone().requires_grad_(True)
    label_smoothed_nll_loss(reference, target, 0.1, 0)[0].backward()
    assert reference.grad is not None
    torch.testing.assert_close(bf16_logits.grad.float(), reference.grad, rtol=3e-2, atol=1e-2)


def test_chunks_are_cache_sized_on_the_cpu_and_launch_sized_elsewhere() -> None:
    # On a GPU, CPU-sized chunks meant ~5,000 kernel launches per base-model step at 25k tokens.
    cpu_logits = torch.empty(2, 3, 32000)
    gpu_like_logits = torch.empty(2, 3, 32000, device="meta")
    assert loss_module.rows_per_chunk(cpu_logits) == loss_module.CHUNK_ELEMENTS // 32000 == 32
    assert loss_module.rows_per_chunk(gpu_like_logits) == loss_module.ACCELERATOR_CHUNK_ELEMENTS // 32000
    assert loss_module.rows_per_chunk(torch.empty(1, 1, 1 << 27, device="meta")) == 1
