import dataclasses
import gzip
import io
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from transformer.averaging import write_weights_checkpoint
from transformer.checkpoint.layout import CheckpointError, read_index
from transformer.checkpoint.model_checkpoint import load_checkpoint
from transformer.cli import build_parser, main
from transformer.cli_arguments.search_options import translator_from_args
from transformer.config.decode import DecodeConfig
from transformer.data.pipeline.text_files import read_parallel_files
from transformer.decoding.translator import Translator
from transformer.training.launch import claim_run_dir_if_main


@pytest.fixture(scope="module")
def valid_pairs(trained_run: Path) -> list[tuple[str, str]]:
    return read_parallel_files(trained_run / "data" / "valid.en", trained_run / "data" / "valid.de")


def test_translator_keeps_input_order_and_empty_lines(trained_run: Path, valid_pairs) -> None:
    translator = Translator.from_checkpoint(trained_run, DecodeConfig(beam_size=2, max_length_offset=5))
    sources = [valid_pairs[0][0], "", "   ", valid_pairs[1][0], valid_pairs[2][0]]
    outputs = translator.translate(sources)
    assert len(outputs) == 5 and outputs[1] == "" and outputs[2] == ""
    # Batching sorts by length internally; each sentence alone gives the same translation.
    for source, output in zip(sources, outputs, strict=True):
        if source.strip():
            assert translator.translate([source]) == [output]


def test_translator_truncates_over_long_inputs_by_the_documented_rule(trained_run: Path, valid_pairs) -> None:
    translator = Translator.from_checkpoint(trained_run, DecodeConfig(beam_size=1, max_length_offset=3))
    translator.max_input_tokens = len(translator.tokenizer.encode(valid_pairs[0][0])) + 1
    long_sentence = " ".join(source for source, _ in valid_pairs[:5])
    assert len(translator.translate([long_sentence, valid_pairs[0][0]])) == 2
    assert translator.truncated_count == 1


def test_translate_command_file_and_stdin(
    trained_run: Path, tmp_path: Path, valid_pairs, monkeypatch, capsys
) -> None:
    source_file = tmp_path / "input.en.gz"
    with gzip.open(source_file, "wt", encoding="utf-8") as handle:
        handle.write(f"{valid_pairs[0][0]}\n\n{valid_pairs[1][0]}\n")
    output_file = tmp_path / "output.de"
    arguments = ["translate", "--checkpoint", str(trained_run), "--beam", "2", "--max-length-offset", "5"]
    assert main([*arguments, "--input", str(source_file), "--output", str(output_file)]) == 0
    lines = output_file.read_text(encoding="utf-8").split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[3] == ""
    assert not list(tmp_path.glob(".*tmp*"))
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{valid_pairs[0][0]}\n"))
    assert main([*arguments, "--nbest", "2"]) == 0
    nbest = capsys.readouterr().out.strip().split("\n")
    assert len(nbest) == 2 and all(line.startswith("0\t") for line in nbest)
    scores = [float(line.split("\t")[1]) for line in nbest]
    assert scores[0] >= scores[1]


def test_translate_in_int8_is_offered_and_close_to_fp32(trained_run: Path, tmp_path: Path, capsys) -> None:
    source = trained_run / "data" / "valid.en"
    arguments = ["translate", "--checkpoint", str(trained_run), "--beam", "1", "--input", str(source)]
    arguments += ["--device", "cpu"]  # int8 is CPU-only; on a CUDA machine auto would pick the GPU
    assert main(arguments) == 0
    fp32 = capsys.readouterr().out.splitlines()
    assert main([*arguments, "--precision", "int8"]) == 0
    int8 = capsys.readouterr().out.splitlines()
    assert len(int8) == len(fp32) == 30
    assert sum(a == b for a, b in zip(int8, fp32, strict=True)) >= 24  # int8 changes a few sentences at most


