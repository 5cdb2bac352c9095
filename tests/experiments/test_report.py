"""Generated sections of EXPERIMENTS.md: the committed ones match their records; the verdicts follow the rule."""

import json
import re
from pathlib import Path

import pytest

from transformer.cli import main
from transformer.experiments.common.generated_sections import (
    check_document,
    experiment_of_section,
    replace_section,
    section_markers,
    update_document,
)
from transformer.experiments.common.results import RESULTS_FILE, append_result, read_results, store_sentences
from transformer.experiments.common.runner import TABLE_FILE
from transformer.experiments.registry import build_plan, experiment_part

REPOSITORY = Path(__file__).resolve().parents[2]


def test_the_committed_generated_sections_equal_what_their_records_give() -> None:
    document = REPOSITORY / "EXPERIMENTS.md"
    assert section_markers("table2-cpu")[0] in document.read_text(encoding="utf-8")
    assert check_document(document, REPOSITORY / "experiments") == [], (
        "regenerate with: transformer experiment report NAME --output-dir experiments/SECTION"
    )


def test_the_included_blocks_equal_the_files_they_name() -> None:
    # Tables a benchmark script writes (e.g. experiments/decoding-28/comparison.md) are included verbatim
    # between "<!-- begin included: PATH -->" and "<!-- end included: PATH -->", so no figure is typed by hand.
    text = (REPOSITORY / "EXPERIMENTS.md").read_text(encoding="utf-8")
    included = re.findall(
        r"^<!-- begin included: (\S+) -->\n(.*?)^<!-- end included: \1 -->$", text, re.M | re.S
    )
    assert len(included) == text.count("<!-- begin included: ") >= 1
    for path, body in included:
        assert body == (REPOSITORY / path).read_text(encoding="utf-8"), (
            f"EXPERIMENTS.md: copy {path} in again"
        )


def test_each_committed_table_is_what_its_records_give() -> None:
    # table.md beside each experiment's results.jsonl is rebuilt by the runner after every run; a change to
    # the plan or the renderer without a run would leave it stale (Table 2's did, issue #29).
    checked = []
    for directory in sorted((REPOSITORY / "experiments").iterdir()):
        if not (directory / RESULTS_FILE).exists() or not (directory / TABLE_FILE).exists():
            continue
        name = experiment_of_section(directory.name)
        records = read_results(directory / RESULTS_FILE)
        (scale,) = {str(record["scale"]) for record in records}
        rendered = experiment_part(name, "report").render_table(build_plan(name, scale), records)
        assert rendered == (directory / TABLE_FILE).read_text(encoding="utf-8"), (
            f"{directory.name}/{TABLE_FILE} is stale: rebuild it from {RESULTS_FILE}"
        )
        checked.append(name)
    assert {"table2", "positions", "attention-scoring", "rnn-baseline"} <= set(checked)


def test_a_section_is_replaced_between_its_markers_only() -> None:
    begin, end = section_markers("demo")
    document = f"intro\n{begin}\nold\n{end}\noutro\n"
    assert replace_section(document, "demo", "new\n", "DOC.md") == f"intro\n{begin}\nnew\n{end}\noutro\n"
    for broken in (f"intro\n{begin}\nold\n", f"{end}\n{begin}\n", f"{begin}\n{begin}\n{end}\n"):
        with pytest.raises(
            ValueError, match=re.escape("DOC.md: expected one line '<!-- begin generated: demo -->'")
        ):
            replace_section(broken, "demo", "new\n", "DOC.md")


def _words(count: int, seed: int) -> list[str]:
    return [
        " ".join(f"w{(index * 7 + seed + position) % 50}" for position in range(12)) for index in range(count)
    ]


def _corrupt(sentences: list[str], every: int) -> list[str]:
    """Replace every ``every``-th word: a system worse than the references by a fixed share."""
    return [
        " ".join("zzz" if position % every == 0 else word for position, word in enumerate(sentence.split()))
        for sentence in sentences
    ]


def _record(directory: Path, variant: str, seed: int, hypotheses: list[str], references: list[str]) -> None:
    from transformer.evaluation.bleu import score_translations

    append_result(
        directory / "results.jsonl",
        {
            "experiment": "table2",
            "scale": "tiny",
            "variant": variant,
            "seed": seed,
            "dev_bleu": score_translations(hypotheses, references).bleu,
            "dev_perplexity": 10.0 + seed,
            "params": 1_000_000,  # what table.md shows beside the figures
            "train_seconds": 60.0,
            "commit": "0123abcd",
            "dirty": False,
            "dev_hypotheses": store_sentences(directory, hypotheses),
            "dev_references": store_sentences(directory, references),
        },
    )


