"""``transformer distill`` end to end on the built-in corpus: stages, resuming, refusals, two processes."""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.distillation.conftest import write_student_config
from transformer.checkpoint.layout import resolve_checkpoint
from transformer.checkpoint.model_checkpoint import load_checkpoint
from transformer.cli import main
from transformer.config.files import load_config
from transformer.data.pipeline.text_files import read_lines
from transformer.decoding.translator import Translator
from transformer.distillation.judging import JudgedModel
from transformer.distillation.pipeline import DistillRequest, DistillResult, distill
from transformer.distillation.run_state import check_distill_output
from transformer.distillation.teacher_pass import teacher_translator

STAGES = ["teacher", "corpus", "student", "average", "shortlist", "evaluation"]


def stages(run: Path) -> dict:
    return json.loads((run / "distill.json").read_text(encoding="utf-8"))["stages"]


def run_distill(teacher: Path, config: Path, run: Path, *options: str) -> int:
    return main(
        ["distill", "--teacher", str(teacher), "--config", str(config), "--output-dir", str(run), *options]
    )


@pytest.mark.slow
def test_distill_trains_a_student_on_the_teachers_translations_and_resumes_nothing_twice(
    teacher_run: Path, tmp_path: Path, capsys
) -> None:
    config = write_student_config(tmp_path)
    run = tmp_path / "run"
    assert run_distill(teacher_run, config, run) == 0
    out = capsys.readouterr().out
    assert (
        f"distilled into {run / 'student' / 'averaged'}" in out and "| student | int8 | greedy | yes |" in out
    )
    recorded = stages(run)
    assert (
        list(recorded) == STAGES and recorded["teacher"]["lines"] == 300 and recorded["student"]["steps"] == 8
    )

    # The student's targets are the teacher's beam outputs of its sources (empty ones dropped).
    sources = read_lines(run / "data" / "train.en")
    translator = teacher_translator([teacher_run], load_config(config).distill, "cpu")
    expected = translator.translate(sources)
    assert read_lines(run / "teacher" / "translations.txt") == expected
    kept = [(source, target) for source, target in zip(sources, expected, strict=True) if target]
    assert (
        list(
            zip(read_lines(run / "corpus" / "train.en"), read_lines(run / "corpus" / "train.de"), strict=True)
        )
        == kept
    )
    assert read_lines(run / "corpus" / "valid.de") == read_lines(run / "data" / "valid.de")  # real references

    # The shipped student: the teacher's vocabulary, the student's shape, a shortlist, and it translates.
    student = run / "student" / "averaged"
    assert (student / "tokenizer.model").read_bytes() == (teacher_run / "tokenizer.model").read_bytes()
    shape = load_checkpoint(student).model_config
    assert (shape.num_encoder_layers, shape.num_decoder_layers, shape.vocab_size) == (2, 1, 150)
    assert (
        len(Translator.from_checkpoint(student, precision="int8", shortlist=True).translate(sources[:3])) == 3
    )
    rows = recorded["evaluation"]["rows"]
    assert [(row["role"], row["precision"], row["beam_size"], row["shortlist"]) for row in rows] == [
        ("teacher", "fp32", 2, False),
        ("teacher", "int8", 2, False),
        ("student", "int8", 1, False),
        ("student", "int8", 1, True),
    ]
    assert all(row["sentences"] == 30 and row["seconds"] > 0 and 0 <= row["bleu"] <= 100 for row in rows)
    assert "| teacher | fp32 | beam 2 | no |" in (run / "report.md").read_text(encoding="utf-8")

    # Rerun: every stage is skipped; the checkpoints are not rewritten.
    weights = run / "student" / "checkpoints" / "step-00000008" / "model.safetensors"
    written = weights.stat().st_mtime_ns
    assert run_distill(teacher_run, config, run) == 0
    assert stages(run) == recorded and weights.stat().st_mtime_ns == written
    # A judging setting reruns only the judging stages.
    assert run_distill(teacher_run, config, run, "--set", "distill.student_beam_size=2") == 0
    rerun = stages(run)
    assert rerun["student"] == recorded["student"] and rerun["teacher"] == recorded["teacher"]
    assert [row["beam_size"] for row in rerun["evaluation"]["rows"]][2:] == [2, 2]
    assert weights.stat().st_mtime_ns == written
    # A training that finished but was not recorded (a kill between the two) is resumed as it is, and its
    # stage time is the trainer's clock over its runs, not the seconds of the rerun that found it done.
    # (The checkpoint's clock says an hour, as after runs in earlier sessions.)
    state = json.loads((run / "distill.json").read_text(encoding="utf-8"))
    del state["stages"]["student"]
    (run / "distill.json").write_text(json.dumps(state), encoding="utf-8")
    trainer_state_file = weights.parent / "trainer_state.json"
    trainer_state = json.loads(trainer_state_file.read_text(encoding="utf-8"))
    trainer_state_file.write_text(json.dumps({**trainer_state, "elapsed_seconds": 3600.0}), encoding="utf-8")
    assert run_distill(teacher_run, config, run, "--set", "distill.student_beam_size=2") == 0
    student_record = stages(run)["student"]
    assert student_record["resumed"] and student_record["seconds"] == 3600.0
    assert student_record["this_run_seconds"] < 60
    assert weights.stat().st_mtime_ns == written
    # Another student in the same folder is refused, naming what differs.
    capsys.readouterr()
    assert run_distill(teacher_run, config, run, "--set", "model.d_model=64") == 2
    assert "holds a distill run of another student.model.d_model (was 32, now 64)" in capsys.readouterr().err