def test_evaluate_command(trained_run: Path, tmp_path: Path, capsys) -> None:
    references = trained_run / "data" / "valid.de"
    assert main(["evaluate", "--hypotheses", str(references), "--reference", str(references)]) == 0
    out = capsys.readouterr().out
    assert (
        "BLEU 100.00 (nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" in out and "chrF2 100.00" in out
    )
    arguments = [
        "evaluate",
        "--checkpoint",
        str(trained_run),
        "--source",
        str(trained_run / "data" / "valid.en"),
    ]
    arguments += ["--reference", str(references), "--beam", "1", "--max-length-offset", "5", "--lowercase"]
    assert main([*arguments, "--output", str(tmp_path / "hyp.de")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("perplexity ") and "case:lc" in out
    assert len((tmp_path / "hyp.de").read_text().splitlines()) == 30


def test_attention_and_plot_commands(trained_run: Path, tmp_path: Path, valid_pairs, capsys) -> None:
    output_dir = tmp_path / "attention"
    text = valid_pairs[0][0]
    assert (
        main(["attention", "--checkpoint", str(trained_run), "--text", text, "--output-dir", str(output_dir)])
        == 0
    )
    names = sorted(path.name for path in output_dir.iterdir())
    assert names == [
        "attention.html",
        "attention_cross_layer0.png",
        "attention_decoder_self_layer0.png",
        "attention_encoder_self_layer0.png",
    ]
    assert main(["plot", "--run", str(trained_run), "--output", str(tmp_path / "curves.png")]) == 0
    assert (tmp_path / "curves.png").stat().st_size > 10_000


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["translate", "--checkpoint", "/nonexistent"], "no checkpoint here"),
        (["train", "--config", "no-such-config"], "--config no-such-config: no such file"),
        (["evaluate", "--reference", "/nonexistent.de", "--hypotheses", "/nonexistent.de"], "nonexistent.de"),
        (["evaluate", "--reference", "x"], "evaluate needs --hypotheses"),
    ],
)
def test_errors_are_one_line(arguments: list[str], message: str, capsys, tmp_path: Path) -> None:
    if arguments == ["evaluate", "--reference", "x"]:
        (tmp_path / "x").write_text("a\n")
        arguments = ["evaluate", "--reference", str(tmp_path / "x")]
    assert main(arguments) == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1 and error.startswith("transformer ")