def test_generated_verdicts_follow_the_rule_with_three_seeds(tmp_path: Path) -> None:
    experiment_dir = tmp_path / "table2-tiny"
    experiment_dir.mkdir()
    references = _words(150, 0)
    for seed in (1, 2, 3):
        base = _corrupt(references, 4 + seed % 2)  # base: a quarter or a fifth of the words wrong
        _record(experiment_dir, "base", seed, base, references)
        _record(experiment_dir, "A1", seed, _corrupt(references, 2), references)  # half wrong: clearly worse
        _record(experiment_dir, "E1", seed, base, references)  # identical to base: no difference
    _record(experiment_dir, "B1", 1, _corrupt(references, 2), references)  # one seed only
    document = tmp_path / "DOC.md"
    begin, end = section_markers("table2-tiny")
    document.write_text(f"# Results\n{begin}\n{end}\n", encoding="utf-8")

    assert update_document("table2", experiment_dir, document, check=True).changed
    assert document.read_text(encoding="utf-8") == f"# Results\n{begin}\n{end}\n"  # --check writes nothing
    assert update_document("table2", experiment_dir, document, check=False).changed
    rows = {line.split(" | ")[0][2:]: line for line in document.read_text(encoding="utf-8").splitlines()}
    # A1: the paper has one head 0.9 BLEU lower; every seed significantly lower here.
    assert "24.9 (lower)" in rows["A1"] and "**reproduced** (p < 0.05: 0 higher, 3 lower, of 3)" in rows["A1"]
    assert "(3 seeds)" in rows["A1"] and "s1 " in rows["A1"] and "(p < 0.001)" in rows["A1"]
    # E1: the paper shows no difference (25.7 against 25.8); identical translations, none significant.
    assert "25.7 (=)" in rows["E1"] and "**reproduced** (p < 0.05: 0 higher, 0 lower, of 3)" in rows["E1"]
    # B1: one seed is provisional, and says so; rows without records are named in one line, not tabled.
    assert "(1 seed)" in rows["B1"] and "provisional, 1 seed: reproduced" in rows["B1"]
    not_run = "Not run in this directory: A2, A3, A4, B2, C1,"
    assert "C1" not in rows and not_run in document.read_text(encoding="utf-8")
    assert not update_document("table2", experiment_dir, document, check=True).changed
    assert check_document(document, tmp_path) == []


def test_a_record_without_a_key_the_report_reads_is_named_not_a_traceback(tmp_path: Path) -> None:
    experiment_dir = tmp_path / "table2-tiny"
    experiment_dir.mkdir()
    references = _words(20, 0)
    _record(experiment_dir, "base", 1, references, references)
    results = experiment_dir / RESULTS_FILE
    damaged = json.loads(results.read_text(encoding="utf-8"))
    del damaged["dev_bleu"]
    results.write_text(json.dumps(damaged) + "\n", encoding="utf-8")
    document = tmp_path / "DOC.md"
    begin, end = section_markers("table2-tiny")
    document.write_text(f"{begin}\n{end}\n", encoding="utf-8")
    with pytest.raises(
        ValueError, match=r"table2-tiny/results\.jsonl: a record lacks 'dev_bleu', which the table2"
    ):
        update_document("table2", experiment_dir, document, check=False)
    assert document.read_text(encoding="utf-8") == f"{begin}\n{end}\n"


