import pytest

from transformer.config.ladder import LadderConfig, LadderRung


def test_rungs_may_not_change_the_data_or_the_vocabulary() -> None:
    with pytest.raises(ValueError, match=r"override 'data.max_len=50' may only change model, train, decode"):
        LadderRung("x", 0, ("data.max_len=50",))
    with pytest.raises(ValueError, match=r"'model.vocab_size=8000' may only change"):
        LadderRung("x", 0, ("model.vocab_size=8000",))
    with pytest.raises(ValueError, match=r"choose='huge' is not one of \['auto', 'none', 'a'\]"):
        LadderConfig("huge", (LadderRung("a"),))
    with pytest.raises(ValueError, match="names must be unique"):
        LadderConfig("auto", (LadderRung("a"), LadderRung("a")))


def test_rungs_given_as_mappings_become_rungs() -> None:
    ladder = LadderConfig(
        "small", ({"name": "small", "min_target_tokens": 5, "overrides": ["train.seed=2"]},)
    )
    assert ladder.rungs == (LadderRung("small", 5, ("train.seed=2",)),)


@pytest.mark.parametrize("name", ["", "auto", "none"])
def test_a_rung_may_not_take_a_choice_keyword_as_its_name(name: str) -> None:
    with pytest.raises(ValueError, match=f"rung name {name!r} must be non-empty and not one of"):
        LadderRung(name)