def test_non_utf8_input_names_file_and_line(trained_run: Path, tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.en"
    bad.write_bytes(b"fine line\nbroken \xff line\n")
    assert main(["translate", "--checkpoint", str(trained_run), "--input", str(bad)]) == 2
    error = capsys.readouterr().err
    assert "bad.en" in error and "line 2" in error


def test_quickstart_reports_bleu_and_examples(tmp_path: Path, write_config, capsys) -> None:
    config = write_config(tmp_path, train={"max_steps": 6, "validate_every": 0, "checkpoint_every": 0})
    assert (
        main(["quickstart", "--config", str(config), "--output-dir", str(tmp_path / "qs"), "--examples", "2"])
        == 0
    )
    out = capsys.readouterr().out
    assert "test set (30 sentences, beam 2):" in out and "BLEU " in out and out.count("source:") == 2


def test_quickstart_run_again_reuses_a_run_its_time_limit_ended(tmp_path: Path, write_config, capsys) -> None:
    train = {"max_steps": 100_000, "max_minutes": 0.02, "cooldown_steps": 25_000, "validate_every": 0}
    config = write_config(tmp_path, train={**train, "checkpoint_every": 0, "log_every": 10})
    arguments = [
        "quickstart",
        "--config",
        str(config),
        "--output-dir",
        str(tmp_path / "qs"),
        "--examples",
        "0",
    ]
    assert main(arguments) == 0
    first = capsys.readouterr()
    assert (
        "stopped by max_minutes" in first.out
        and "annealing the learning rate to zero within the time limit" in first.err
    )
    trained = first.out.split("trained ")[1].split(" steps")[0]
    assert main(arguments) == 0  # a second call reports the same run instead of training another budget
    second = capsys.readouterr().out
    assert f"trained {trained} steps" in second and "stopped by max_minutes" in second
    assert "BLEU " in second


def test_data_dir_trains_on_any_folder_of_files(trained_run: Path, tmp_path: Path, write_config) -> None:
    data_dir = tmp_path / "corpus"
    data_dir.mkdir()
    for name in ("train.en", "train.de", "valid.en", "valid.de"):
        (data_dir / name).write_bytes((trained_run / "data" / name).read_bytes())
    config = write_config(tmp_path, train={"max_steps": 2, "validate_every": 0, "checkpoint_every": 0})
    run_dir = tmp_path / "run"
    arguments = ["train", "--config", str(config), "--data-dir", str(data_dir), "--output-dir", str(run_dir)]
    assert main(arguments) == 0
    assert not (run_dir / "data").exists()  # nothing generated: the folder's files were used
    assert (run_dir / "checkpoints" / "step-00000002").exists()


def test_tensorboard_event_files_are_written(tmp_path: Path, write_config) -> None:
    pytest.importorskip("tensorboard")
    config = write_config(tmp_path, train={"max_steps": 2, "log_every": 1, "tensorboard": True})
    assert main(["train", "--config", str(config), "--output-dir", str(tmp_path / "run")]) == 0
    assert list((tmp_path / "run" / "tensorboard").glob("events.out.tfevents.*"))


def test_translate_and_evaluate_search_as_the_run_config_says_unless_flags_override(
    trained_run: Path, tmp_path: Path
) -> None:
    run_decode = DecodeConfig(beam_size=2, max_length_offset=10)  # the tiny config's decode section
    assert load_checkpoint(trained_run).decode_config == run_decode
    assert Translator.from_checkpoint(trained_run).decode_config == run_decode
    parser = build_parser()
    plain = parser.parse_args(["translate", "--checkpoint", str(trained_run)])
    assert translator_from_args(plain).decode_config == run_decode
    flagged = parser.parse_args(
        ["evaluate", "--checkpoint", str(trained_run), "--reference", "x", "--alpha", "1"]
    )
    assert translator_from_args(flagged).decode_config == DecodeConfig(
        beam_size=2, max_length_offset=10, length_penalty=1.0
    )
    # An average keeps its run's settings (in the weights' metadata: it has no trainer state).
    averaged = tmp_path / "averaged"
    assert (
        main(["average-checkpoints", "--run", str(trained_run), "--last", "2", "--output", str(averaged)])
        == 0
    )
    assert load_checkpoint(averaged).decode_config == run_decode
    # A checkpoint without settings (e.g. imported from Marian) searches as the paper did.
    bare = write_weights_checkpoint(
        dataclasses.replace(load_checkpoint(averaged), decode_config=None), tmp_path / "bare", []
    )
    bare_args = parser.parse_args(["translate", "--checkpoint", str(bare), "--beam", "3"])
    assert translator_from_args(bare_args).decode_config == DecodeConfig(beam_size=3)


def test_unreadable_decode_settings_name_the_checkpoint(trained_run: Path, tmp_path: Path) -> None:
    checkpoint = load_checkpoint(trained_run)
    directory = tmp_path / "odd"
    directory.mkdir()
    metadata = {
        "format": "transformer-checkpoint-v1",
        "model_config": json.dumps(checkpoint.model_config.to_dict()),
        "decode_config": json.dumps({"beam_width": 3}),
    }
    save_file(checkpoint.weights, str(directory / "model.safetensors"), metadata=metadata)
    with pytest.raises(CheckpointError, match=r"odd: unreadable decode settings.*beam_width"):
        load_checkpoint(directory)


def average_into(trained_run: Path, output: Path) -> int:
    return main(["average-checkpoints", "--run", str(trained_run), "--last", "2", "--output", str(output)])


def listing(directory: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(directory)): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def test_average_refuses_an_output_that_holds_a_run(trained_run: Path, tmp_path: Path, capsys) -> None:
    run_copy = tmp_path / "run"
    shutil.copytree(trained_run, run_copy)
    before = listing(run_copy)
    assert {"metrics.jsonl", "checkpoints/index.json", "data/train.en"} <= set(before)
    assert average_into(trained_run, run_copy) == 2
    assert capsys.readouterr().err == (
        f"transformer average-checkpoints: error: --output {run_copy}: exists and does not hold an earlier "
        "average (averaged_from.json); choose a new directory\n"
    )
    assert listing(run_copy) == before


def test_average_refuses_an_output_of_unrelated_files(trained_run: Path, tmp_path: Path, capsys) -> None:
    unrelated = tmp_path / "notes"
    unrelated.mkdir()
    (unrelated / "notes.txt").write_text("keep me\n", encoding="utf-8")
    assert average_into(trained_run, unrelated) == 2
    assert f"--output {unrelated}: exists and does not hold an earlier average" in capsys.readouterr().err
    assert listing(unrelated) == {"notes.txt": b"keep me\n"}
    a_file = tmp_path / "a-file"
    a_file.write_text("keep me too\n", encoding="utf-8")
    assert average_into(trained_run, a_file) == 2
    assert f"--output {a_file}: is a file; expected a checkpoint directory" in capsys.readouterr().err
    assert a_file.read_text(encoding="utf-8") == "keep me too\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a-file", "notes"]


