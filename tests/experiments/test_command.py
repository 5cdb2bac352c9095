"""The ``transformer experiment`` command as library calls: options refused, directories, report outcomes."""

import dataclasses
import re
from pathlib import Path

import pytest

from transformer.experiments.command import (
    ExperimentOptions,
    ExperimentRunOutcome,
    refuse_flags,
    report_named_experiment,
    run_named_experiment,
    training_flags,
)
from transformer.experiments.common.generated_sections import section_markers
from transformer.experiments.common.runner import ExperimentOutcome

REPOSITORY = Path(__file__).resolve().parents[2]


def test_only_the_options_given_are_refused_and_all_of_them_at_once() -> None:
    assert training_flags(ExperimentOptions("table1")) == [
        ("--seeds", (1,), (1,)),
        ("--parallel", 1, 1),
        ("--only", None, None),
        ("--set", (), ()),
    ]
    refuse_flags("nothing given", training_flags(ExperimentOptions("table1")))  # no error
    options = ExperimentOptions("table1", seeds=(1, 2), only="base", overrides=("train.max_steps=5",))
    with pytest.raises(ValueError, match=r"^table1 is a measurement: --seeds, --only, --set do not apply$"):
        refuse_flags("table1 is a measurement", training_flags(options))
    with pytest.raises(ValueError, match=r"^why: --parallel does not apply$"):
        refuse_flags("why", training_flags(ExperimentOptions("table1", parallel=2)))


def test_the_records_directory_defaults_to_the_name_and_the_scale() -> None:
    assert ExperimentOptions("table2").experiment_dir("table2") == Path("runs/experiments/table2-cpu")
    assert ExperimentOptions("report", scale="gpu").experiment_dir("positions") == Path(
        "runs/experiments/positions-gpu"
    )
    assert ExperimentOptions("table2", output_dir="here").experiment_dir("table2") == Path("here")
    assert ExperimentOptions("table2", only=" base, A ,,E1").selected_variants() == ["base", "A", "E1"]
    assert ExperimentOptions("table2").selected_variants() is None


def test_a_run_refuses_report_options_and_a_file_as_its_directory_before_writing(tmp_path: Path) -> None:
    with pytest.raises(
        ValueError, match=r"^table2 trains or measures, it does not report: NAME, --check do not"
    ):
        run_named_experiment(ExperimentOptions("table2", report_of="table2", check=True), report=print)
    taken = tmp_path / "taken"
    taken.write_text("a file", encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(f"--output-dir {taken}: is a file; expected a directory")):
        run_named_experiment(ExperimentOptions("table1", output_dir=str(taken)), report=print)
    target = tmp_path / "table1"
    with pytest.raises(
        ValueError, match=r"^table1 is a measurement, not a training: --seeds does not apply$"
    ):
        run_named_experiment(ExperimentOptions("table1", seeds=(2,), output_dir=str(target)), report=print)
    assert not target.exists()


def test_the_outcome_of_a_run_says_what_finished_and_what_failed() -> None:
    runs = ExperimentOutcome(
        finished=["base-s1"], skipped=["A1-s1", "A2-s1"], failed=["B1-s1 (runs/B1-s1/log.txt)"]
    )
    outcome = ExperimentRunOutcome("table2", Path("out"), runs=runs)
    assert outcome.summary() == "table2: 1 run(s) finished now, 2 done before, 1 failed; table: out/table.md"
    assert outcome.failures() == ["failed: B1-s1 (runs/B1-s1/log.txt)"]
    assert outcome.status == 1
    measured = ExperimentRunOutcome("table1", Path("out"), report_path=Path("out/table1.md"))
    assert (measured.summary(), measured.failures(), measured.status) == (
        "table1: report: out/table1.md",
        [],
        0,
    )


def test_a_report_of_the_committed_records_is_current_and_a_stale_copy_is_found(tmp_path: Path) -> None:
    records = REPOSITORY / "experiments" / "table2-cpu"
    document = REPOSITORY / "EXPERIMENTS.md"
    current = report_named_experiment(
        ExperimentOptions(
            "report", report_of="table2", output_dir=str(records), document=str(document), check=True
        )
    )
    assert (current.status, current.message()) == (0, f"{document}: section table2-cpu already current")
    stale = tmp_path / "EXPERIMENTS.md"
    text = document.read_text(encoding="utf-8")
    # Stale this section alone: another directory's section may well count as many records.
    begin_marker, end_marker = section_markers("table2-cpu")
    start = text.index(begin_marker)
    end = text.index(end_marker, start)
    section = text[start:end]
    assert "from 26 records" in section
    stale.write_text(
        text[:start] + section.replace("from 26 records", "from 25 records") + text[end:], "utf-8"
    )
    options = ExperimentOptions("report", report_of="table2", output_dir=str(records), document=str(stale))
    found = report_named_experiment(dataclasses.replace(options, check=True))
    assert found.status == 1
    assert found.message() == (
        f"{stale}: section table2-cpu differs from {records}'s records; run transformer experiment report "
        f"table2 --output-dir {records}"
    )
    rewritten = report_named_experiment(options)
    assert (rewritten.status, rewritten.message()) == (0, f"{stale}: section table2-cpu rewritten")
    assert stale.read_text(encoding="utf-8") == document.read_text(encoding="utf-8")


def test_a_report_needs_the_experiment_and_refuses_training_options() -> None:
    with pytest.raises(
        ValueError, match=r"^report: name the experiment, e\.g\. transformer experiment report"
    ):
        report_named_experiment(ExperimentOptions("report"))
    with pytest.raises(
        ValueError, match=r"^report reads records, it trains nothing: --allow-dirty, --device do"
    ):
        report_named_experiment(
            ExperimentOptions("report", report_of="table2", allow_dirty=True, device="cpu")
        )
