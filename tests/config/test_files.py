from pathlib import Path

import pytest
import yaml

from transformer.config.files import REPO_CONFIGS, blame_override, load_config, resolve_config_path
from transformer.model.config import TransformerConfig

CONFIGS = sorted((Path(__file__).parents[2] / "configs").glob("*.yaml"))


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


def test_the_shipped_configs_folder_is_the_repositorys() -> None:
    assert Path(__file__).resolve().parents[2] / "configs" == REPO_CONFIGS


def test_a_config_is_found_by_path_file_name_or_bare_name(tmp_path: Path, monkeypatch) -> None:
    assert resolve_config_path("multi30k") == REPO_CONFIGS / "multi30k.yaml"
    assert resolve_config_path("multi30k.yaml") == REPO_CONFIGS / "multi30k.yaml"
    local = tmp_path / "multi30k.yaml"
    local.write_text("model:\n  vocab_size: 100\n")
    monkeypatch.chdir(tmp_path)
    assert resolve_config_path("multi30k.yaml") == Path("multi30k.yaml")  # a local file wins
    assert resolve_config_path(str(local)) == local


def test_an_unknown_config_name_lists_the_shipped_ones() -> None:
    with pytest.raises(ValueError) as refused:
        resolve_config_path("no-such-config")
    shipped = ", ".join(sorted(path.stem for path in REPO_CONFIGS.glob("*.yaml")))
    assert "multi30k" in shipped
    assert str(refused.value) == f"--config no-such-config: no such file (shipped configs: {shipped})"


def test_the_override_that_breaks_a_config_is_named_by_its_flag(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("model:\n  vocab_size: 100\n  d_model: 32\n  num_heads: 4\n")
    flagged = [
        ("--set model.d_model=40", "model.d_model=40"),
        ("--set model.num_heads=3", "model.num_heads=3"),
    ]
    with pytest.raises(ValueError) as refused:
        load_config(path, [override for _, override in flagged])
    blamed = blame_override(path, flagged, refused.value)
    assert str(blamed).startswith("--set model.num_heads=3: [model] ")
    assert str(path) not in str(blamed)


def test_a_fault_in_the_file_itself_keeps_the_files_error(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("model:\n  vocab_size: 100\nextra: {}\n")
    flagged = [("--set train.max_steps=3", "train.max_steps=3")]
    with pytest.raises(ValueError) as refused:
        load_config(path, ["train.max_steps=3"])
    assert blame_override(path, flagged, refused.value) is refused.value


def test_a_malformed_override_keeps_its_own_message(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("model:\n  vocab_size: 100\n")
    flagged = [("--set train.max_steps", "train.max_steps")]
    with pytest.raises(ValueError) as refused:
        load_config(path, ["train.max_steps"])
    assert str(blame_override(path, flagged, refused.value)) == (
        "--set 'train.max_steps': expected section.key=value, e.g. train.max_steps=2000"
    )
