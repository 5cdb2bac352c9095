"""``transformer experiment positions`` at tiny scale: end to end, and its parts (buckets, swaps, the plan)."""

import copy
from pathlib import Path

import pytest
import torch

from transformer.config.experiment import experiment_from_dict
from transformer.data.corpora.synthetic.generation import generate_pairs
from transformer.evaluation.bleu import score_translations
from transformer.experiments.common.plan import run_config, set_dotted, with_base_overrides
from transformer.experiments.common.planned_runs import plan_runs
from transformer.experiments.common.results import load_sentences, read_results
from transformer.experiments.common.runner import run_experiment
from transformer.experiments.positions.probes import (
    bucket_bounds,
    length_buckets,
    swap_pairs,
    token_permutation,
)
from transformer.experiments.positions.run import cut_learned_table
from transformer.experiments.positions.settings import LENGTH_SCALES, build_plan, length_base
from transformer.experiments.positions.verdicts import render_verdicts
from transformer.experiments.table2 import settings as table2_settings
from transformer.model.config import TransformerConfig
from transformer.model.transformer import Transformer


def test_tiny_experiment_end_to_end(tmp_path: Path) -> None:
    plan = build_plan("tiny")
    only = ["multi30k-none", "length-sinusoidal", "length-learned"]
    reported: list[str] = []
    outcome = run_experiment(
        plan, tmp_path, only=only, report=reported.append, poll_seconds=0.05, allow_dirty=True
    )
    # A failed run's line names its error (the log's last line): shown if it fails, the log itself is gone then.
    assert outcome.finished == [f"{name}-s1" for name in only] and not outcome.failed, "\n".join(reported)
    records = {record["variant"]: record for record in read_results(tmp_path / "results.jsonl")}
    limit = LENGTH_SCALES["tiny"].limit
    per_bucket = LENGTH_SCALES["tiny"].per_bucket

    # The permutation probe: exact (up to rounding) without positions, far from it with them.
    none, sinusoidal, learned = (
        records["multi30k-none"],
        records["length-sinusoidal"],
        records["length-learned"],
    )
    for record in records.values():
        assert record["probe_pairs"] == LENGTH_SCALES["tiny"].probe_pairs
        for key in ("probe_translation_changed", "probe_exact_original", "probe_exact_swapped"):
            assert 0.0 <= record[key] <= 1.0
    assert none["probe_encoder_max_abs_diff"] < 1e-4 < sinusoidal["probe_encoder_max_abs_diff"]
    assert none["probe_translation_changed"] < 0.5
    assert "length_buckets" not in none  # the Multi30k group is not bucketed

    # Length buckets: (0, L], (L, 1.5L], (1.5L, 2L], (2L, 3L] source tokens.
    for record in (sinusoidal, learned):
        assert record["length_limit"] == limit == record["config"]["data"]["max_len"]
        buckets = record["length_buckets"]
        assert [(bucket["low"], bucket["high"]) for bucket in buckets] == bucket_bounds(limit)
        for bucket in buckets:
            assert bucket["sentences"] == per_bucket and bucket["error"] is None
            assert 0.0 <= bucket["bleu"] <= 100.0 and bucket["truncated_share"] == 0.0
    # Learned positions: the full table (rows beyond L untrained) truncates nothing; cut to L rows, the
    # Translator truncates every input beyond L, and the model names its limit for a longer one.
    assert learned["config"]["model"]["max_positions"] == 256
    cut_shares = [bucket["cut_truncated_share"] for bucket in learned["length_buckets"]]
    assert cut_shares == [0.0, 1.0, 1.0, 1.0]
    assert all(0.0 <= bucket["cut_bleu"] <= 100.0 for bucket in learned["length_buckets"])
    assert f"max_positions={limit}" in learned["learned_position_error"]
    assert all("cut_uncapped_error" in bucket for bucket in learned["length_buckets"])
    assert "cut_bleu" not in sinusoidal["length_buckets"][0]

    # Each bucket's translations are kept beside the results (#29), so encodings can be tested against
    # each other bucket by bucket; the generated section pairs them (one seed: provisional).
    for record in (sinusoidal, learned):
        for bucket in record["length_buckets"]:
            kept = load_sentences(tmp_path, record["sentences"][f"length-{bucket['name']}.hypotheses"])
            references = load_sentences(tmp_path, record["sentences"][f"length-{bucket['name']}.references"])
            assert len(kept) == len(references) == per_bucket
            assert score_translations(kept, references).bleu == pytest.approx(bucket["bleu"])
    # The cut table's translations too, on the same references, so it is tested against the sinusoids.
    for bucket in learned["length_buckets"]:
        kept = load_sentences(tmp_path, learned["sentences"][f"cut-length-{bucket['name']}.hypotheses"])
        reference_path = learned["sentences"][f"cut-length-{bucket['name']}.references"]
        assert reference_path == sinusoidal["sentences"][f"length-{bucket['name']}.references"]
        references = load_sentences(tmp_path, reference_path)
        assert score_translations(kept, references).bleu == pytest.approx(bucket["cut_bleu"])
    assert not any(name.startswith("cut-") for name in sinusoidal["sentences"])
    assert "sentences" not in none
    section = render_verdicts(plan, list(records.values()), tmp_path)
    past = [line for line in section.splitlines() if line.startswith("| learned against sinusoids past")]
    assert len(past) == 3 and all("(p " in line and "provisional, 1 seed" in line for line in past)
    cut = [line for line in section.splitlines() if line.startswith("| learned cut to L against sinusoids |")]
    assert len(cut) == 3 and all("(p " in line and "| - | no claim in the paper (" in line for line in cut)
    within = [line for line in section.splitlines() if "(trained lengths)" in line]
    assert len(within) == 1 and within[0].startswith("| learned against sinusoids (row E) | bucket 1-")
    assert "| = |" in within[0] and "(p " in within[0]
    # The probe on both corpora: the Multi30k share from multi30k-none, the grammar shares from length-*.
    sinusoidal_row = next(line for line in section.splitlines() if line.startswith("| sinusoidal |"))
    probe_cells = sinusoidal_row.rstrip(" |").split(" | ")[-3:]
    assert probe_cells == [
        "-",
        f"{sinusoidal['probe_translation_changed']:.3f} (1)",
        f"{sinusoidal['probe_exact_swapped']:.3f} (1)",
    ]
    none_row = next(line for line in section.splitlines() if line.startswith("| none |"))
    assert none_row.rstrip(" |").split(" | ")[-3:][0] == f"{none['probe_translation_changed']:.3f} (1)"

    table = (tmp_path / "table.md").read_text(encoding="utf-8")
    assert "## BLEU per source length" in table and "length-learned, table cut to L" in table
    assert "## Permutation probe" in table and f"max_positions={limit}" in table
    assert (
        next(line for line in table.splitlines() if line.startswith("| multi30k-learned |")).count(" - ") >= 4
    )
    assert (tmp_path / "positions.png").stat().st_size > 1000