def test_the_report_command_checks_writes_and_refuses_training_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    experiment_dir = tmp_path / "table2-tiny"
    experiment_dir.mkdir()
    references = _words(20, 0)
    _record(experiment_dir, "base", 1, references, references)
    document = tmp_path / "DOC.md"
    begin, end = section_markers("table2-tiny")
    document.write_text(f"{begin}\n{end}\n", encoding="utf-8")
    command = [
        "experiment",
        "report",
        "table2",
        "--output-dir",
        str(experiment_dir),
        "--document",
        str(document),
    ]
    table = experiment_dir / TABLE_FILE
    assert main([*command, "--check"]) == 1
    assert f"section table2-tiny and {table} differ from" in capsys.readouterr().err
    assert not table.exists()  # --check writes nothing
    assert main(command) == 0
    assert f"section table2-tiny rewritten; {table} rebuilt" in capsys.readouterr().out
    rebuilt = table.read_text(encoding="utf-8")
    assert "| base |" in rebuilt and "| big-same-flops |" in rebuilt
    assert main([*command, "--check"]) == 0
    # A table left stale by a plan that gained a row (the section still current) is found and rebuilt too.
    table.write_text(rebuilt.replace("| big-same-flops |", "| big-same-fops |"), encoding="utf-8")
    assert main([*command, "--check"]) == 1 and f"{table} differs from" in capsys.readouterr().err
    assert main(command) == 0 and "already current; " in capsys.readouterr().out
    assert table.read_text(encoding="utf-8") == rebuilt
    assert main([*command, "--seeds", "3"]) == 2
    assert capsys.readouterr().err.strip() == (
        "transformer experiment: error: report reads records, it trains nothing: --seeds does not apply"
    )
    assert (
        main(
            [
                "experiment",
                "report",
                "positions",
                "--output-dir",
                str(experiment_dir),
                "--document",
                str(document),
            ]
        )
        == 2
    )
    assert "records of table2, not of positions" in capsys.readouterr().err
    assert main(["experiment", "table2", "--document", str(document)]) == 2
    assert (
        "table2 trains or measures, it does not report: --document does not apply" in capsys.readouterr().err
    )
    json.loads((experiment_dir / "results.jsonl").read_text(encoding="utf-8"))  # untouched, still one record


def test_attention_scoring_claims_pair_scorings_at_the_same_width(tmp_path: Path) -> None:
    experiment_dir = tmp_path / "attention-scoring-tiny"
    experiment_dir.mkdir()
    references = _words(150, 0)
    for seed in (1, 2, 3):
        for width in (4, 8, 16, 32, 64, 128, 256):
            _record_scoring(experiment_dir, f"sqrt-dk{width}", seed, _corrupt(references, 5), references)
            _record_scoring(experiment_dir, f"unscaled-dk{width}", seed, _corrupt(references, 2), references)
    begin, end = section_markers("attention-scoring-tiny")
    document = tmp_path / "DOC.md"
    document.write_text(f"{begin}\n{end}\n", encoding="utf-8")
    update_document("attention-scoring", experiment_dir, document, check=False)
    lines = document.read_text(encoding="utf-8").splitlines()
    unscaled = [line for line in lines if line.startswith("| unscaled against 1/sqrt(d_k)")]
    assert len(unscaled) == 7 and all("| lower | **reproduced** (" in line for line in unscaled)
    additive = [line for line in lines if line.startswith("| additive against unscaled")]
    assert all(line.endswith("| not run |") for line in additive)
    assert any(line.startswith("| q.k: saturated rows at initialisation | 0.100 (3) |") for line in lines)
    # Entropy for every scoring, the ones without records shown as such.
    entropy = "softmax entropy at initialisation (nats)"
    assert f"| q.k / sqrt(d_k): {entropy} | " + " | ".join(["1.20 (3)"] * 7) + " |" in lines
    assert f"| additive: {entropy} | " + " | ".join(["-"] * 7) + " |" in lines


def _record_scoring(
    directory: Path, variant: str, seed: int, hypotheses: list[str], references: list[str]
) -> None:
    from transformer.evaluation.bleu import score_translations

    append_result(
        directory / "results.jsonl",
        {
            "experiment": "attention-scoring",
            "scale": "tiny",
            "variant": variant,
            "seed": seed,
            "dev_bleu": score_translations(hypotheses, references).bleu,
            "init_saturated_share": 0.1,
            "init_entropy": 1.0 + seed / 10,  # 1.1, 1.2, 1.3: mean 1.2
            "commit": "0123abcd",
            "dev_hypotheses": store_sentences(directory, hypotheses),
            "dev_references": store_sentences(directory, references),
        },
    )


def test_a_section_names_its_experiment_by_the_longest_prefix() -> None:
    assert experiment_of_section("table2-cpu-3seeds") == "table2"
    assert experiment_of_section("attention-scoring-cpu") == "attention-scoring"
    with pytest.raises(ValueError, match="starts with no experiment's name"):
        experiment_of_section("table9-cpu")
