import pytest

from transformer.baselines.rnn_config import RNNConfig
from transformer.config.experiment import ExperimentConfig, experiment_from_dict
from transformer.config.train import TrainConfig
from transformer.model.config import TransformerConfig


def test_to_dict_round_trips_through_experiment_from_dict() -> None:
    experiment = ExperimentConfig(model=TransformerConfig.table2("C4", 1000), train=TrainConfig(max_steps=7))
    values = experiment.to_dict()
    assert "preset" not in values["model"] and values["train"]["max_steps"] == 7
    assert experiment_from_dict(values) == experiment


def test_a_preset_is_expanded_and_the_other_keys_override_it() -> None:
    experiment = experiment_from_dict({"model": {"preset": "big", "vocab_size": 1000, "dropout": 0.2}})
    assert experiment.model == TransformerConfig.big(1000, dropout=0.2)


def test_the_architecture_key_picks_the_recurrent_baseline() -> None:
    experiment = experiment_from_dict({"model": {"architecture": "rnn", "vocab_size": 100}})
    assert isinstance(experiment.model, RNNConfig) and experiment.model.vocab_size == 100


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"model": {"vocab_size": 100}, "trian": {}}, r"run.yaml: unknown section\(s\) \['trian'\]"),
        ({"train": {"max_steps": 1}}, "run.yaml: the 'model' section is required"),
        ({"model": {"vocab_size": 100}, "train": [1]}, "run.yaml: section 'train' must be a mapping"),
        ({"model": {"vocab_size": 100}, "data": {"max_len": 1}}, r"run.yaml: \[data\] DataConfig.max_len=1"),
        (
            {"model": {"architecture": "rnn", "preset": "base", "vocab_size": 100}},
            r"run.yaml: \[model\] model.preset='base' names a Transformer",
        ),
    ],
)
def test_errors_name_the_source_and_the_section(values: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        experiment_from_dict(values, source="run.yaml")
