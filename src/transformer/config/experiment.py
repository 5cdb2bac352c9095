"""Everything one training run needs, composed of the sections, and built from nested dictionaries."""

import dataclasses
from dataclasses import dataclass
from typing import Any

from transformer.architectures import ARCHITECTURES, ModelConfig, model_config_from_dict
from transformer.baselines.rnn_config import RNNConfig
from transformer.config.data import DataConfig
from transformer.config.decode import DecodeConfig
from transformer.config.distill import DistillConfig
from transformer.config.ladder import LadderConfig
from transformer.config.train import TrainConfig
from transformer.model.config import TransformerConfig
from transformer.typed_fields import build_dataclass


@dataclass(frozen=True)
class ExperimentConfig:
    """Everything one training run needs: model, data, recipe and decoding settings.

    Parameters
    ----------
    model : TransformerConfig or RNNConfig
        The model (the YAML key ``model.architecture`` picks the class: "transformer", the default, or
        "rnn"); ``vocab_size`` is also the size of the joint BPE vocabulary trained on the data.
    data : DataConfig
        The corpus.
    train : TrainConfig
        The recipe.
    decode : DecodeConfig
        Search settings for evaluation after training.
    ladder : LadderConfig
        Recipes to choose from by measured training speed (none by default).
    distill : DistillConfig
        How ``transformer distill`` makes this model a student of a teacher (read by that command only).

    Notes
    -----
    Built from YAML by :func:`transformer.config.files.load_config`, which expands a model ``preset`` and
    turns every error into a one-line ValueError naming the file and key. Each section validates itself at
    construction, so an ``ExperimentConfig`` built in code is checked too.
    """

    model: TransformerConfig | RNNConfig
    data: DataConfig = DataConfig()
    train: TrainConfig = TrainConfig()
    decode: DecodeConfig = DecodeConfig()
    ladder: LadderConfig = LadderConfig()
    distill: DistillConfig = DistillConfig()

    def to_dict(self) -> dict[str, Any]:
        """Return the nested fields as plain dictionaries.

        Returns
        -------
        dict of str to Any
            ``{"model": {...}, "data": {...}, "train": {...}, "decode": {...}}``.

        Notes
        -----
        Round-trips through :func:`experiment_from_dict`: the model section is written out in full, with no
        ``preset`` key. Every value is a JSON scalar, so the trainer stores this dict in each checkpoint's
        ``trainer_state.json``, from which
        :func:`transformer.checkpoint.model_checkpoint.load_checkpoint` reads ``decode``.
        """
        return dataclasses.asdict(self)


#: Section name -> its dataclass (for ``model`` the default: ``model.architecture`` may pick ``RNNConfig``).
SECTIONS: dict[str, type] = {
    "model": TransformerConfig,
    "data": DataConfig,
    "train": TrainConfig,
    "decode": DecodeConfig,
    "ladder": LadderConfig,
    "distill": DistillConfig,
}


def experiment_from_dict(values: dict[str, Any], source: str = "config") -> ExperimentConfig:
    """Build an :class:`ExperimentConfig` from nested dictionaries.

    Parameters
    ----------
    values : dict of str to Any
        Sections ``model`` (required), ``data``, ``train`` and ``decode``. The model section may name an
        ``architecture`` ("transformer", the default, or "rnn") and, for a Transformer, a ``preset`` ("base",
        "big" or a Table 2 variant such as "C4") whose values the other keys override.
    source : str
        Where the values came from (a file name), for error messages.

    Returns
    -------
    ExperimentConfig
        The validated configuration.

    Notes
    -----
    Every error is a ValueError that starts with ``source`` and names the section and key at fault.
    """
    unknown = sorted(set(values) - set(SECTIONS))
    if unknown:
        raise ValueError(f"{source}: unknown section(s) {unknown}; known: {sorted(SECTIONS)}")
    if "model" not in values:
        raise ValueError(f"{source}: the 'model' section is required (at least model.vocab_size)")
    built: dict[str, Any] = {}
    for section, cls in SECTIONS.items():
        section_values = values.get(section) or {}
        if not isinstance(section_values, dict):
            raise ValueError(f"{source}: section '{section}' must be a mapping, got {section_values!r}")
        try:
            if section == "model":
                built[section] = _model_from_dict(dict(section_values))
            else:
                built[section] = build_dataclass(cls, section_values)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{source}: [{section}] {error}") from None
    return ExperimentConfig(**built)


def _model_from_dict(values: dict[str, Any]) -> ModelConfig:
    architecture = values.get("architecture", ARCHITECTURES[0])
    preset = values.pop("preset", None)
    if architecture != "transformer" and preset is not None:
        raise ValueError(
            f"model.preset={preset!r} names a Transformer; model.architecture={architecture!r} has no presets"
        )
    if preset is None:
        return model_config_from_dict(values)
    values.pop("architecture", None)
    vocab_size = values.pop("vocab_size", 37000)
    if preset == "base":
        return TransformerConfig.base(vocab_size, **values)
    if preset == "big":
        return TransformerConfig.big(vocab_size, **values)
    return TransformerConfig.table2(str(preset), vocab_size, **values)
