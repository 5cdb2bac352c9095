"""Researchers' controls on a plan (#29 item 6): explicit seeds, refused row keys, steps that carry the schedule."""

import re
from pathlib import Path

import pytest

from transformer.experiments.attention_scoring import settings as attention_scoring_settings
from transformer.experiments.common.plan import run_config, with_base_overrides
from transformer.experiments.common.planned_runs import plan_runs
from transformer.experiments.positions import settings as positions_settings
from transformer.experiments.table2 import settings as table2_settings
from transformer.experiments.table2.compute import COMPARISON_LENGTH, training_flops_per_pair


def test_explicit_seeds_name_the_runs_and_their_configuration(tmp_path: Path) -> None:
    plan = table2_settings.build_plan("tiny")
    runs = plan_runs(plan, tmp_path, (1, 5, 7), ["base"], "cpu", None)
    assert [run.name for run in runs] == ["base-s1", "base-s5", "base-s7"]
    assert [run.config["train"]["seed"] for run in runs] == [1, 5, 7]
    assert runs[1].run_dir == tmp_path / "runs" / "base-s5"
    assert [run.name for run in plan_runs(plan, tmp_path, 2, ["base"], "cpu", None)] == ["base-s1", "base-s2"]
    with pytest.raises(ValueError, match="seeds must be distinct"):
        plan_runs(plan, tmp_path, (3, 3), ["base"], "cpu", None)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("train.seed=7", "--set train.seed=7: train.seed is set for each run by --seeds; use --seeds (e.g."),
        ("train.device=cuda", "train.device is set for each run by --device"),
        ("train.threads=1", "train.threads is set for each run by --parallel"),
    ],
)
def test_a_set_the_runner_would_overwrite_is_refused(override: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        with_base_overrides(table2_settings.build_plan("cpu"), [override])


@pytest.mark.parametrize(
    ("override", "only", "message"),
    [
        (
            "model.d_model=256",
            None,
            "--set model.d_model: table2 defines it per row (every row sets it)",
        ),
        ("train.label_smoothing=0.2", ["A"], "(rows A1, A2, A3, A4 set it)"),
        ("model.positional_encoding=learned", None, "(row E1 sets it)"),
    ],
)
def test_a_set_that_a_selected_row_defines_is_refused(
    tmp_path: Path, override: str, only: list[str] | None, message: str
) -> None:
    plan = with_base_overrides(table2_settings.build_plan("cpu"), [override])
    with pytest.raises(ValueError, match=re.escape(message)):
        plan_runs(plan, tmp_path, 1, only, "cpu", None)


def test_only_can_leave_out_the_rows_that_define_a_key(tmp_path: Path) -> None:
    plan = with_base_overrides(table2_settings.build_plan("cpu"), ["model.positional_encoding=learned"])
    runs = plan_runs(plan, tmp_path, 1, ["base", "A"], "cpu", None)  # E1 (the only row setting it) left out
    assert {run.config["model"]["positional_encoding"] for run in runs} == {"learned"}


def test_a_set_the_rows_leave_alone_reaches_every_row() -> None:
    plan = with_base_overrides(
        table2_settings.build_plan("cpu"), ["train.max_tokens=1024", "data.mirror=here"]
    )
    for name in ("base", "C4", "big"):
        config = run_config(plan, plan.variant(name), 1)
        assert config["train"]["max_tokens"] == 1024 and config["data"]["mirror"] == "here"


def test_max_steps_scales_warmup_cooldown_and_checkpoints_and_big_keeps_its_factor() -> None:
    plan = table2_settings.build_plan("cpu")
    before = run_config(plan, plan.variant("base"), 1)["train"]
    assert (before["max_steps"], before["warmup_steps"], before["cooldown_steps"]) == (800, 80, 266)
    longer = with_base_overrides(plan, ["train.max_steps=1600"])
    base = run_config(longer, longer.variant("base"), 1)["train"]
    big = run_config(longer, longer.variant("big"), 1)["train"]
    assert (base["max_steps"], base["warmup_steps"], base["cooldown_steps"], base["checkpoint_every"]) == (
        1600,
        160,
        533,
        400,
    )
    assert (big["max_steps"], big["warmup_steps"], big["cooldown_steps"], big["checkpoint_every"]) == (
        4800,
        480,
        1600,
        1200,
    )
    # A schedule key given beside the steps is the researcher's: neither the rule nor big's factor moves it.
    pinned = with_base_overrides(plan, ["train.max_steps=1600", "train.warmup_steps=50"])
    assert run_config(pinned, pinned.variant("base"), 1)["train"]["warmup_steps"] == 50
    assert run_config(pinned, pinned.variant("big"), 1)["train"]["warmup_steps"] == 50
    assert run_config(pinned, pinned.variant("big"), 1)["train"]["cooldown_steps"] == 1600


def test_the_paper_scale_keeps_the_papers_warmup_when_steps_change() -> None:
    plan = with_base_overrides(table2_settings.build_plan("paper"), ["train.max_steps=50000"])
    base = run_config(plan, plan.variant("base"), 1)["train"]
    big = run_config(plan, plan.variant("big"), 1)["train"]
    assert (base["max_steps"], base["warmup_steps"]) == (50000, 4000)
    assert (big["max_steps"], big["warmup_steps"]) == (150000, 4000)


def test_attention_scoring_scales_its_two_checkpoints_with_the_steps() -> None:
    plan = with_base_overrides(attention_scoring_settings.build_plan("cpu"), ["train.max_steps=800"])
    train = run_config(plan, plan.variants[0], 1)["train"]
    assert (train["warmup_steps"], train["cooldown_steps"], train["checkpoint_every"]) == (80, 266, 400)


def test_positions_refuses_a_key_its_length_rows_set_themselves(tmp_path: Path) -> None:
    plan = with_base_overrides(positions_settings.build_plan("cpu"), ["train.max_steps=100"])
    with pytest.raises(ValueError, match="rows length-none, length-sinusoidal, length-learned set it"):
        plan_runs(plan, tmp_path, 1, None, "cpu", None)
    runs = plan_runs(plan, tmp_path, 1, ["multi30k"], "cpu", None)
    assert {run.config["train"]["max_steps"] for run in runs} == {100}


def test_every_table2_scale_states_its_learning_rate_rule() -> None:
    assert (
        "every row trains with the same peak learning rate, 0.002" in table2_settings.build_plan("cpu").notes
    )
    assert "0.0014 at d_model 256" in table2_settings.build_plan("cpu").notes
    assert "follow Eq. (3)'s d_model^-0.5 in every row" in table2_settings.build_plan("paper").notes


def test_method_rows_separate_heads_from_key_width_size_from_steps_and_add_post_norm() -> None:
    for scale in ("tiny", "cpu", "gpu", "paper"):
        plan = table2_settings.build_plan(scale)
        configs = {variant.name: run_config(plan, variant, 1) for variant in plan.variants}
        base = configs["base"]
        for name, heads in (("A1", 1), ("A2", 4), ("A3", 16), ("A4", 32)):
            same = configs[f"{name}-same-dk"]["model"]
            assert same["num_heads"] == heads == configs[name]["model"]["num_heads"]
            assert (same["d_k"], same["d_v"]) == (base["model"]["d_k"], base["model"]["d_v"])
        assert configs["big-same-steps"]["model"] == configs["big"]["model"]
        assert configs["big-same-steps"]["train"] == base["train"]
        assert configs["big"]["train"]["max_steps"] == 3 * base["train"]["max_steps"]
        # big-same-flops: big's model for base's FLOPs (per step, big costs 3.1-3.6x base at every scale).
        same_flops = configs["big-same-flops"]
        assert same_flops["model"] == configs["big"]["model"]
        base_cost = training_flops_per_pair(base["model"], COMPARISON_LENGTH, COMPARISON_LENGTH)
        big_cost = training_flops_per_pair(same_flops["model"], COMPARISON_LENGTH, COMPARISON_LENGTH)
        assert 3.1 < big_cost / base_cost < 3.7
        steps = same_flops["train"]["max_steps"]
        assert steps == max(1, round(base["train"]["max_steps"] * base_cost / big_cost))
        assert abs(steps * big_cost - base["train"]["max_steps"] * base_cost) <= big_cost / 2
        if scale != "paper":  # the short scales' warm-up follows the steps; the paper keeps its 4,000
            assert same_flops["train"]["warmup_steps"] == max(1, steps // 10)
        if scale == "paper":  # the paper's base is post-norm already
            assert "post-norm" not in configs and base["model"]["norm_first"] is False
        else:
            assert configs["post-norm"]["model"] == {**base["model"], "norm_first": False}
    assert [v.name for v in table2_settings.build_plan("cpu").select(["A-same-dk"])] == [
        "A1-same-dk",
        "A2-same-dk",
        "A3-same-dk",
        "A4-same-dk",
    ]