@pytest.mark.slow
def test_a_killed_teacher_pass_resumes_after_its_last_chunk_and_a_sweep_reuses_it(
    teacher_run: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    config = load_config(write_student_config(tmp_path))
    original = Translator.translate
    calls = {"count": 0}

    def killed_on_the_third_chunk(self, sentences, *args, **kwargs):
        calls["count"] += 1
        if calls["count"] == 3:
            raise KeyboardInterrupt
        return original(self, sentences, *args, **kwargs)

    monkeypatch.setattr(Translator, "translate", killed_on_the_third_chunk)
    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        distill(DistillRequest((teacher_run,), config, run), print)
    assert len(read_lines(run / "teacher" / "part-00000-of-00001.txt")) == 128 and stages(run) == {}
    monkeypatch.setattr(Translator, "translate", original)
    distill(DistillRequest((teacher_run,), config, run), print)
    assert stages(run)["teacher"]["translated_by_rank_0"] == 300 - 128 and stages(run)["teacher"]["resumed"]
    assert not (run / "teacher" / "part-00000-of-00001.txt").exists()  # merged into translations.txt
    translations = read_lines(run / "teacher" / "translations.txt")

    # A wider student of the sweep reuses the pass; one with another teacher search may not.
    wider = dataclasses.replace(config, model=dataclasses.replace(config.model, d_model=64))
    result = distill(
        DistillRequest((teacher_run,), wider, tmp_path / "wider-run", reuse_teacher_pass=run), print
    )
    assert result is not None and result.stages["teacher"]["reused_from"] == str(run)
    assert read_lines(tmp_path / "wider-run" / "teacher" / "translations.txt") == translations
    assert load_checkpoint(result.student).model_config.d_model == 64
    capsys.readouterr()
    (tmp_path / "beam1").mkdir()
    other = write_student_config(tmp_path / "beam1", teacher_beam_size=1)
    arguments = ["--reuse-teacher-pass", str(run)]
    assert run_distill(teacher_run, other, tmp_path / "beam1-run", *arguments) == 2
    assert "its teacher's pass differs in teacher_pass.beam_size (was 2, now 1)" in capsys.readouterr().err


@pytest.mark.slow
def test_the_student_ships_like_any_model(teacher_run: Path, tmp_path: Path, capsys) -> None:
    pytest.importorskip("ctranslate2")
    pytest.importorskip("transformers")
    run = tmp_path / "run"
    assert run_distill(teacher_run, write_student_config(tmp_path), run) == 0
    student = run / "student" / "averaged"
    # CTranslate2, its shortlist as the vocabulary map, translating what our engine translates.
    assert main(["convert", "--to", "ctranslate2", str(student), str(tmp_path / "ct2")]) == 0
    assert (tmp_path / "ct2" / "vmap.txt").read_text(encoding="utf-8").startswith("\t")
    common = ["--input", str(run / "data" / "valid.en"), "--beam", "1", "--max-length-offset", "5"]
    capsys.readouterr()
    assert main(["translate", "--checkpoint", str(student), *common]) == 0
    ours = capsys.readouterr().out
    assert main(["translate", "--engine", "ctranslate2", "--checkpoint", str(tmp_path / "ct2"), *common]) == 0
    assert capsys.readouterr().out == ours and ours.count("\n") == 30
    shortlisted = ["--engine", "ctranslate2", "--checkpoint", str(tmp_path / "ct2"), "--shortlist"]
    assert main(["translate", *shortlisted, *common]) == 0 and capsys.readouterr().out.count("\n") == 30
    # HF Marian, and back: the same translations.
    assert main(["convert", "--to", "hf-marian", str(student), str(tmp_path / "marian")]) == 0
    assert (
        main(["convert", "--from", "hf-marian", str(tmp_path / "marian"), "--to", str(tmp_path / "back")])
        == 0
    )
    capsys.readouterr()
    assert main(["translate", "--checkpoint", str(tmp_path / "back"), *common]) == 0
    assert capsys.readouterr().out == ours


def test_bad_folders_are_refused_in_one_line_before_anything_is_written(
    teacher_run: Path, tmp_path: Path, capsys
) -> None:
    config = write_student_config(tmp_path)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    assert run_distill(teacher_run, config, mine) == 2
    assert "--output-dir" in capsys.readouterr().err and sorted(os.listdir(mine)) == ["notes.txt"]
    assert run_distill(teacher_run, config, teacher_run) == 2
    assert "--output-dir" in capsys.readouterr().err
    assert run_distill(tmp_path / "no-such-teacher", config, tmp_path / "new") == 2
    assert "no-such-teacher" in capsys.readouterr().err and not (tmp_path / "new").exists()
    # A start that fails once the folder is claimed (here: the corpus) leaves a record without an identity,
    # so the corrected command may use the folder.
    missing = ["--set", "data.corpus=directory", "--set", f"data.data_dir={tmp_path / 'no-corpus'}"]
    assert run_distill(teacher_run, config, tmp_path / "new", *missing) == 2
    assert "no-corpus does not exist" in capsys.readouterr().err
    assert json.loads((tmp_path / "new" / "distill.json").read_text()) == {"identity": None, "stages": {}}
    check_distill_output(tmp_path / "new")
    # A teacher without this project's joint vocabulary is refused before its pass, not after it.
    converted = tmp_path / "converted"
    shutil.copytree(resolve_checkpoint(teacher_run), converted)
    (converted / "tokenizer.model").rename(converted / "source.spm")
    assert run_distill(converted, config, tmp_path / "other") == 2
    assert f"--teacher {converted}: no tokenizer.model" in capsys.readouterr().err
    assert not (tmp_path / "other" / "teacher").exists()


@pytest.mark.slow
def test_two_torchrun_processes_write_the_same_teacher_pass_as_one(teacher_run: Path, tmp_path: Path) -> None:
    config = write_student_config(tmp_path)
    one = tmp_path / "one"
    assert run_distill(teacher_run, config, one, "--set", "distill.student_shortlist=false") == 0
    two = tmp_path / "two"
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "transformer.cli",
        "distill", "--teacher", str(teacher_run), "--config", str(config), "--output-dir", str(two),
        "--set", "distill.student_shortlist=false",
    ]  # fmt: skip
    completed = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert (two / "teacher" / "translations.txt").read_bytes() == (
        one / "teacher" / "translations.txt"
    ).read_bytes()
    recorded = stages(two)
    assert (
        recorded["teacher"]["processes"] == 2 and recorded["teacher"]["translated_by_rank_0"] == 128
    )  # 2 of 5 chunks
    assert "2 process(es)" in completed.stdout + completed.stderr  # the student trained under DDP
    assert completed.stdout.count("distilled into") == 1  # only rank 0 reports


def test_a_resumed_stage_counts_the_time_of_all_its_runs_and_says_so(tmp_path: Path) -> None:
    records = {
        "teacher": {
            "seconds": 30.0,
            "lines": 300,
            "processes": 1,
            "translated_by_rank_0": 172,
            "resumed": True,
        },
        "student": {"seconds": 4950.2, "this_run_seconds": 2161.5, "steps": 3600, "resumed": True},
        "average": {"seconds": 1.0, "reused_from": "elsewhere"},
    }
    row = JudgedModel("teacher", "fp32", 4, False, 35.07, 1014, 7.0, 2)
    lines = DistillResult(tmp_path, tmp_path / "student", records, [row]).describe().splitlines()
    assert (
        lines[2] == "  teacher       0 min 30 s (resumed: this run's time only, rank 0 translating 172 lines)"
    )
    assert lines[3] == (
        "  student      82 min 30 s (resumed: the trainer's time over all its runs; 36 min 01 s in the last)"
    )
    assert (
        lines[4] == "  average       0 min 01 s (reused from elsewhere)"
        and lines[5] == "  in all       83 min 01 s"
    )
