"""Every numeric field of every config class has a checked range (#48 item 5)."""

import dataclasses
import importlib
import pkgutil
import types
import typing
from pathlib import Path

import pytest

import transformer.config
from tests.conftest import write_tiny_config
from transformer.config.decode import DecodeConfig
from transformer.config.files import blame_override, load_config
from transformer.config.train import TrainConfig
from transformer.model.config import TransformerConfig
from transformer.typed_fields import FieldRange

#: Modules holding config dataclasses outside ``transformer.config`` (whose modules are all found by walking it).
OTHER_CONFIG_MODULES = ("transformer.model.config", "transformer.baselines.rnn_config")
#: The fields a class needs to be built at all; every other field keeps its default.
REQUIRED = {
    "TransformerConfig": {"vocab_size": 100},
    "RNNConfig": {"vocab_size": 100},
    "LadderRung": {"name": "r"},
}


def config_classes() -> list[type]:
    """Every dataclass defined in the config modules."""
    names = [f"transformer.config.{info.name}" for info in pkgutil.iter_modules(transformer.config.__path__)]
    modules = [importlib.import_module(name) for name in (*names, *OTHER_CONFIG_MODULES)]
    return [
        value
        for module in modules
        for value in vars(module).values()
        if isinstance(value, type) and dataclasses.is_dataclass(value) and value.__module__ == module.__name__
    ]


def numeric_fields(cls: type) -> list[str]:
    """The fields annotated int or float (or either or None); bool is not a number here."""
    hints = typing.get_type_hints(cls)
    fields = []
    for item in dataclasses.fields(cls):
        hint = hints[item.name]
        options = (
            typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
        )
        if {option for option in options if option is not type(None)} <= {int, float}:
            fields.append(item.name)
    return fields


def values_outside(bounds: FieldRange) -> list[int | float]:
    """The values just past each end of a range."""
    outside: list[int | float] = []
    if bounds.low is not None:
        outside.append(bounds.low if bounds.low_open else bounds.low - 1)
    if bounds.high is not None:
        outside.append(bounds.high if bounds.high_open else bounds.high + 1)
    return outside


CASES = [
    (cls, name, value)
    for cls in config_classes()
    for name in numeric_fields(cls)
    for value in values_outside(getattr(cls, "FIELD_RANGES", {}).get(name, FieldRange()))
]


def test_the_walk_finds_the_config_classes_and_their_numbers() -> None:
    names = {cls.__name__ for cls in config_classes()}
    assert {
        "TrainConfig",
        "DataConfig",
        "DecodeConfig",
        "LadderRung",
        "TransformerConfig",
        "RNNConfig",
    } <= names
    assert len(CASES) > 60


@pytest.mark.parametrize("cls", config_classes(), ids=lambda cls: cls.__name__)
def test_every_numeric_field_has_a_range(cls: type) -> None:
    # A new numeric field without an entry in FIELD_RANGES fails here.
    assert set(getattr(cls, "FIELD_RANGES", {})) == set(numeric_fields(cls))


@pytest.mark.parametrize(
    ("cls", "name", "value"), CASES, ids=lambda item: getattr(item, "__name__", str(item))
)
def test_a_value_outside_a_fields_range_is_refused_naming_the_field(
    cls: type, name: str, value: float
) -> None:
    with pytest.raises(ValueError) as refused:
        cls(**{**REQUIRED.get(cls.__name__, {}), name: value})
    assert f"{name}={value} must be " in str(refused.value)


