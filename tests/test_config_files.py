import importlib
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from transformer.config import TrainConfig, load_config
from transformer.model.config import TransformerConfig

CONFIGS = sorted((Path(__file__).parents[1] / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda path: path.stem)
def test_shipped_configs_load_with_every_value_the_file_writes(path: Path) -> None:
    """Each value a shipped file sets arrives in the config as written: none ignored, renamed or converted."""
    experiment = load_config(path).to_dict()
    written = yaml.safe_load(path.read_text(encoding="utf-8"))
    compared = 0
    for section in ("model", "data", "train", "decode"):
        for key, value in written.get(section, {}).items():
            if key == "preset":  # expanded into the model's fields, checked below
                continue
            loaded = experiment[section][key]
            assert loaded == (list(value) if isinstance(value, tuple) else value) or (
                isinstance(loaded, float) and loaded == pytest.approx(value)
            ), f"{path.name}: {section}.{key} is {loaded!r}, the file says {value!r}"
            compared += 1
    assert compared >= 5
    preset = written.get("model", {}).get("preset")
    if preset in ("base", "big"):
        built = getattr(TransformerConfig, preset)(vocab_size=written["model"]["vocab_size"])
        for field in ("d_model", "d_ff", "num_heads", "num_encoder_layers", "num_decoder_layers", "dropout"):
            assert experiment["model"][field] == getattr(built, field), f"{path.name}: model.{field}"


def test_overrides_and_presets(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("model:\n  preset: base\n  vocab_size: 1000\ntrain:\n  max_steps: 5\n")
    experiment = load_config(path, ["train.max_steps=7", "model.dropout=0.3", "train.clip_norm=null"])
    assert experiment.train.max_steps == 7
    assert experiment.model.d_model == 512 and experiment.model.dropout == 0.3
    path.write_text("model:\n  preset: C4\n  vocab_size: 1000\n")
    assert load_config(path).model.d_model == 256


def test_exponent_floats_without_a_dot_are_numbers(tmp_path: Path) -> None:
    # PyYAML (YAML 1.1) reads "1e-3" as a string; users write it on the command line and in files.
    path = tmp_path / "x.yaml"
    path.write_text("model:\n  vocab_size: 100\n  dropout: 3e-1\ntrain:\n  peak_learning_rate: 2E-3\n")
    experiment = load_config(path, ["train.adam_epsilon=1e-8", "data.source_lang=1e5x"])
    assert experiment.model.dropout == pytest.approx(0.3)
    assert experiment.train.peak_learning_rate == pytest.approx(2e-3)
    assert experiment.train.adam_epsilon == pytest.approx(1e-8)
    assert experiment.data.source_lang == "1e5x"


@pytest.mark.parametrize(
    ("text", "overrides", "message"),
    [
        ("model:\n  vocab_size: 100\n  colour: red\n", [], r"x.yaml: \[model\] unknown option"),
        (
            "model:\n  vocab_size: 100\ntrain:\n  max_steps: -1\n",
            [],
            r"x.yaml: \[train\] TrainConfig.max_steps=-1",
        ),
        ("model:\n  vocab_size: 100\ntrian:\n  max_steps: 1\n", [], r"unknown section\(s\) \['trian'\]"),
        ("model: [\n", [], "not valid YAML"),
        ("train:\n  max_steps: 1\n", [], "'model' section is required"),
        ("model:\n  vocab_size: 100\n", ["train.max_steps"], "expected section.key=value"),
        ("model:\n  vocab_size: 100\n", ["train.precision=fp8"], "precision='fp8'"),
        ("model:\n  vocab_size: 100\n", ["train.max_steps=many"], "max_steps='many'"),
        (
            "model:\n  vocab_size: 100\n",
            ["decode.length_penalty=.nan"],
            r"\[decode\] DecodeConfig.length_penalty=nan must be a finite number",
        ),
        (
            "model:\n  vocab_size: 100\ntrain:\n  peak_learning_rate: .inf\n",
            [],
            r"x.yaml: \[train\] TrainConfig.peak_learning_rate=inf must be a finite number",
        ),
        (
            "model:\n  vocab_size: 100\n  dropout: .nan\n",
            [],
            r"TransformerConfig.dropout=nan must be a finite",
        ),
    ],
)
def test_bad_configs_name_the_file_and_key(
    tmp_path: Path, text: str, overrides: list[str], message: str
) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_config(path, overrides)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "model:\n  vocab_size: 100\n  layers: [1, 2\ntrain:\n  max_steps: 3\n",
            "x.yaml:4:6: not valid YAML: expected ',' or ']', but got ':' "
            "(while parsing a flow sequence at line 3, column 11)",
        ),
        (
            "model:\n  vocab_size: 100\n\tdropout: 0.1\n",
            "x.yaml:3:1: not valid YAML: found character '\\t' that cannot start any token "
            "(while scanning for the next token)",
        ),
        ("model: vocab_size: 100\n", "x.yaml:1:18: not valid YAML: mapping values are not allowed here"),
    ],
)
def test_a_yaml_syntax_error_keeps_its_line_and_column(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(ValueError) as refused:
        load_config(path)
    assert str(refused.value) == f"{tmp_path}/{message}"


def test_missing_file() -> None:
    with pytest.raises(ValueError, match="cannot read config"):
        load_config("/nonexistent/config.yaml")


def test_train_config_defaults_are_the_papers() -> None:
    recipe = TrainConfig()
    assert (recipe.adam_beta1, recipe.adam_beta2, recipe.adam_epsilon) == (0.9, 0.98, 1e-9)
    assert recipe.warmup_steps == 4000 and recipe.label_smoothing == 0.1


def load_sweep_module() -> ModuleType:
    return importlib.import_module("experiments.gpu.multi30k_sweep")  # a package since #15


SWEEP_SPECS = sorted((Path(__file__).parents[1] / "experiments" / "gpu" / "sweeps").glob("*.txt"))


@pytest.mark.parametrize("path", SWEEP_SPECS, ids=lambda path: path.stem)
def test_sweep_specs_are_valid_overrides_of_the_multi30k_config(path: Path) -> None:
    # A misspelt key in a spec would only fail on the GPU, minutes into a sweep.
    variants = load_sweep_module().read_spec(path)
    assert variants
    for name, arguments in variants:
        assert arguments[::2] == ["--set"] * (len(arguments) // 2) and len(arguments) % 2 == 0, name
        experiment = load_config(Path(__file__).parents[1] / "configs" / "multi30k.yaml", arguments[1::2])
        assert experiment.data.corpus == "multi30k", name


def test_sweep_spec_rejects_a_repeated_run_name(tmp_path: Path) -> None:
    path = tmp_path / "spec.txt"
    path.write_text("# comment\n\nbase --set train.seed=2\nbase --set train.seed=3\n")
    with pytest.raises(SystemExit, match=r"spec.txt:4: run name 'base' repeated"):
        load_sweep_module().read_spec(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, r"missing.txt: cannot read the spec"),
        ("ok --set 'train.seed=2\n", r"spec.txt:1: No closing quotation"),
    ],
)
def test_sweep_spec_errors_name_the_file(tmp_path: Path, text: str | None, message: str) -> None:
    path = tmp_path / ("missing.txt" if text is None else "spec.txt")
    if text is not None:
        path.write_text(text)
    with pytest.raises(SystemExit, match=message):
        load_sweep_module().read_spec(path)


def test_sweep_variant_that_fails_to_train_ends_with_a_line_naming_its_log(
    tmp_path: Path, write_config
) -> None:
    # A failed step ends its variant with one line; the sweep's other variants go on.
    config = write_config(tmp_path)
    result = load_sweep_module().run_variant("bad", ["--set", "model.colour=red"], config, tmp_path, tmp_path)
    assert result == "bad: training failed (exit 2), see bad.log"
    assert "colour" in (tmp_path / "bad.log").read_text(encoding="utf-8")
    assert not (tmp_path / "scores.jsonl").exists()
