"""The decoding comparison of issue #28 (benchmarks/compare_decoding.py): rows, report and resuming."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from benchmarks import compare_decoding
from transformer.evaluation.bleu import score_translations
from transformer.experiments.common.results import load_sentences

REPOSITORY = Path(__file__).resolve().parents[2]


def test_compare_decoding_writes_rows_and_resumes(
    trained_run: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    output = tmp_path / "comparison.json"
    arguments = ["--checkpoint", str(trained_run), "--ensemble", str(trained_run), "--source",
                 str(trained_run / "data" / "valid.en"), "--reference", str(trained_run / "data" / "valid.de"),
                 "--mbr", "2", "--limit", "4", "--output", str(output)]  # fmt: skip
    assert compare_decoding.main(arguments) == 0
    report = json.loads(output.read_text())
    names = [row["name"] for row in report["rows"]]
    assert names == [
        f"beam 4: {trained_run}",
        f"MBR 2 (sampling eps 0.02, chrF): {trained_run}",
        f"MBR 2 (beam n-best, chrF): {trained_run}",
        f"ensemble of 2 (prob), beam 4: {trained_run} {trained_run}",
    ]
    assert report["rows"][1]["search"]["mbr"] == 2 and report["rows"][1]["search"]["epsilon"] == 0.02
    assert report["sentences"] == 4 and [row["run"] for row in report["rows"]] == [1, 1, 1, 1]
    (run,) = report["runs"]
    assert run["command"] == "python -m benchmarks.compare_decoding " + " ".join(arguments)
    assert run["threads"] >= 1 and run["cpu"]
    markdown = output.with_suffix(".md").read_text()
    assert markdown.startswith(f"Run 1: `{run['command']}` ({run['date']}, ")
    assert "| method | BLEU |" in markdown and "| run | against | BLEU diff. (p) |" in markdown
    # Each row's translations are kept (hash-named) and each non-baseline row is tested against its baseline.
    references = load_sentences(tmp_path, report["references"])
    assert (
        len(references) == 4
        and references[0] == (trained_run / "data" / "valid.de").read_text().split("\n")[0]
    )
    baseline = report["rows"][0]
    assert "paired" not in baseline and baseline["baselines"] == []
    for row in report["rows"][1:]:
        assert len(load_sentences(tmp_path, row["hypotheses"])) == 4
        assert row["baselines"] == [baseline["name"]] and row["paired"]["baseline"] == baseline["name"]
        for metric, score in (("BLEU", "bleu"), ("chrF", "chrf")):
            assert row["paired"][metric]["difference"] == pytest.approx(
                row[score] - baseline[score], abs=0.02
            )
            assert 0 < row["paired"][metric]["p_value"] <= 1

    def must_not_run(*args: object) -> None:
        pytest.fail("a finished row was measured again")

    monkeypatch.setattr(compare_decoding, "measure", must_not_run)
    assert compare_decoding.main(arguments) == 0
    resumed = json.loads(output.read_text())
    assert [row["name"] for row in resumed["rows"]] == names
    assert resumed["runs"] == [run]  # a run that measured nothing is not recorded
    # A later run that adds rows is recorded as run 2 and its rows say so; the earlier rows keep run 1.
    monkeypatch.setattr(
        compare_decoding, "measure", lambda method, *rest: {**report["rows"][0], "name": method.name}
    )
    more_candidates = [
        *arguments[: arguments.index("--mbr") + 2],
        "3",
        *arguments[arguments.index("--limit") :],
    ]
    assert compare_decoding.main(more_candidates) == 0
    extended = json.loads(output.read_text())
    assert [row["run"] for row in extended["rows"]] == [1, 1, 1, 1, 2, 2]
    assert len(extended["runs"]) == 2 and extended["runs"][0] == run


@pytest.mark.parametrize("record", ["comparison.json", "backtranslation.json"])
def test_the_committed_comparison_is_what_its_translations_and_json_give(record: str) -> None:
    # The records of issue #28 (experiments/decoding-28): every score recomputed from the kept translations,
    # one paired test run again, and the Markdown table rendered again from the JSON.
    directory = REPOSITORY / "experiments" / "decoding-28"
    report = json.loads((directory / record).read_text(encoding="utf-8"))
    references = load_sentences(directory, report["references"])
    assert len(references) == report["sentences"] == 1014
    for row in report["rows"]:
        scores = score_translations(load_sentences(directory, row["hypotheses"]), references)
        assert (round(scores.bleu, 2), round(scores.chrf, 2)) == (row["bleu"], row["chrf"]), row["name"]
    tested = next(row for row in report["rows"] if row.get("paired"))
    assert (
        compare_decoding.paired_against_baseline(tested, report["rows"], references, directory)
        == tested["paired"]
    )
    markdown = (directory / record).with_suffix(".md").read_text(encoding="utf-8")
    assert markdown == compare_decoding.render_markdown(report)


def test_against_previous_tests_each_model_against_the_one_listed_before_it() -> None:
    # Back-translation's ladder (half the pairs, half + back-translation, all the pairs): each model's beam
    # row is read against the previous one's; without the option beam rows are baselines only.
    ladder = ["runs/half", "runs/half-plus-bt", "runs/full"]
    methods = compare_decoding.plan_methods(ladder, [], [], against_previous=True)
    assert [(method.name, method.baselines) for method in methods] == [
        ("beam 4: runs/half", ()),
        ("beam 4: runs/half-plus-bt", ("beam 4: runs/half",)),
        ("beam 4: runs/full", ("beam 4: runs/half-plus-bt",)),
    ]
    assert all(method.config == compare_decoding.BEAM_4 for method in methods)
    plain = compare_decoding.plan_methods(ladder, [], [2])
    assert [method.baselines for method in plain[:3]] == [(), (), ()]
    assert plain[3].name == "MBR 2 (sampling eps 0.02, chrF): runs/half" and plain[3].baselines == (
        "beam 4: runs/half",
    )


def test_a_report_from_before_runs_were_recorded_reads_as_one_run(tmp_path: Path) -> None:
    legacy = {"command": "python -m benchmarks.compare_decoding --checkpoint A", "date": "2026-11-28 04:44 UTC",
              "cpu": "AMD EPYC", "threads": 2, "sentences": 4, "rows": [{"name": "beam 4: A"}]}  # fmt: skip
    path = tmp_path / "comparison.json"
    path.write_text(json.dumps(legacy))
    report = compare_decoding.load_report(path)
    assert report["runs"] == [{key: legacy[key] for key in ("command", "date", "cpu", "threads")}]
    assert report["rows"] == [{"name": "beam 4: A", "run": 1}] and "command" not in report
    assert compare_decoding.load_report(tmp_path / "new.json") == {"rows": [], "runs": []}


@pytest.mark.parametrize("content", ["{not json", '["a list"]', '{"rows": "none"}'])
def test_an_output_file_that_is_not_a_report_is_refused_and_kept(tmp_path: Path, content: str) -> None:
    path = tmp_path / "notes.json"
    path.write_text(content)
    with pytest.raises(SystemExit, match=rf"^{path}: not a compare_decoding report .*; not replaced$"):
        compare_decoding.load_report(path)
    assert path.read_text() == content


def test_the_decoding_28_runner_refuses_an_unknown_step_before_it_writes_anything(tmp_path: Path) -> None:
    # experiments/decoding-28/run.sh: a misspelt step once ran nothing at all, without a word.
    runs = tmp_path / "runs"
    result = subprocess.run(
        ["bash", str(REPOSITORY / "experiments" / "decoding-28" / "run.sh")],
        env={**os.environ, "STEPS": "halves bt-comapre", "RUNS": str(runs), "DATA": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and not runs.exists()
    assert result.stderr.strip() == (
        "run.sh: STEPS: unknown step 'bt-comapre' (known: seeds compare halves backtranslate bt-compare)"
    )
