import torch

from transformer.model.masks import (
    build_causal_mask,
    build_padding_mask,
    build_window_mask,
    combine_attend_masks,
    padding_to_attend_mask,
)


def test_padding_mask_marks_pad_tokens() -> None:
    tokens = torch.tensor([[5, 6, 0, 0], [7, 0, 8, 0]])
    expected = torch.tensor([[False, False, True, True], [False, True, False, True]])
    assert torch.equal(build_padding_mask(tokens, pad_id=0), expected)


def test_padding_to_attend_mask_inverts_and_broadcasts() -> None:
    padding = torch.tensor([[False, True]])
    attend = padding_to_attend_mask(padding)
    assert attend.shape == (1, 1, 1, 2)
    assert attend.tolist() == [[[[True, False]]]]


def test_causal_mask_is_lower_triangular() -> None:
    assert torch.equal(build_causal_mask(4), torch.ones(4, 4, dtype=torch.bool).tril())


def test_causal_mask_for_new_positions_sees_the_whole_past() -> None:
    # Two new queries at positions 3 and 4 over 5 keys.
    mask = build_causal_mask(2, 5)
    assert mask.tolist() == [[True, True, True, True, False], [True, True, True, True, True]]


def test_window_mask_limits_distance_and_optionally_the_future() -> None:
    both_sides = build_window_mask(5, 5, window=1, causal=False)
    assert both_sides[2].tolist() == [False, True, True, True, False]
    causal = build_window_mask(5, 5, window=1, causal=True)
    assert causal[2].tolist() == [False, True, True, False, False]
    last_query = build_window_mask(1, 5, window=2, causal=True)
    assert last_query.tolist() == [[False, False, True, True, True]]


def test_combine_attend_masks() -> None:
    first = torch.tensor([[True, False]])
    second = torch.tensor([[True, True]])
    assert combine_attend_masks(first, None) is first
    assert combine_attend_masks(None, None) is None
    assert combine_attend_masks(first, second).tolist() == [[True, False]]