def test_average_replaces_an_earlier_average(trained_run: Path, tmp_path: Path) -> None:
    output = tmp_path / "averaged"
    names = read_index(trained_run / "checkpoints")["checkpoints"]
    first = trained_run / "checkpoints" / names[-1]
    assert main(["average-checkpoints", "--inputs", str(first), "--output", str(output)]) == 0
    assert json.loads((output / "averaged_from.json").read_text()) == [str(first)]
    assert average_into(trained_run, output) == 0
    sources = [str(trained_run / "checkpoints" / name) for name in names[-2:]]
    assert json.loads((output / "averaged_from.json").read_text()) == sources
    assert sorted(path.name for path in output.iterdir()) == [
        "averaged_from.json",
        "model.safetensors",
        "tokenizer.model",
    ]


def test_non_utf8_standard_input_names_standard_input_and_line(
    trained_run: Path, monkeypatch, capsys
) -> None:
    # Like the real sys.stdin: a UTF-8 text layer over the bytes, which turns bad bytes into surrogates.
    stdin = io.TextIOWrapper(io.BytesIO(b"fine line\nbroken \xff line\n"), "utf-8", "surrogateescape")
    monkeypatch.setattr("sys.stdin", stdin)
    assert main(["translate", "--checkpoint", str(trained_run)]) == 2
    assert capsys.readouterr().err == (
        "transformer translate: error: standard input line 2: not valid UTF-8 (byte 7 of the line)\n"
    )


def one_error_line(capsys) -> str:
    error = capsys.readouterr().err
    assert error.count("\n") == 1, error
    return error


def test_a_bad_set_value_names_the_set_flag(tmp_path: Path, write_config, capsys) -> None:
    config = write_config(tmp_path)
    arguments = ["train", "--config", str(config), "--output-dir", str(tmp_path / "run")]
    assert main([*arguments, "--set", "train.max_steps=abc"]) == 2
    error = one_error_line(capsys)
    assert error.startswith("transformer train: error: --set train.max_steps=abc: [train] ")
    assert "max_steps='abc'" in error and "tiny.yaml" not in error
    # Each override is valid alone; the second makes the config invalid (d_model 32, 5 heads).
    assert main([*arguments, "--set", "model.d_model=40", "--set", "model.num_heads=3"]) == 2
    assert one_error_line(capsys).startswith("transformer train: error: --set model.num_heads=3: [model] ")
    # A fault in the file itself still names the file.
    config.write_text(config.read_text(encoding="utf-8") + "extra: {}\n", encoding="utf-8")
    assert main([*arguments, "--set", "train.max_steps=3"]) == 2
    assert one_error_line(capsys).startswith(f"transformer train: error: {config}: unknown section(s)")
    assert not (tmp_path / "run").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_translate_device_errors_name_the_device_flag(trained_run: Path, capsys) -> None:
    arguments = ["translate", "--checkpoint", str(trained_run)]
    assert main([*arguments, "--device", "cuda"]) == 2
    assert one_error_line(capsys) == (
        "transformer translate: error: --device cuda: CUDA is not available on this machine; "
        "use --device cpu\n"
    )
    assert main([*arguments, "--engine", "ctranslate2", "--device", "cuda:1"]) == 2
    assert "error: --device cuda:1: CUDA is not available" in one_error_line(capsys)
    assert main([*arguments, "--device", "gpu"]) == 2
    assert one_error_line(capsys) == (
        "transformer translate: error: --device gpu: expected auto, cpu, cuda or cuda:N\n"
    )