@pytest.mark.parametrize(
    ("cls", "values", "message"),
    [
        (
            TrainConfig,
            {"peak_learning_rate": -1},
            "TrainConfig.peak_learning_rate=-1 must be positive or null",
        ),
        (
            TrainConfig,
            {"peak_learning_rate": 0.0},
            "TrainConfig.peak_learning_rate=0.0 must be positive or null",
        ),
        (
            TrainConfig,
            {"learning_rate_scale": -2.0},
            "TrainConfig.learning_rate_scale=-2.0 must be positive",
        ),
        (TrainConfig, {"adam_beta1": 1.0}, "TrainConfig.adam_beta1=1.0 must be in [0, 1)"),
        (TrainConfig, {"adam_beta2": -0.5}, "TrainConfig.adam_beta2=-0.5 must be in [0, 1)"),
        (TrainConfig, {"adam_epsilon": 0.0}, "TrainConfig.adam_epsilon=0.0 must be in (0, 1]"),
        (TrainConfig, {"max_minutes": -5.0}, "TrainConfig.max_minutes=-5.0 must be positive or null"),
        (TrainConfig, {"max_epochs": 0}, "TrainConfig.max_epochs=0 must be positive or null"),
        (TrainConfig, {"seed": -1}, "TrainConfig.seed=-1 must be from 0 to 9223372036854775807"),
        (TrainConfig, {"cooldown_steps": -1}, "TrainConfig.cooldown_steps=-1 must be non-negative"),
        (
            TransformerConfig,
            {"vocab_size": 100, "layer_norm_eps": 0.0},
            "TransformerConfig.layer_norm_eps=0.0 must be in (0, 1]",
        ),
        (
            TransformerConfig,
            {"vocab_size": 100, "pad_id": -1},
            "TransformerConfig.pad_id=-1 must be non-negative",
        ),
        (DecodeConfig, {"length_penalty": -0.6}, "DecodeConfig.length_penalty=-0.6 must be from 0 to 10"),
        (DecodeConfig, {"top_k": -1}, "DecodeConfig.top_k=-1 must be non-negative (0 keeps every token)"),
        (DecodeConfig, {"mbr": -2}, "DecodeConfig.mbr=-2 must be non-negative"),
        (DecodeConfig, {"seed": 2**63}, "DecodeConfig.seed=9223372036854775808 must be from 0 to"),
    ],
)
def test_the_issues_values_are_refused_in_words(cls: type, values: dict, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        cls(**values)
    assert str(refused.value).startswith(message)


def test_the_ends_of_the_ranges_and_the_special_values_in_use_are_accepted() -> None:
    train = TrainConfig(
        peak_learning_rate=1.0,
        adam_beta1=0.0,
        label_smoothing=0.0,
        cooldown_steps=0,
        validate_every=0,
        seed=0,
    )
    assert train.peak_learning_rate == 1.0 and train.seed == 0
    assert (
        TrainConfig(
            learning_rate_scale=100.0, peak_learning_rate=1e30, adam_epsilon=1.0, max_minutes=0.01
        ).max_minutes
        == 0.01
    )
    decode = DecodeConfig(
        length_penalty=10.0, epsilon=0.0, top_k=0, top_p=1.0, max_length_offset=0, min_length=0
    )
    assert decode.length_penalty == 10.0
    assert (
        DecodeConfig(sampling=True, nbest=20_000, epsilon=0.6).nbest == 20_000
    )  # as the sampling tests draw
    assert TransformerConfig(vocab_size=100, dropout=0.0, layer_norm_eps=1.0, pad_id=0).layer_norm_eps == 1.0


def test_a_range_refuses_nan_and_words_each_kind_of_interval() -> None:
    assert not FieldRange(0, 1).contains(float("nan")) and not FieldRange(0).contains(float("nan"))
    assert [FieldRange(0, low_open=True).describe(), FieldRange(0).describe(), FieldRange(2).describe()] == [
        "positive",
        "non-negative",
        "at least 2",
    ]
    assert FieldRange(0.5, low_open=True).describe() == "above 0.5"
    assert [FieldRange(high=3).describe(), FieldRange(high=3, high_open=True).describe()] == [
        "at most 3",
        "below 3",
    ]
    assert FieldRange(0, 1e-3, high_open=True).describe() == "in [0, 0.001)"


def test_an_out_of_range_value_in_a_file_or_a_set_names_the_file_or_the_flag(tmp_path: Path) -> None:
    bad_file = write_tiny_config(tmp_path, "negative.yaml", train={"peak_learning_rate": -1})
    with pytest.raises(ValueError) as refused:
        load_config(bad_file)
    assert str(refused.value) == (
        f"{bad_file}: [train] TrainConfig.peak_learning_rate=-1 must be positive or null"
    )
    good_file = write_tiny_config(tmp_path)
    flagged = [("--set train.label_smoothing=1", "train.label_smoothing=1")]
    with pytest.raises(ValueError) as refused:
        load_config(good_file, [override for _, override in flagged])
    assert str(blame_override(good_file, flagged, refused.value)) == (
        "--set train.label_smoothing=1: [train] TrainConfig.label_smoothing=1 must be in [0, 1)"
    )
