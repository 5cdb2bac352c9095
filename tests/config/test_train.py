import pytest

from transformer.config.train import TrainConfig


def test_train_config_defaults_are_the_papers() -> None:
    recipe = TrainConfig()
    assert (recipe.adam_beta1, recipe.adam_beta2, recipe.adam_epsilon) == (0.9, 0.98, 1e-9)
    assert recipe.warmup_steps == 4000 and recipe.label_smoothing == 0.1


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"max_steps": 0}, "TrainConfig.max_steps=0 must be positive"),
        ({"validate_every": -1}, "TrainConfig.validate_every=-1 must be non-negative"),
        ({"precision": "fp8"}, "TrainConfig.precision='fp8' is not one of"),
        ({"label_smoothing": 1.0}, r"TrainConfig.label_smoothing=1.0 must be in \[0, 1\)"),
        ({"threads": 0}, "TrainConfig.threads=0 must be positive"),
        ({"clip_norm": 0.0}, "TrainConfig.clip_norm=0.0 must be positive or null"),
        ({"deterministic": True, "max_minutes": 5.0}, "set train.max_minutes to null"),
    ],
)
def test_bad_recipes_are_refused_naming_the_field(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TrainConfig(**fields)
