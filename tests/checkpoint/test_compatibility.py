"""Checkpoints written before the layering change (#15) load, score and translate exactly as they did then.

``tests/fixtures/checkpoints-before-15`` was written by the code of commit 45a3d5c (``make_fixture.py`` there,
run with that commit's ``src`` on the path): a training checkpoint (weights, optimizer, trainer state with
the run's search settings) and an average of two checkpoints (search settings in the weights' metadata),
with ``expected.json`` holding the logits and translations that code computed.
"""

import json
from pathlib import Path

import pytest
import torch

from transformer.checkpoint.layout import CHECKSUM_METADATA_KEY
from transformer.checkpoint.model_checkpoint import load_checkpoint
from transformer.checkpoint.weights import read_weights_metadata
from transformer.config.decode import DecodeConfig
from transformer.decoding.translator import Translator
from transformer.training.checkpoint import load_training_checkpoint

FIXTURE = Path(__file__).parents[1] / "fixtures" / "checkpoints-before-15"
EXPECTED = json.loads((FIXTURE / "expected.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", ["run/checkpoints/step-00000002", "average"])
def test_old_checkpoint_gives_the_same_logits_search_settings_and_translation(name: str) -> None:
    expected = EXPECTED[name]
    checkpoint = load_checkpoint(FIXTURE / name)
    logits = checkpoint.build_model()(
        torch.tensor(EXPECTED["src_tokens"]), torch.tensor(EXPECTED["tgt_tokens"])
    )
    torch.testing.assert_close(logits[0, :, :8], torch.tensor(expected["logits"]), atol=1e-5, rtol=1e-5)
    assert checkpoint.decode_config == DecodeConfig(**expected["decode_config"])
    translator = Translator.from_checkpoint(FIXTURE / name, device="cpu")
    assert translator.translate([EXPECTED["sentence"]]) == [expected["translation"]]


@pytest.mark.parametrize("name", ["run/checkpoints/step-00000002", "average"])
def test_old_checkpoints_have_no_weights_checksum_and_still_load(name: str) -> None:
    # Checksums are recorded since #26; a checkpoint without one is checked for non-finite weights only.
    assert CHECKSUM_METADATA_KEY not in read_weights_metadata(FIXTURE / name / "model.safetensors")
    assert load_checkpoint(FIXTURE / name).weights


def test_a_run_directory_resolves_to_its_best_checkpoint() -> None:
    assert load_checkpoint(FIXTURE / "run").path.name == "step-00000002"


def test_old_training_checkpoint_keeps_its_state_for_resuming() -> None:
    checkpoint = load_training_checkpoint(FIXTURE / "run")
    assert checkpoint.state is not None
    assert (checkpoint.state.step, checkpoint.state.valid_loss, checkpoint.state.best_valid_loss) == (
        2,
        1.0,
        1.0,
    )
    assert checkpoint.state.experiment["decode"]["beam_size"] == 2
    assert checkpoint.state.param_groups[0]["betas"] == [0.9, 0.98]
    assert checkpoint.state.batch_order is None  # written before the sampler's batch order was versioned
    assert {key.rsplit(".", 1)[-1] for key in checkpoint.optimizer_tensors if key.startswith("state.")} == {
        "step",
        "exp_avg",
        "exp_avg_sq",
    }
    assert "rng.cpu.rank0" in checkpoint.optimizer_tensors


def test_an_old_average_has_no_training_state() -> None:
    checkpoint = load_training_checkpoint(FIXTURE / "average")
    assert checkpoint.state is None and checkpoint.optimizer_tensors == {}