def test_bucket_bounds_are_multiples_of_the_limit() -> None:
    assert bucket_bounds(12) == [(0, 12), (12, 18), (18, 24), (24, 36)]
    assert bucket_bounds(20) == [(0, 20), (20, 30), (30, 40), (40, 60)]


def test_length_buckets_fill_in_order_skip_excluded_and_too_long() -> None:
    pairs = [
        (" ".join(["w"] * length) + f" {index}", f"t{index}")
        for index, length in enumerate([1, 5, 3, 9, 7, 2, 4])
    ]
    words = lambda sentence: len(sentence.split())  # noqa: E731 - the length measure under test
    buckets = length_buckets(pairs, words, limit=4, per_bucket=2, exclude=frozenset({pairs[2][0]}))
    assert [(bucket.name, bucket.low, bucket.high) for bucket in buckets] == [
        ("1-4", 0, 4),
        ("5-6", 4, 6),
        ("7-8", 6, 8),
        ("9-12", 8, 12),
    ]
    # Lengths count the index word too: 2, 6, (4 excluded), 10, 8, 3, 5; nothing exceeds 12.
    assert [[target for _, target in bucket.pairs] for bucket in buckets] == [
        ["t0", "t5"],
        ["t1", "t6"],
        ["t4"],
        ["t3"],
    ]
    again = length_buckets(pairs, words, limit=4, per_bucket=2, exclude=frozenset({pairs[2][0]}))
    assert again == buckets


def test_grammar_buckets_are_deterministic_and_disjoint_from_training() -> None:
    candidates = generate_pairs(300, seed=4321)
    training = frozenset(source for source, _ in candidates[:50])
    words = lambda sentence: len(sentence.split())  # noqa: E731
    first = length_buckets(candidates, words, 6, 5, exclude=training)
    assert first == length_buckets(candidates, words, 6, 5, exclude=training)
    for bucket in first:
        assert all(bucket.low < words(source) <= bucket.high for source, _ in bucket.pairs)
        assert not {source for source, _ in bucket.pairs} & training


