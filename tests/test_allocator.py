"""tcmalloc under the commands that compute: the rule, the opt-out, and a real re-execution of the command."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from transformer.allocator import (
    ALLOCATOR_VARIABLE,
    PRELOADED_VARIABLE,
    allocator_note,
    find_tcmalloc,
    preload_command,
)

LIBRARY = Path("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4")


def test_the_commands_that_compute_are_preloaded_and_the_rest_are_not() -> None:
    environment = {"PATH": "/usr/bin"}
    for command in (["train", "--config", "x.yaml"], ["translate", "--checkpoint", "run"], ["quickstart"]):
        preloaded = preload_command(command, environment, LIBRARY)
        assert preloaded is not None
        assert preloaded["LD_PRELOAD"] == str(LIBRARY) and preloaded[PRELOADED_VARIABLE] == str(LIBRARY)
        assert preloaded["PATH"] == "/usr/bin"
    for command in (["--help"], ["convert", "--to", "hf-marian"], ["plot", "run"], []):
        assert preload_command(command, environment, LIBRARY) is None


def test_the_opt_out_an_existing_preload_and_a_missing_library_run_as_is() -> None:
    train = ["train", "--config", "x.yaml"]
    assert preload_command(train, {ALLOCATOR_VARIABLE: "system"}, LIBRARY) is None
    assert preload_command(train, {"LD_PRELOAD": "/opt/libtcmalloc.so"}, LIBRARY) is None
    assert preload_command(train, {PRELOADED_VARIABLE: str(LIBRARY)}, LIBRARY) is None  # no loop
    assert preload_command(train, {}, None) is None
    # Another preloaded library is kept, after tcmalloc.
    kept = preload_command(train, {"LD_PRELOAD": "/opt/libother.so"}, LIBRARY)
    assert kept is not None and kept["LD_PRELOAD"] == f"{LIBRARY} /opt/libother.so"
    with pytest.raises(ValueError, match="TRANSFORMER_ALLOCATOR='jemalloc': expected 'system' or 'tcmalloc'"):
        preload_command(train, {ALLOCATOR_VARIABLE: "jemalloc"}, LIBRARY)


def test_find_tcmalloc_takes_the_first_installed(tmp_path: Path) -> None:
    present = tmp_path / "libtcmalloc.so.4"
    present.write_bytes(b"")
    assert find_tcmalloc((tmp_path / "missing.so", present)) == present
    assert find_tcmalloc((tmp_path / "missing.so",)) is None


def test_the_note_names_the_library_only_when_the_entry_point_preloaded_it() -> None:
    note = allocator_note({PRELOADED_VARIABLE: str(LIBRARY), "LD_PRELOAD": str(LIBRARY)})
    assert note == (
        f"allocator: tcmalloc ({LIBRARY}), preloaded by transformer; "
        "TRANSFORMER_ALLOCATOR=system keeps the system allocator"
    )
    assert allocator_note({"LD_PRELOAD": str(LIBRARY)}) is None  # the user's own preload: nothing to say
    assert allocator_note({}) is None


@pytest.mark.skipif(
    find_tcmalloc() is None, reason="tcmalloc is not installed (Debian: libtcmalloc-minimal4)"
)
@pytest.mark.skipif(
    shutil.which("transformer") is None, reason="the transformer console script is not installed"
)
def test_the_command_reexecutes_itself_under_tcmalloc_and_training_logs_it(
    tmp_path: Path, write_config
) -> None:
    config = write_config(tmp_path, train={"max_steps": 2, "validate_every": 0, "checkpoint_every": 0})
    environment = {
        key: value for key, value in os.environ.items() if key not in ("LD_PRELOAD", PRELOADED_VARIABLE)
    }
    environment["PYTHONPATH"] = os.pathsep.join(sys.path)  # this checkout's package, whatever pip installed
    command = [
        shutil.which("transformer") or "",
        "train",
        "--config",
        str(config),
        "--output-dir",
        str(tmp_path / "run"),
    ]
    result = subprocess.run(
        command, env=environment, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert f"allocator: tcmalloc ({find_tcmalloc()}), preloaded by transformer" in result.stderr
    environment[ALLOCATOR_VARIABLE] = "system"
    command[-1] = str(tmp_path / "system-run")
    result = subprocess.run(
        command, env=environment, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "allocator:" not in result.stderr
    environment[ALLOCATOR_VARIABLE] = "jemalloc"
    result = subprocess.run(
        command, env=environment, capture_output=True, text=True, timeout=120, check=False
    )
    assert (result.returncode, result.stderr) == (
        2,
        "transformer: error: TRANSFORMER_ALLOCATOR='jemalloc': expected 'system' or 'tcmalloc'\n",
    )