def test_an_output_of_the_wrong_kind_is_named_with_its_option(
    trained_run: Path, tmp_path: Path, write_config, capsys
) -> None:
    a_file, a_directory = tmp_path / "a-file", tmp_path / "a-directory"
    a_file.write_text("keep\n", encoding="utf-8")
    a_directory.mkdir()
    config = str(write_config(tmp_path))
    for command in (["train", "--config", config], ["prepare", "--config", config], ["quickstart"]):
        assert main([*command, "--output-dir", str(a_file)]) == 2
        assert one_error_line(capsys) == (
            f"transformer {command[0]}: error: --output-dir {a_file}: is a file; expected a directory\n"
        )
    attention = ["attention", "--checkpoint", str(trained_run), "--text", "a b", "--output-dir", str(a_file)]
    assert main(attention) == 2
    assert f"error: --output-dir {a_file}: is a file; expected a directory" in one_error_line(capsys)
    translate = ["translate", "--checkpoint", str(trained_run), "--input", str(a_file)]
    assert main([*translate, "--output", str(a_directory)]) == 2
    assert one_error_line(capsys) == (
        f"transformer translate: error: --output {a_directory}: is a directory; expected a file\n"
    )
    assert main(["plot", "--run", str(trained_run), "--output", str(a_directory)]) == 2
    assert f"error: --output {a_directory}: is a directory; expected a file" in one_error_line(capsys)
    assert a_file.read_text(encoding="utf-8") == "keep\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a-directory", "a-file", "tiny.yaml"]
    assert not list(a_directory.iterdir())


def help_text(command: str, monkeypatch, capsys) -> str:
    monkeypatch.setenv("COLUMNS", "300")  # no wrapping inside a help text
    with pytest.raises(SystemExit):
        main([command, "--help"])
    return capsys.readouterr().out


def test_help_names_the_data_files_and_the_precision(monkeypatch, capsys) -> None:
    train_help = help_text("train", monkeypatch, capsys)
    assert "{train,valid,test}.{en,de}[.gz]" in train_help and "{src,tgt}" not in train_help
    for command in ("translate", "evaluate"):
        words = " ".join(help_text(command, monkeypatch, capsys).split())
        assert "--precision {fp32,bf16,int8} precision of translation: fp32 (default); bf16," in words
        assert "or int8, linear layers with int8 weights and dynamic int8 activations (CPU only;" in words


def write_lock_file(run_dir: Path, pid: int) -> None:
    holder = {"pid": pid, "host": socket.gethostname(), "started": "2025-01-31T09:00:00+00:00"}
    (run_dir / "run.lock").write_text(json.dumps(holder), encoding="utf-8")


def test_prepare_train_and_quickstart_refuse_a_run_directory_a_running_process_holds(
    tmp_path: Path, write_config, capsys
) -> None:
    config = write_config(tmp_path)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_lock_file(run_dir, os.getpid())  # this test's own process: certainly running
    for command in ("prepare", "train", "quickstart"):
        assert main([command, "--config", str(config), "--output-dir", str(run_dir)]) == 2
        assert one_error_line(capsys).startswith(
            f"transformer {command}: error: {run_dir} is in use by process {os.getpid()} on host "
        )
    assert [path.name for path in run_dir.iterdir()] == ["run.lock"]  # nothing prepared, nothing trained