def test_swap_pairs_swap_subject_and_object() -> None:
    pairs = swap_pairs(40, seed=3)
    assert len(pairs) == 40 == len({pair.english for pair in pairs})
    assert swap_pairs(40, seed=3) == pairs
    for pair in pairs:
        words, swapped = pair.english.rstrip(".").split(), pair.swapped_english.rstrip(".").split()
        assert sorted(words) == sorted(swapped) and words != swapped
        assert words[0] == swapped[0] == "The"
        # "The X verbs the Y." becomes "The Y verbs the X." (verbs may be two words: "looks for").
        splits = [
            (words[1:start], words[start:the], words[the + 1 :])
            for the in range(len(words))
            if words[the] == "the"
            for start in range(2, the)
        ]
        assert any(swapped == ["The", *obj, *verb, "the", *subject] for subject, verb, obj in splits)
        assert pair.german != pair.swapped_german and pair.german[0].isupper()
    # The German references follow the grammar: the object's article is accusative or dative.
    example = next(pair for pair in pairs if " den " in pair.german or " dem " in pair.german)
    assert example.german.split()[0] in {"Der", "Die", "Das"}


def test_token_permutation() -> None:
    assert token_permutation([5, 6, 7, 8], [8, 6, 7, 5]) == [3, 1, 2, 0]
    assert token_permutation([5, 6, 5, 2], [6, 5, 5, 2]) == [1, 0, 2, 3]
    assert token_permutation([5, 6], [5, 7]) is None
    assert token_permutation([5, 6], [5, 6, 6]) is None


def test_cut_learned_table_is_the_same_model_with_fewer_positions() -> None:
    config = TransformerConfig(
        vocab_size=40, d_model=16, d_ff=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=1,
        dropout=0.0, positional_encoding="learned", max_positions=64,
    )  # fmt: skip
    torch.manual_seed(0)
    model = Transformer(config).eval()
    cut = cut_learned_table(model, 8)
    assert cut.config.max_positions == 8 and model.config.max_positions == 64
    src = torch.randint(4, 40, (2, 8))
    tgt = torch.randint(4, 40, (2, 8))
    assert torch.equal(cut(src, tgt), model(src, tgt))
    with pytest.raises(
        ValueError, match="needs position 8 but the learned positional embedding has max_positions=8"
    ):
        cut.encode(torch.randint(4, 40, (1, 9)))


@pytest.mark.parametrize("scale", ["tiny", "cpu", "gpu", "paper"])
def test_plan_groups_and_no_leak_between_bases(scale: str) -> None:
    plan = build_plan(scale)
    assert [variant.name for variant in plan.variants] == [
        f"{group}-{encoding}"
        for group in ("multi30k", "length")
        for encoding in ("none", "sinusoidal", "learned")
    ]
    # The multi30k group is Table 2's base row: its sinusoidal run is table2's base run.
    table2_plan = table2_settings.build_plan(scale)
    assert run_config(plan, plan.variant("multi30k-sinusoidal"), 1) == run_config(
        table2_plan, table2_plan.variant("base"), 1
    )
    learned = run_config(plan, plan.variant("multi30k-learned"), 1)
    assert learned == run_config(table2_plan, table2_plan.variant("E1"), 1)
    # The length group is its own recipe, whatever the Multi30k base sets.
    for encoding in ("none", "sinusoidal", "learned"):
        values = copy.deepcopy(length_base(scale))
        set_dotted(values, "model.positional_encoding", encoding)
        set_dotted(values, "train.seed", 1)
        expected = experiment_from_dict(values).to_dict()
        assert run_config(plan, plan.variant(f"length-{encoding}"), 1) == expected


def test_set_changes_the_multi30k_group_and_passes_unset_keys_to_both(tmp_path: Path) -> None:
    plan = with_base_overrides(build_plan("tiny"), ["train.max_steps=7", "train.precision=fp32"])
    multi30k = run_config(plan, plan.variant("multi30k-none"), 1)
    length = run_config(plan, plan.variant("length-none"), 1)
    assert multi30k["train"]["max_steps"] == 7 and length["train"]["max_steps"] == LENGTH_SCALES["tiny"].steps
    assert multi30k["train"]["precision"] == length["train"]["precision"] == "fp32"
    # Running the length rows with it is refused (#29): they define train.max_steps themselves.
    with pytest.raises(ValueError, match=r"--set train\.max_steps: positions defines it per row"):
        plan_runs(plan, tmp_path, 1, None, "cpu", None)
    assert len(plan_runs(plan, tmp_path, 1, ["multi30k"], "cpu", None)) == 3


def test_unknown_scale_is_refused() -> None:
    with pytest.raises(ValueError, match="--scale huge"):
        build_plan("huge")
