import pytest
import torch
from torch.nn import functional as F

from transformer.model.dropout import Dropout, dropout


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_keeps_one_minus_p_and_preserves_the_expectation(p: float, dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    ones = torch.ones(1000, 1001, dtype=dtype)  # an odd element count: the last 64-bit word is partly used
    dropped = dropout(ones, p, training=True)
    assert dropped.dtype == dtype and dropped.shape == ones.shape
    kept = dropped != 0
    # 1M Bernoulli draws: the standard deviation of the kept fraction is below 0.0005.
    assert abs(kept.float().mean().item() - (1 - p)) < 0.003
    torch.testing.assert_close(
        dropped[kept].float(), torch.full_like(dropped[kept].float(), 1 / (1 - p)), rtol=1e-2, atol=0
    )
    assert abs(dropped.float().mean().item() - 1.0) < 0.01


def test_neighbouring_elements_are_independent() -> None:
    # Four elements share one 64-bit word: their keep decisions must not be correlated.
    torch.manual_seed(1)
    kept = (dropout(torch.ones(250_000, 4), 0.5, training=True) != 0).float()
    correlation = torch.corrcoef(kept.T)
    off_diagonal = correlation[~torch.eye(4, dtype=torch.bool)]
    assert off_diagonal.abs().max() < 0.01


def test_gradient_is_the_same_mask_and_scale() -> None:
    torch.manual_seed(2)
    hidden = torch.randn(64, 33, requires_grad=True)
    output = dropout(hidden, 0.2, training=True)
    output.sum().backward()
    assert hidden.grad is not None
    expected = (output != 0).float() / 0.8
    torch.testing.assert_close(hidden.grad, expected)
    torch.testing.assert_close(output, hidden.detach() * expected)


def test_seeded_runs_repeat_and_eval_mode_is_identity() -> None:
    hidden = torch.randn(8, 16)
    torch.manual_seed(3)
    first = dropout(hidden, 0.3, training=True)
    torch.manual_seed(3)
    assert torch.equal(dropout(hidden, 0.3, training=True), first)
    assert not torch.equal(dropout(hidden, 0.3, training=True), first)
    module = Dropout(0.3).eval()
    assert module(hidden) is hidden
    assert dropout(hidden, 0.0, training=True) is hidden
    assert "p=0.3" in repr(module)


def test_invalid_probability_is_refused() -> None:
    with pytest.raises(ValueError, match=r"p=1\.0"):
        Dropout(1.0)
    with pytest.raises(ValueError, match=r"p=-0\.1"):
        dropout(torch.ones(2), -0.1, training=True)


def test_statistically_like_torch_dropout() -> None:
    # Same keep rate and scale as F.dropout (different random stream, so compare statistics only).
    torch.manual_seed(4)
    ours = dropout(torch.ones(500_000), 0.1, training=True)
    theirs = F.dropout(torch.ones(500_000), 0.1, training=True)
    assert abs((ours != 0).float().mean() - (theirs != 0).float().mean()) < 0.003
    assert ours.max() == theirs.max()