def test_prepare_writes_what_train_reuses_and_releases_the_lock(tmp_path: Path, write_config, capsys) -> None:
    config = write_config(tmp_path, train={"max_steps": 2, "validate_every": 0, "checkpoint_every": 0})
    run_dir = tmp_path / "runs" / "prepared"
    assert main(["prepare", "--config", str(config), "--output-dir", str(run_dir)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("prepared ")
    assert sorted(path.name for path in run_dir.iterdir()) == ["data", "tokenizer.model"]  # no run.lock left
    vocabulary = (run_dir / "tokenizer.model").read_bytes()
    assert main(["train", "--config", str(config), "--output-dir", str(run_dir)]) == 0
    assert (run_dir / "tokenizer.model").read_bytes() == vocabulary
    # A prepare that fails removes the directories it created, as a failed train does.
    small = write_config(tmp_path, name="small.yaml", model={"vocab_size": 10})
    assert main(["prepare", "--config", str(small), "--output-dir", str(tmp_path / "new" / "run")]) == 2
    assert "Vocabulary size is smaller than required_chars" in capsys.readouterr().err.splitlines()[-1]
    assert not (tmp_path / "new").exists()


def test_train_takes_over_the_lock_of_a_process_that_has_ended(tmp_path: Path, write_config, capsys) -> None:
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    dead_pid = int(finished.stdout)
    config = write_config(tmp_path, train={"max_steps": 2, "validate_every": 0, "checkpoint_every": 0})
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_lock_file(run_dir, dead_pid)
    assert main(["train", "--config", str(config), "--output-dir", str(run_dir)]) == 0
    assert (
        f"note: took over {run_dir / 'run.lock'} from process {dead_pid} on host " in capsys.readouterr().err
    )
    assert not (run_dir / "run.lock").exists()
    assert read_index(run_dir / "checkpoints")["checkpoints"] == ["step-00000002"]


FAILING_AT_ONCE = {
    "diverges at step 2": ({"train": {"peak_learning_rate": 1e30}}, "loss became nan at step 2"),
    "vocabulary too small": ({"model": {"vocab_size": 10}}, "Vocabulary size is smaller than required_chars"),
}


@pytest.mark.parametrize("failure", sorted(FAILING_AT_ONCE))
def test_a_run_that_fails_before_its_first_checkpoint_removes_the_directory_it_created(
    tmp_path: Path, write_config, capsys, failure: str
) -> None:
    sections, message = FAILING_AT_ONCE[failure]
    config = write_config(tmp_path, **sections)
    run_dir = tmp_path / "runs" / "new"
    assert main(["train", "--config", str(config), "--output-dir", str(run_dir)]) == 2
    assert message in capsys.readouterr().err.splitlines()[-1]  # after the data preparation's messages
    assert [path.name for path in tmp_path.iterdir()] == ["tiny.yaml"]  # runs/ was created by the run too


@pytest.mark.parametrize("failure", sorted(FAILING_AT_ONCE))
def test_a_failed_run_in_a_directory_that_existed_removes_only_what_it_created(
    tmp_path: Path, write_config, capsys, failure: str
) -> None:
    sections, message = FAILING_AT_ONCE[failure]
    config = write_config(tmp_path, **sections)
    run_dir = tmp_path / "mine"
    run_dir.mkdir()
    (run_dir / "notes.txt").write_text("keep\n", encoding="utf-8")
    assert main(["train", "--config", str(config), "--output-dir", str(run_dir)]) == 2
    assert message in capsys.readouterr().err.splitlines()[-1]
    # The data, vocabulary and metrics it generated go (a failure at the vocabulary step used to leave
    # data/ behind); the user's own file stays, untouched.
    assert [path.name for path in run_dir.iterdir()] == ["notes.txt"]
    assert (run_dir / "notes.txt").read_text(encoding="utf-8") == "keep\n"


def test_only_the_main_rank_claims_the_run_directory(tmp_path: Path, monkeypatch) -> None:
    run_dir = tmp_path / "run"
    monkeypatch.setenv("RANK", "1")
    with claim_run_dir_if_main(run_dir):
        assert not run_dir.exists()
    monkeypatch.setenv("RANK", "0")
    with claim_run_dir_if_main(run_dir):
        assert json.loads((run_dir / "run.lock").read_text())["pid"] == os.getpid()
    assert not (run_dir / "run.lock").exists()
