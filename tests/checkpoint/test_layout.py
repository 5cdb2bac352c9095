import json
from pathlib import Path

import pytest

from tests.checkpoint.random_checkpoints import save_random_model
from transformer.checkpoint.layout import CheckpointError, read_index, resolve_checkpoint


def test_a_file_of_a_checkpoint_means_its_directory(tmp_path: Path) -> None:
    save_random_model(tmp_path / "run" / "checkpoints" / "step-00000944", seed=1)
    checkpoint_dir = tmp_path / "run" / "checkpoints" / "step-00000944"
    assert resolve_checkpoint(checkpoint_dir / "model.safetensors") == checkpoint_dir
    assert resolve_checkpoint(checkpoint_dir / "tokenizer.model") == checkpoint_dir
    (tmp_path / "notes.txt").write_text("not a checkpoint\n", encoding="utf-8")
    with pytest.raises(CheckpointError) as refused:
        resolve_checkpoint(tmp_path / "notes.txt")
    assert str(refused.value) == (
        f"{tmp_path / 'notes.txt'}: a file, not a checkpoint; pass a checkpoint directory (holding "
        "model.safetensors) or a run"
    )


@pytest.mark.parametrize("role", ["latest", "best"])
def test_an_index_naming_a_missing_checkpoint_names_it(tmp_path: Path, role: str) -> None:
    checkpoints = tmp_path / "run" / "checkpoints"
    save_random_model(checkpoints / "step-00000500", seed=1)
    index = {"latest": "step-00000944", "best": None, "checkpoints": ["step-00000500", "step-00000944"]}
    if role == "best":
        index = {**index, "latest": "step-00000500", "best": "step-00000944"}
    (checkpoints / "index.json").write_text(json.dumps(index), encoding="utf-8")
    with pytest.raises(CheckpointError) as refused:
        resolve_checkpoint(tmp_path / "run")
    assert str(refused.value) == (
        f"{checkpoints / 'index.json'}: names step-00000944 as the {role} checkpoint, but "
        f"{checkpoints / 'step-00000944'} does not exist (pass another checkpoint directory explicitly)"
    )
    assert resolve_checkpoint(checkpoints / "step-00000500") == checkpoints / "step-00000500"


def test_a_run_means_its_best_checkpoint_else_its_latest(tmp_path: Path) -> None:
    checkpoints = tmp_path / "run" / "checkpoints"
    for name in ("step-00000500", "step-00000944"):
        save_random_model(checkpoints / name, seed=1)
    index = {
        "latest": "step-00000944",
        "best": "step-00000500",
        "checkpoints": ["step-00000500", "step-00000944"],
    }
    (checkpoints / "index.json").write_text(json.dumps(index), encoding="utf-8")
    assert resolve_checkpoint(tmp_path / "run") == checkpoints / "step-00000500"
    assert resolve_checkpoint(checkpoints / "index.json") == checkpoints / "step-00000500"
    (checkpoints / "index.json").write_text(json.dumps({**index, "best": None}), encoding="utf-8")
    assert resolve_checkpoint(checkpoints) == checkpoints / "step-00000944"


def test_a_missing_index_reads_as_empty_and_a_broken_one_is_refused(tmp_path: Path) -> None:
    assert read_index(tmp_path) == {"latest": None, "best": None, "checkpoints": []}
    (tmp_path / "index.json").write_text("{", encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"index.json: not valid JSON"):
        read_index(tmp_path)


@pytest.mark.parametrize(
    ("index", "message"),
    [
        ([], 'expected a JSON object with "latest", "best" and "checkpoints", got []'),
        ({"best": 5}, '"best" must be a checkpoint name or null, got 5'),
        ({"latest": ""}, '"latest" must be a checkpoint name or null, got ""'),
        (
            {"latest": "step-1", "checkpoints": "step-1"},
            '"checkpoints" must be a list of checkpoint names, got "step-1"',
        ),
        (
            {"latest": "step-1", "checkpoints": ["step-1", None]},
            '"checkpoints[1]" must be a checkpoint name or null, got null',
        ),
        ({"latest": "../../elsewhere/step-1"}, "\"latest\" names '../../elsewhere/step-1', which is outside"),
        ({"best": ".."}, "\"best\" names '..', which is outside"),
        ({"latest": "/tmp/step-1"}, "\"latest\" names '/tmp/step-1', which is outside"),
        (
            {"latest": "step-1", "checkpoints": ["sub/step-1"]},
            "\"checkpoints[0]\" names 'sub/step-1', which is outside",
        ),
    ],
)
def test_a_malformed_index_or_one_naming_outside_its_folder_is_refused_in_one_line(
    tmp_path: Path, index: object, message: str
) -> None:
    checkpoints = tmp_path / "run" / "checkpoints"
    save_random_model(checkpoints / "step-1", seed=1)
    save_random_model(tmp_path / "elsewhere" / "step-1", seed=2)
    (checkpoints / "index.json").write_text(json.dumps(index), encoding="utf-8")
    for read in (read_index, resolve_checkpoint):
        with pytest.raises(CheckpointError) as refused:
            read(checkpoints)
        assert str(refused.value).startswith(f"{checkpoints / 'index.json'}: {message}")
        assert "\n" not in str(refused.value)


def test_an_index_naming_a_link_out_of_its_folder_is_refused(tmp_path: Path) -> None:
    checkpoints = tmp_path / "run" / "checkpoints"
    save_random_model(checkpoints / "step-1", seed=1)
    save_random_model(tmp_path / "elsewhere" / "step-2", seed=2)
    (checkpoints / "step-2").symlink_to(Path("..") / ".." / "elsewhere" / "step-2")
    index = {"latest": "step-2", "best": None, "checkpoints": ["step-1", "step-2"]}
    (checkpoints / "index.json").write_text(json.dumps(index), encoding="utf-8")
    with pytest.raises(CheckpointError) as refused:
        resolve_checkpoint(tmp_path / "run")
    assert str(refused.value) == (
        f"{checkpoints / 'index.json'}: \"latest\" names 'step-2', a link to "
        f"{(tmp_path / 'elsewhere' / 'step-2').resolve()}, outside {checkpoints}; an index names only the "
        "checkpoints in its own folder"
    )
    # A link that stays inside the folder is a checkpoint of the run like any other.
    (checkpoints / "step-2").unlink()
    (checkpoints / "step-2").symlink_to("step-1")
    assert resolve_checkpoint(tmp_path / "run") == checkpoints / "step-2"
    assert read_index(checkpoints)["checkpoints"] == ["step-1", "step-2"]
