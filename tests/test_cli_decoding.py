"""``transformer translate`` and ``evaluate`` with the decoding options of issue #28 and the pipes and outputs of
#48, on a tiny trained run."""

import gzip
import math
import os
import re
import stat
import threading
from pathlib import Path

import pytest

from tests.conftest import write_tiny_config
from transformer.cli import main
from transformer.config.decode import DecodeConfig
from transformer.data.pipeline.text_files import read_lines
from transformer.decoding.candidate import QualityFlag
from transformer.decoding.quality_flags import FLAG_KINDS, FlagThresholds
from transformer.decoding.translation_lines import format_flags
from transformer.decoding.translator import Translator


@pytest.fixture(scope="module")
def sources(trained_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("texts") / "src.en"
    lines = read_lines(trained_run / "data" / "valid.en")[:5]
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def translate(capsys, *arguments: str) -> list[str]:
    assert main(["translate", *arguments]) == 0, capsys.readouterr().err
    return capsys.readouterr().out.splitlines()


def test_sampling_is_reproducible_and_lists_n_samples_per_line(
    trained_run, sources, tmp_path, capsys
) -> None:
    arguments = ["--checkpoint", str(trained_run), "--input", str(sources), "--sampling", "--nbest", "3"]
    first = translate(capsys, *arguments, "--seed", "7")
    assert [line.split("\t")[0] for line in first] == [str(i) for i in range(5) for _ in range(3)]
    assert translate(capsys, *arguments, "--seed", "7") == first
    # Whatever the batch: the last sentence alone gets the samples it got among the others.
    alone = tmp_path / "alone.en"
    alone.write_text(sources.read_text(encoding="utf-8").splitlines()[4] + "\n", encoding="utf-8")
    single = translate(capsys, "--checkpoint", str(trained_run), "--input", str(alone), "--sampling",
                       "--nbest", "3", "--seed", "7")  # fmt: skip
    assert [line.split("\t", 1)[1] for line in single] == [line.split("\t", 1)[1] for line in first[-3:]]


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_sampling_with_top_k_one_prints_the_greedy_translation(
    trained_run, sources, capsys, precision
) -> None:
    common = ["--checkpoint", str(trained_run), "--input", str(sources), "--precision", precision]
    common += ["--device", "cpu"]
    greedy = translate(capsys, *common, "--beam", "1")
    assert translate(capsys, *common, "--sampling", "--top-k", "1", "--temperature", "0.5") == greedy


def test_scores_and_alignments_columns(trained_run, sources, capsys) -> None:
    lines = translate(capsys, "--checkpoint", str(trained_run), "--input", str(sources), "--scores",
                      "--alignments", "--alignment-layer", "0")  # fmt: skip
    translator = Translator.from_checkpoint(trained_run)
    source_lines = sources.read_text(encoding="utf-8").splitlines()
    candidates = translator.translate_nbest(source_lines, alignment_layer=0)
    for line, source, [best] in zip(lines, source_lines, candidates, strict=True):
        log_prob, text, alignment = line.split("\t")
        assert (
            float(log_prob) == pytest.approx(best.log_prob, abs=1e-4) and log_prob == f"{best.log_prob:.4f}"
        )
        assert text == best.text
        pairs = [tuple(map(int, pair.split("-"))) for pair in alignment.split()]
        assert pairs == best.alignment
        # Every target word is aligned (one argmax per subword) and indices are within the sentences.
        assert {target for _, target in pairs} == set(range(len(text.split())))
        assert all(0 <= source_word < len(source.split()) for source_word, _ in pairs)


def test_the_confidence_column_follows_the_log_probability(trained_run, sources, capsys) -> None:
    arguments = ["--checkpoint", str(trained_run), "--input", str(sources), "--beam", "3"]
    lines = translate(capsys, *arguments, "--scores", "--confidence")
    nbest = translate(capsys, *arguments, "--nbest", "2", "--confidence")
    translator = Translator.from_checkpoint(trained_run)
    translator.decode_config = DecodeConfig(beam_size=3, nbest=2, **{
        name: getattr(translator.decode_config, name)
        for name in ("length_penalty", "length_penalty_form", "max_length_offset")
    })  # fmt: skip
    expected = translator.translate_nbest(sources.read_text(encoding="utf-8").splitlines())
    assert lines == [
        f"{found[0].log_prob:.4f}\t{found[0].confidence:.4f}\t{found[0].text}" for found in expected
    ]
    assert nbest == [
        f"{index}\t{item.score:.4f}\t{item.confidence:.4f}\t{item.text}"
        for index, found in enumerate(expected)
        for item in found
    ]
    # The geometric mean of the token probabilities, over the tokens and an EOS that ended them (this tiny
    # model also stops at the length limit, where |Y| is the tokens alone): tests/decoding/test_confidence.py.
    for item in (item for found in expected for item in found):
        steps = [len(item.tokens), len(item.tokens) + 1]
        assert item.confidence in [pytest.approx(math.exp(item.log_prob / count)) for count in steps]
        assert 0.0 < item.confidence < 1.0


def test_the_flags_column_comes_last_with_each_flags_span(trained_run, sources, capsys) -> None:
    lines = translate(
        capsys, "--checkpoint", str(trained_run), "--input", str(sources), "--alignments", "--flags"
    )
    translator = Translator.from_checkpoint(trained_run)
    expected = translator.translate_nbest(
        sources.read_text(encoding="utf-8").splitlines(), alignment_layer=-1, flags=FlagThresholds()
    )
    columns = [line.split("\t") for line in lines]
    assert all(len(line) == 3 for line in columns)
    assert [line[2] for line in columns] == [format_flags(found[0].flags or ()) for found in expected]
    # The tiny model's translations are poor enough that some flag fires somewhere.
    assert any(line[2] for line in columns)
    for text, _, flag_column in columns:
        for item in filter(None, flag_column.split(";")):
            kind, side_span = item.split(":", 1)
            side, span = side_span.rstrip("]").split("[")
            start, end = map(int, span.split(":"))
            assert kind in FLAG_KINDS and side == ("src" if kind == "omission" else "tgt") and start < end
            if side == "tgt":
                assert end <= len(text.split())
    assert format_flags(()) == ""
    assert format_flags([QualityFlag("omission", 3.0, source_span=(3, 6)), QualityFlag(
        "repetition", 6.0, target_span=(6, 12))]) == "omission:src[3:6];repetition:tgt[6:12]"  # fmt: skip


def test_nbest_lines_carry_rank_log_prob_text_and_alignment(trained_run, sources, capsys) -> None:
    lines = translate(capsys, "--checkpoint", str(trained_run), "--input", str(sources), "--beam", "3",
                      "--nbest", "3", "--scores", "--alignments")  # fmt: skip
    translator = Translator.from_checkpoint(trained_run)
    translator.decode_config = DecodeConfig(beam_size=3, nbest=3, **{
        name: getattr(translator.decode_config, name)
        for name in ("length_penalty", "length_penalty_form", "max_length_offset")
    })  # fmt: skip
    expected = translator.translate_nbest(
        sources.read_text(encoding="utf-8").splitlines(), alignment_layer=-1
    )
    rows = [
        f"{index}\t{c.score:.4f}\t{c.log_prob:.4f}\t{c.text}\t{' '.join(f'{i}-{j}' for i, j in c.alignment or [])}"
        for index, found in enumerate(expected)
        for c in found
    ]
    assert lines == rows and len(rows) == 15


def test_prefix_file_forces_the_start_of_each_translation(trained_run, sources, tmp_path, capsys) -> None:
    greedy = translate(capsys, "--checkpoint", str(trained_run), "--input", str(sources), "--beam", "1")
    prefixes = tmp_path / "prefixes.de"
    words = [line.split()[:2] for line in greedy]
    # The second sentence is given another sentence's start, the third none.
    chosen = [" ".join(words[0]), " ".join(words[3]), "", " ".join(words[3]), " ".join(words[4][:1])]
    prefixes.write_text("".join(f"{prefix}\n" for prefix in chosen), encoding="utf-8")
    for beam in ("1", "2"):
        lines = translate(capsys, "--checkpoint", str(trained_run), "--input", str(sources),
                          "--prefix-file", str(prefixes), "--beam", beam)  # fmt: skip
        for line, prefix in zip(lines, chosen, strict=True):
            assert line.startswith(prefix)
    assert translate(capsys, "--checkpoint", str(trained_run), "--input", str(sources), "--prefix-file",
                     str(prefixes), "--beam", "1")[2] == greedy[2]  # fmt: skip


def test_mbr_returns_one_of_its_candidates(trained_run, sources, capsys) -> None:
    common = ["--checkpoint", str(trained_run), "--input", str(sources)]
    beam_list = translate(capsys, *common, "--beam", "4", "--nbest", "4")
    mbr = translate(capsys, *common, "--mbr", "4", "--mbr-candidates", "beam", "--nbest", "2")
    for index in range(5):
        candidates = {line.split("\t")[2] for line in beam_list if line.startswith(f"{index}\t")}
        chosen = [line.split("\t") for line in mbr if line.startswith(f"{index}\t")]
        assert len(chosen) == 2 and all(text in candidates for _, _, text in chosen)
        assert float(chosen[0][1]) >= float(chosen[1][1])  # ranked by expected utility (0-100)
        assert 0.0 <= float(chosen[1][1]) <= 100.0
    sampled = translate(capsys, *common, "--mbr", "8", "--mbr-utility", "bleu", "--epsilon", "0.02")
    assert len(sampled) == 5


def test_an_ensemble_of_one_checkpoint_twice_translates_as_it(trained_run, sources, capsys) -> None:
    common = ["--input", str(sources), "--scores"]
    alone = translate(capsys, "--checkpoint", str(trained_run), *common)
    ensembles = {}
    for mode in ("prob", "logprob"):
        twice = translate(capsys, "--checkpoint", str(trained_run), str(trained_run), *common,
                          "--ensemble-mode", mode)  # fmt: skip
        assert [line.split("\t")[1] for line in twice] == [line.split("\t")[1] for line in alone]
        for pair in zip(twice, alone, strict=True):
            assert math.isclose(*(float(line.split("\t")[0]) for line in pair), abs_tol=1e-3)
        ensembles[mode] = twice
    repeated = translate(capsys, "--checkpoint", str(trained_run), "--checkpoint", str(trained_run), *common)
    assert repeated == ensembles["prob"]  # the option repeated means the same as several paths


@pytest.fixture(scope="module")
def other_vocabulary_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("other")
    config = write_tiny_config(directory, model={"vocab_size": 120}, train={"max_steps": 2})
    assert main(["train", "--config", str(config), "--output-dir", str(directory / "run")]) == 0
    return directory / "run"


def test_an_ensemble_with_another_vocabulary_is_refused_in_one_line(
    trained_run, other_vocabulary_run, sources, capsys
) -> None:
    capsys.readouterr()
    status = main(["translate", "--checkpoint", str(trained_run), str(other_vocabulary_run), "--input",
                   str(sources)])  # fmt: skip
    error = capsys.readouterr().err
    assert status == 2 and error.count("\n") == 1
    assert (
        f"{other_vocabulary_run}: its vocabulary differs from {trained_run}'s: 120 target tokens here, 150"
        in error
    )


def test_evaluate_samples_and_ensembles(trained_run, capsys) -> None:
    sources = trained_run / "data" / "valid.en"
    references = trained_run / "data" / "valid.de"
    assert main(["evaluate", "--checkpoint", str(trained_run), str(trained_run), "--source", str(sources),
                 "--reference", str(references), "--sampling", "--epsilon", "0.02"]) == 0  # fmt: skip
    output = capsys.readouterr().out
    assert "perplexity of the first --checkpoint" in output and "BLEU" in output


def test_translate_help_documents_every_option(capsys, monkeypatch) -> None:
    with pytest.raises(SystemExit):
        main(["translate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for option in ["--sampling", "--temperature", "--top-k", "--top-p", "--epsilon", "--seed", "--nbest",
                   "--mbr", "--mbr-candidates", "--mbr-utility", "--ensemble-mode", "--prefix-file",
                   "--no-repeat-ngram", "--min-length", "--max-length", "--alignments", "--alignment-layer",
                   "--scores"]:  # fmt: skip
        assert option in text
    assert "Pharaoh" in text and "lower is more conservative" in text


def test_translator_api_takes_prefixes_and_ensembles(trained_run, other_vocabulary_run, sources) -> None:
    lines = sources.read_text(encoding="utf-8").splitlines()
    translator = Translator.from_checkpoint(trained_run)
    free = translator.translate(lines)
    prefixes = ["", free[0].split()[0], *free[1:4]]  # sentence 2 gets sentence 1's first word
    forced = translator.translate(lines, prefixes=prefixes)
    assert forced[0] == free[0]
    assert all(text.startswith(prefix) for text, prefix in zip(forced, prefixes, strict=True))
    with pytest.raises(ValueError, match="4 prefixes for 5 sentences"):
        translator.translate(lines, prefixes=prefixes[:4])
    ensemble = Translator.from_checkpoints([trained_run, trained_run], ensemble_mode="logprob")
    assert len(ensemble.models) == 2 and ensemble.translate(lines) == free
    with pytest.raises(
        ValueError, match="ensemble model 2 differs from model 1: 120 target tokens here, 150"
    ):
        Translator(
            translator.model,
            translator.tokenizer,
            ensemble=[Translator.from_checkpoint(other_vocabulary_run).model],
        )


def test_sampling_and_mbr_batches_hold_about_beam_fours_rows(trained_run) -> None:
    translator = Translator.from_checkpoint(trained_run)
    translator.max_tokens = 4096
    for config, budget in [
        (DecodeConfig(beam_size=8), 4096),
        (DecodeConfig(sampling=True, nbest=2), 4096),
        (DecodeConfig(sampling=True, nbest=32), 512),
        (DecodeConfig(mbr=16), 1024),
    ]:
        translator.decode_config = config
        assert translator.batch_budget() == budget


def piped(data: bytes) -> str:
    """The path a shell passes for ``<(...)`` or ``/dev/stdin`` after ``cat FILE |``: a written, closed pipe."""
    read_end, write_end = os.pipe()
    os.write(write_end, data)  # under the 64 KiB a pipe holds
    os.close(write_end)
    return f"/dev/fd/{read_end}"


def close_pipe(path: str) -> None:
    """Close the read end :func:`piped` opened."""
    os.close(int(path.rsplit("/", 1)[1]))


def test_every_reader_takes_a_pipe_whole(trained_run, sources, tmp_path, capsys) -> None:
    """#48 item 1: ``--input``, ``--prefix-file``, ``--hypotheses``/``--reference`` and backtranslate's input."""
    common = ["--checkpoint", str(trained_run), "--beam", "1"]
    from_file = translate(capsys, *common, "--input", str(sources))
    prefixes = tmp_path / "prefixes.de"
    prefixes.write_text("Ein\n\nDer\n\n\n", encoding="utf-8")
    prefixed = translate(capsys, *common, "--input", str(sources), "--prefix-file", str(prefixes))
    pipes = [
        piped(sources.read_bytes()),
        piped(gzip.compress(sources.read_bytes())),
        piped(prefixes.read_bytes()),
    ]
    try:
        assert translate(capsys, *common, "--input", pipes[0]) == from_file  # was none
        assert translate(capsys, *common, "--input", pipes[1], "--prefix-file", pipes[2]) == prefixed
    finally:
        for path in pipes:
            close_pipe(path)
    references = read_lines(trained_run / "data" / "valid.de") * 100
    text = "".join(f"{line}\n" for line in references[:500]).encode("utf-8")
    assert len(text) > 8192
    (tmp_path / "ref.de").write_bytes(text)
    pipes = [piped(text), piped(sources.read_bytes())]
    try:
        assert main(["evaluate", "--hypotheses", pipes[0], "--reference", str(tmp_path / "ref.de")]) == 0
        assert capsys.readouterr().out.startswith("BLEU 100.00 ")  # was 436 of 500 lines: refused as unequal
        arguments = ["backtranslate", *common, "--input", pipes[1], "--output", str(tmp_path / "bt")]
        assert main(arguments) == 0
        written, dropped = re.findall(r"\d+", capsys.readouterr().out)[:2]  # "wrote 3 ... (2 dropped: empty)"
        assert int(written) + int(dropped) == len(from_file)
    finally:
        for path in pipes:
            close_pipe(path)


def test_an_output_link_or_fifo_is_written_through(trained_run, sources, tmp_path, capsys) -> None:
    """#48 item 2: ``--output`` through a link writes its target; a FIFO gets the lines; neither is replaced."""
    common = ["--checkpoint", str(trained_run), "--beam", "1", "--input", str(sources)]
    expected = translate(capsys, *common)
    (tmp_path / "kept").mkdir()
    (tmp_path / "out.de").symlink_to("kept/out.de")
    assert translate(capsys, *common, "--output", str(tmp_path / "out.de")) == []
    assert (tmp_path / "out.de").is_symlink()
    assert (tmp_path / "kept" / "out.de").read_text(encoding="utf-8").splitlines() == expected
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert translate(capsys, *common, "--output", str(fifo)) == []
    reader.join(timeout=30)
    assert received[0].decode("utf-8").splitlines() == expected and not fifo.is_file()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["kept", "out.de", "out.fifo"]


def test_a_device_may_be_both_input_and_output(trained_run, tmp_path, capsys) -> None:
    """One terminal is /dev/stdin and /dev/stdout; writing a device destroys nothing (it was refused as one)."""
    terminal = tmp_path / "terminal"
    try:
        os.mknod(terminal, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null, in our own folder
    except PermissionError:
        pytest.skip("making a device node needs root")
    arguments = ["--checkpoint", str(trained_run), "--input", str(terminal), "--output", str(terminal)]
    assert translate(capsys, *arguments) == []
    assert stat.S_ISCHR(terminal.lstat().st_mode)
