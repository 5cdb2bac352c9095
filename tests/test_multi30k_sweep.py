"""The GPU sweep script (experiments/gpu/multi30k_sweep.py): its specs, their errors, a failed variant."""

import importlib
from pathlib import Path
from types import ModuleType

import pytest

from transformer.config.files import load_config


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
