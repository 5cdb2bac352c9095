"""Bad inputs, as a new user types them, through every command: one line, a non-zero exit, nothing touched.

Each row of :data:`BAD_INPUTS` runs ``transformer`` on a workspace holding a trained tiny run, text files and
a few broken ones (issue #26 tried 49 such inputs on the quick-start model). Every row must end with status
2, exactly one line on standard error (``transformer COMMAND: error: ...``) that says what is wrong, nothing
on standard output, and the workspace exactly as it was: every file's bytes and modification time, and no
file or folder created or removed.
"""

import io
import json
import os
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.conftest import write_tiny_config
from transformer import cli
from transformer.checkpoint.layout import CHECKSUM_METADATA_KEY, resolve_checkpoint
from transformer.checkpoint.weights import read_weights_metadata
from transformer.cli import main
from transformer.data.corpora.synthetic.generation import generate_pairs
from transformer.data.pipeline.text_files import read_lines
from transformer.data.pipeline.tokenizer import Tokenizer
from transformer.data.shortlist import Shortlist, save_shortlist
from transformer.decoding import translation_progress


@pytest.fixture(scope="module")
def workspace(trained_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder a user might work in: a run, texts, a config, and some broken files."""
    root = tmp_path_factory.mktemp("workspace")
    shutil.copytree(trained_run, root / "run", ignore=shutil.ignore_patterns("data", "*.lock"))
    sources = read_lines(trained_run / "data" / "valid.en")[:3]
    references = read_lines(trained_run / "data" / "valid.de")[:3]
    (root / "src.en").write_text("".join(f"{line}\n" for line in sources), encoding="utf-8")
    (root / "ref.de").write_text("".join(f"{line}\n" for line in references), encoding="utf-8")
    (root / "short.de").write_text(f"{references[0]}\n", encoding="utf-8")
    (root / "prefix.de").write_text(f"{references[0][:5]}\n\n", encoding="utf-8")  # 2 lines for 3 sources
    (root / "nul.en").write_bytes(b"\x00" * 3000 + b"\n")
    (root / "escape.de").write_text(f"{references[0]}\n\x1b[31m{references[1]}\n", encoding="utf-8")
    (root / "latin1.en").write_bytes(b"fine\ncaf\xe9\n")
    (root / "link.en").symlink_to("src.en")
    os.link(root / "src.en", root / "hardlink.en")
    (root / "folder").mkdir()
    (root / "marian").mkdir()
    (root / "marian" / "config.json").write_text("{}", encoding="utf-8")
    (root / "ct2").mkdir()  # a user's folder that merely holds a file named like CTranslate2's (#48 item 3)
    (root / "ct2" / "model.bin").write_bytes(b"mine")
    (root / "ct2" / "notes.txt").write_text("mine too", encoding="utf-8")
    (root / "loop.de").symlink_to("loop.de")  # links, a FIFO (never opened by a row that fails) (#48 item 2)
    (root / "dangling.en").symlink_to("gone.en")
    (root / "folder-link").symlink_to("folder")
    os.mkfifo(root / "fifo")
    foreign = Shortlist(
        "0000000000000000",
        150,
        torch.zeros(151, dtype=torch.long),
        torch.zeros(0, dtype=torch.long),
        torch.tensor([2]),
    )
    save_shortlist(foreign, root / "foreign.safetensors")  # another vocabulary's shortlist (#49 item 1)
    write_broken_checkpoints(root)
    write_configs(root)
    return root


def best_checkpoint(root: Path) -> str:
    """The run's best checkpoint, relative to the workspace (the one ``--checkpoint run`` means)."""
    return str(resolve_checkpoint(root / "run").relative_to(root))


def write_broken_checkpoints(root: Path) -> None:
    """A damaged copy, an old-format copy with overflowing weights, and an index naming a lost step.

    And for #48 items 4-5: copies with another tokenizer of the same size and with a config edited in the
    weights' header, indexes naming a checkpoint outside their run (by ``..`` and by a link), malformed
    indexes, and a config file with a negative learning rate.
    """
    best = best_checkpoint(root)
    shutil.copytree(root / best, root / "damaged")
    with (root / "damaged" / "model.safetensors").open("r+b") as handle:
        handle.seek((root / "damaged" / "model.safetensors").stat().st_size // 2)
        handle.write(b"\x3f" * 4096)  # finite floats: only the checksum tells them from weights
    shutil.copytree(root / best, root / "overflowing")
    weights_file = root / "overflowing" / "model.safetensors"
    metadata = read_weights_metadata(weights_file)
    del metadata[CHECKSUM_METADATA_KEY]  # as written before checksums were recorded
    weights = load_file(str(weights_file))
    name = "decoder.layers.0.feed_forward.linear_out.weight"
    weights[name] = torch.full_like(weights[name], 3e38)  # finite, so only the scores tell
    save_file(weights, str(weights_file), metadata=metadata)
    lost = root / "lost" / "checkpoints"
    lost.mkdir(parents=True)
    index = {"latest": "step-00000944", "best": None, "checkpoints": ["step-00000944"]}
    (lost / "index.json").write_text(json.dumps(index), encoding="utf-8")
    write_tampered_checkpoints(root, best)


def write_tampered_checkpoints(root: Path, best: str) -> None:
    """#48 items 4-5: checkpoints and indexes changed by hand, each of which used to load (or crash)."""
    shutil.copytree(root / best, root / "swapped-tokenizer")
    pairs = generate_pairs(300, seed=77)  # another corpus: another vocabulary of the run's size (150)
    other = Tokenizer.train([side for pair in pairs for side in pair], root / "other.model", 150)
    (root / "swapped-tokenizer" / "tokenizer.model").write_bytes(other.serialized())
    shutil.copytree(root / best, root / "edited-config")
    weights_file = root / "edited-config" / "model.safetensors"
    metadata = read_weights_metadata(weights_file)  # num_heads 4 -> 2 keeps every tensor's shape
    metadata["model_config"] = json.dumps({**json.loads(metadata["model_config"]), "num_heads": 2})
    save_file(load_file(str(weights_file)), str(weights_file), metadata=metadata)
    step = Path(best).name
    for name, index in {
        "escaping": {"latest": f"../../{best}", "best": None, "checkpoints": []},
        "index-list": [],
        "index-number": {"latest": step, "best": 5, "checkpoints": [step]},
        "escaping-link": {"latest": step, "best": None, "checkpoints": [step]},
    }.items():
        (root / name / "checkpoints").mkdir(parents=True)
        (root / name / "checkpoints" / "index.json").write_text(json.dumps(index), encoding="utf-8")
    (root / "escaping-link" / "checkpoints" / step).symlink_to(Path("..", "..", best))
    write_tiny_config(root, "negative-rate.yaml", train={"peak_learning_rate": -1})


def write_configs(root: Path) -> None:
    """The tiny experiment's config, and one with a YAML syntax error."""
    write_tiny_config(root)
    (root / "broken.yaml").write_text(
        "model:\n  vocab_size: 150\n  dropout: [0.1\ntrain: {}\n", encoding="utf-8"
    )


def bad(command_line: str, message: str, stdin: bytes | None = None) -> object:
    """One row of the table: a command line as a user types it (shell quoting), and its one error line."""
    return pytest.param(shlex.split(command_line), message, stdin, id=command_line)


#: ``transformer`` command lines (``{best}`` is the run's best checkpoint), the text the one error line must hold,
#: and standard input (None: none is read).
BAD_INPUTS = [
    # --- translate: outputs that are inputs (#26 item 2) ---
    bad(
        "translate --checkpoint run --input src.en --output src.en",
        "--output src.en: is --input src.en; writing it would destroy it",
    ),
    bad("translate --checkpoint run --input src.en --output link.en", "--output link.en: is --input src.en"),
    bad(
        "translate --checkpoint run --input src.en --output hardlink.en",
        "--output hardlink.en: is --input src.en",
    ),
    bad(
        "translate --checkpoint run --input src.en --output '{best}/model.safetensors'",
        "--output {best}/model.safetensors: is --checkpoint {best}/model.safetensors",
    ),
    bad(
        "translate --checkpoint run --input src.en --output folder",
        "--output folder: is a directory; expected a file",
    ),
    # --- translate: input text (#26 item 4) ---
    bad(
        "translate --checkpoint run --input nul.en", "nul.en line 1: control character U+0000 at character 1"
    ),
    bad(
        "translate --checkpoint run",
        "standard input line 2: control character U+0000",
        b"A dog.\n" + b"\x00" * 3000 + b"\n",
    ),
    bad("translate --checkpoint run", "standard input line 1: control character U+001B", b"\x1b[2J\n"),
    bad("translate --checkpoint run --input latin1.en", "latin1.en line 2: not valid UTF-8"),
    bad("translate --checkpoint run", "standard input line 1: not valid UTF-8", b"caf\xe9\n"),
    bad("translate --checkpoint run --input missing.en", "cannot read missing.en: No such file or directory"),
    # --- translate: numbers (#26 items 5, 6) ---
    bad(
        "translate --checkpoint run --input src.en --alpha nan",
        "argument --alpha: expected a finite number from 0 to 10, got 'nan'",
    ),
    bad(
        "translate --checkpoint run --input src.en --alpha inf",
        "argument --alpha: expected a finite number from 0 to 10, got 'inf'",
    ),
    bad(
        "translate --checkpoint run --input src.en --alpha=-1",
        "argument --alpha: expected a finite number from 0 to 10, got '-1'",
    ),
    bad(
        "translate --checkpoint run --input src.en --beam 0",
        "argument --beam: expected an integer from 1 to 64, got '0'",
    ),
    bad(
        "translate --checkpoint run --input src.en --beam 40000",
        "argument --beam: expected an integer from 1 to 64, got '40000'",
    ),
    bad(
        "translate --checkpoint run --input src.en --max-length-offset 100000000",
        "argument --max-length-offset: expected an integer from 0 to 1024, got '100000000'",
    ),
    bad(
        "translate --checkpoint run --input src.en --nbest 5",
        "--nbest 5: must be between 1 and the beam size, 2 (the checkpoint's; raise it with --beam)",
    ),
    bad(
        "translate --checkpoint run --input src.en --beam 3 --nbest 4",
        "--nbest 4: must be between 1 and the beam size, 3 (--beam)",
    ),
    bad(
        "translate --checkpoint run --input src.en --device gpu",
        "--device gpu: expected auto, cpu, cuda or cuda:N",
    ),
    bad("translate --checkpoint run --beams 2", "unrecognized arguments: --beams 2"),
    # --- translate: decoding options (#28) ---
    bad(
        "translate --checkpoint run --input src.en --sampling --temperature 0",
        "argument --temperature: expected a finite number from 0.01 to 100, got '0'",
    ),
    bad(
        "translate --checkpoint run --input src.en --sampling --temperature nan",
        "argument --temperature: expected a finite number from 0.01 to 100, got 'nan'",
    ),
    bad(
        "translate --checkpoint run --input src.en --sampling --top-p 1.5",
        "argument --top-p: expected a finite number from 0.01 to 1, got '1.5'",
    ),
    bad(
        "translate --checkpoint run --input src.en --sampling --top-k=-1",
        "argument --top-k: expected an integer from 0 to 1000000, got '-1'",
    ),
    bad(
        "translate --checkpoint run --input src.en --sampling --epsilon 0.7",
        "argument --epsilon: expected a finite number from 0 to 0.5, got '0.7'",
    ),
    bad(
        "translate --checkpoint run --input src.en --sampling --seed=-3",
        "argument --seed: expected an integer from 0 to 9223372036854775807, got '-3'",
    ),
    bad(
        "translate --checkpoint run --input src.en --mbr 1",
        "argument --mbr: expected an integer from 2 to 256, got '1'",
    ),
    bad(
        "translate --checkpoint run --input src.en --mbr 4 --nbest 5",
        "--nbest 5: must be between 1 and the MBR candidates, 4 (--mbr)",
    ),
    bad(
        "translate --checkpoint run --input src.en --mbr 4 --mbr-utility ter",
        "argument --mbr-utility: invalid choice: 'ter'",
    ),
    bad(
        "translate --checkpoint run --input src.en --no-repeat-ngram 99",
        "argument --no-repeat-ngram: expected an integer from 0 to 32, got '99'",
    ),
    bad(
        "translate --checkpoint run --input src.en --min-length 5 --max-length 3",
        "--max-length 3: must be at least max(1, min_length=5)",
    ),
    bad(
        "translate --checkpoint run --input src.en --max-length 0",
        "argument --max-length: expected an integer from 1 to 1024, got '0'",
    ),
    bad(
        "translate --checkpoint run --input src.en --prefix-file prefix.de",
        "--prefix-file prefix.de has 2 lines but src.en has 3",
    ),
    bad(
        "translate --checkpoint run --prefix-file prefix.de",
        "--prefix-file prefix.de has 2 lines but standard input has 1",
        b"A dog.\n",
    ),
    bad(
        "translate --checkpoint run --prefix-file -",
        "--prefix-file -: standard input holds the text to translate; give a file of prefixes",
        b"A dog.\n",
    ),
    bad(
        "translate --checkpoint run --input src.en --prefix-file missing.de",
        "cannot read missing.de: No such file or directory",
    ),
    bad(
        "translate --checkpoint run --input src.en --prefix-file prefix.de --output prefix.de",
        "--output prefix.de: is --prefix-file prefix.de; writing it would destroy it",
    ),
    bad(
        "translate --checkpoint run --input src.en --alignments --alignment-layer 3",
        "--alignment-layer 3: alignment layer 3 is out of range: the decoder has 1 attention layer(s)",
    ),
    bad(
        "translate --checkpoint run --input src.en --alignment-layer 0",
        "--alignment-layer 0: only used with --alignments",
    ),
    bad(
        "translate --checkpoint run --input src.en --ensemble-mode mean",
        "argument --ensemble-mode: invalid choice: 'mean'",
    ),
    bad("translate --checkpoint run nowhere --input src.en", "nowhere: no checkpoint here"),
    bad(
        "translate --checkpoint run '{best}' --input src.en --output '{best}/model.safetensors'",
        "--output {best}/model.safetensors: is --checkpoint",
    ),
    bad("translate --input src.en", "the following arguments are required: --checkpoint"),
    # --- translate: checkpoints (#26 items 3, 8, 9) ---
    bad(
        "translate --checkpoint damaged --input src.en",
        "damaged/model.safetensors: the weights do not match the SHA-256 recorded when they were saved",
    ),
    bad(
        "translate --checkpoint overflowing --input src.en",
        "overflowing/model.safetensors: the model computes NaN scores",
    ),
    bad(
        "translate --checkpoint lost --input src.en",
        "lost/checkpoints/index.json: names step-00000944 as the latest checkpoint, but lost/checkpoints/step-00000944 does not exist",
    ),
    bad("translate --checkpoint src.en --input src.en", "src.en: a file, not a checkpoint"),
    bad("translate --checkpoint nowhere --input src.en", "nowhere: no checkpoint here"),
    bad(
        "translate --checkpoint run --input src.en --engine ctranslate2",
        "'transformer convert --to ctranslate2 run OUTPUT_DIR'",
    ),
    # --- evaluate (#26 item 1) ---
    bad(
        "evaluate --checkpoint run --source src.en --reference ref.de --output ref.de",
        "--output ref.de: is --reference ref.de; writing it would destroy it",
    ),
    bad(
        "evaluate --checkpoint run --source src.en --reference ref.de --output hardlink.en",
        "--output hardlink.en: is --source src.en",
    ),
    bad("evaluate --hypotheses ref.de --reference escape.de", "escape.de line 2: control character U+001B"),
    bad(  # #28: decoding options are checked for evaluate as for translate
        "evaluate --checkpoint run --source src.en --reference ref.de --sampling --top-p 0",
        "argument --top-p: expected a finite number from 0.01 to 1, got '0'",
    ),
    bad(
        "evaluate --checkpoint run nowhere --source src.en --reference ref.de",
        "nowhere: no checkpoint here",
    ),
    bad(
        "evaluate --checkpoint run '{best}' --source src.en --reference ref.de --output '{best}/model.safetensors'",
        "--output {best}/model.safetensors: is --checkpoint",
    ),
    bad(
        "evaluate --hypotheses - --reference ref.de",
        "standard input line 1: control character U+0000",
        b"\x00\n",
    ),
    bad(
        "evaluate --checkpoint run --source src.en --reference short.de",
        "src.en has 3 lines but short.de has 1",
    ),
    bad(
        "evaluate --checkpoint run --source src.en --reference ref.de --alpha nan",
        "argument --alpha: expected a finite number",
    ),
    bad("evaluate --reference ref.de", "evaluate needs --hypotheses, or --checkpoint with --source"),
    # --- average-checkpoints ---
    bad(
        "average-checkpoints --inputs '{best}' --output '{best}'",
        "--output {best}: is --inputs {best}; replacing it would delete it",
    ),
    bad("average-checkpoints --run run --last 1 --output run", "--output run: holds --run {best}"),
    bad(
        "average-checkpoints --run run --last 0 --output averaged",
        "argument --last: expected an integer of at least 1, got '0'",
    ),
    bad(
        "average-checkpoints --run folder --output averaged", "folder/checkpoints: no checkpoints to average"
    ),
    bad(
        "average-checkpoints --inputs '{best}' damaged --output averaged",
        "damaged/model.safetensors: the weights do not match the SHA-256 recorded when they were saved",
    ),
    # --- convert ---
    bad(
        "convert --to ctranslate2 '{best}' '{best}'",
        "OUTPUT_DIR {best}: is CHECKPOINT {best}; replacing it would delete it",
    ),
    bad("convert --to hf-marian run run", "OUTPUT_DIR run: holds CHECKPOINT {best}"),
    bad(
        "convert --from hf-marian marian --to marian",
        "--to marian: is MARIAN_DIR marian; replacing it would delete it",
    ),
    bad(
        "convert --to hf-marian damaged exported",
        "damaged/model.safetensors: the weights do not match the SHA-256 recorded when they were saved",
    ),
    bad(
        "convert --to tflite run exported",
        "export with: convert --to hf-marian|ctranslate2|onnx CHECKPOINT OUTPUT_DIR",
    ),
    # --- backtranslate (#28 item 6) ---
    bad(
        "backtranslate --checkpoint run --input ref.de --output run",
        "--output run: holds --checkpoint",
    ),
    bad(
        "backtranslate --checkpoint run --input ref.de --output marian",
        "--output marian: exists and does not hold an earlier back-translation (backtranslation.json)",
    ),
    bad("backtranslate --checkpoint run --input ref.de --output src.en", "--output src.en: is a file"),
    bad(
        "backtranslate --checkpoint run --input ref.de --output bt --source-lang 'e n'",
        "--source-lang 'e n': expected a file suffix such as en",
    ),
    bad(
        "backtranslate --checkpoint run --input ref.de --output bt --source-lang de",
        "--source-lang and --target-lang are both 'de'",
    ),
    bad(
        "backtranslate --checkpoint run --input ref.de --output bt --beam 2 --sampling",
        "--beam and --sampling: back-translation samples unless --beam asks for beam search",
    ),
    bad(
        "backtranslate --checkpoint run --output bt",
        "standard input line 1: control character U+001B",
        b"\x1b[2J\n",
    ),
    bad(
        "backtranslate --checkpoint run --input ref.de --output bt --temperature 0",
        "argument --temperature: expected a finite number from 0.01 to 100, got '0'",
    ),
    # --- attention ---
    bad(
        "attention --checkpoint '{best}' --text 'A dog.' --output-dir '{best}'",
        "--output-dir {best}: is --checkpoint {best}; the new files would join it",
    ),
    bad(
        "attention --checkpoint run --text 'A\x00dog.' --output-dir maps",
        "--text line 1: control character U+0000 at character 2",
    ),
    bad(
        "evaluate --reference ref.de --hypotheses short.de --output written.de",
        "--output written.de: evaluate writes the translations it makes; with --hypotheses it makes none",
    ),
    bad(
        "attention --checkpoint run --text 'A dog.' --beam 0",
        "argument --beam: expected an integer from 1 to 64, got '0'",
    ),
    bad(
        "attention --checkpoint run --text 'A dog.' --layer 99 --output-dir maps",
        "--layer 99: the model has 1 layer per stack; use 0..0, or -1..-1 counting from the end",
    ),
    # --- plot ---
    bad(
        "plot --run run --output run/metrics.jsonl", "--output run/metrics.jsonl: is --run run/metrics.jsonl"
    ),
    bad("plot --run folder --output curves.png", "metrics file folder/metrics.jsonl does not exist"),
    bad("plot --run run --output folder", "--output folder: is a directory; expected a file"),
    # --- train, prepare, quickstart (#26 item 10) ---
    bad(
        "train --config broken.yaml --output-dir new-run",
        "broken.yaml:4:6: not valid YAML: expected ',' or ']', but got ':' (while parsing a flow sequence at line 3, column 12)",
    ),
    bad("prepare --config broken.yaml --output-dir new-run", "broken.yaml:4:6: not valid YAML"),
    bad("quickstart --config broken.yaml --output-dir new-run", "broken.yaml:4:6: not valid YAML"),
    bad("train --config no-such.yaml", "--config no-such.yaml: no such file"),
    bad(
        "train --config tiny.yaml --output-dir new-run --set train.max_steps=many",
        "--set train.max_steps=many: [train]",
    ),
    bad(
        "train --config tiny.yaml --output-dir new-run --set decode.length_penalty=.nan",
        "--set decode.length_penalty=.nan: [decode] DecodeConfig.length_penalty=nan must be a finite number",
    ),
    bad(  # the command line's bound holds for a config value too
        "train --config tiny.yaml --output-dir new-run --set decode.max_length_offset=100000000",
        "[decode] DecodeConfig.max_length_offset=100000000 must be from 0 to 1024",
    ),
    bad(  # a reproducible run cannot follow the clock
        "train --config tiny.yaml --output-dir new-run --set train.deterministic=true --set train.max_minutes=2",
        "--set train.max_minutes=2: [train] TrainConfig.deterministic=True with max_minutes=2: a time budget",
    ),
    bad(  # #26 item 7 (a new folder, and one that exists without a run)
        "train --config tiny.yaml --output-dir new-run --resume",
        "--resume: new-run holds no checkpoint to resume (no new-run/checkpoints/index.json)",
    ),
    bad(
        "train --config tiny.yaml --output-dir folder --resume",
        "--resume: folder holds no checkpoint to resume",
    ),
    bad(
        "train --config tiny.yaml --output-dir src.en", "--output-dir src.en: is a file; expected a directory"
    ),
    bad("quickstart --examples -1", "argument --examples: expected an integer of at least 0, got '-1'"),
    # --- experiment ---
    bad(
        "experiment table2 --scale tiny --only bogus --output-dir experiment",
        "--only bogus: table2 has no such variant or group",
    ),
    bad(
        "experiment table2 --scale tiny --seeds 0 --output-dir experiment",
        "argument --seeds: expected a count from 1 to 100 or seeds such as 1,5,7 or 4-6, got '0'",
    ),
    bad("experiment table2 --scale tiny --seeds 5,5 --output-dir experiment", "seed 5 named twice in '5,5'"),
    bad(  # #29 item 6: the seed comes from --seeds; --set train.seed was overwritten without a word
        "experiment table2 --scale tiny --set train.seed=7 --output-dir experiment",
        "--set train.seed=7: train.seed is set for each run by --seeds; use --seeds (e.g. --seeds 1,5,7)",
    ),
    bad(  # #29 item 6: every Table 2 row states its width, so a base d_model was ignored
        "experiment table2 --scale tiny --only base --set model.d_model=64 --output-dir experiment",
        "--set model.d_model: table2 defines it per row (row base sets it)",
    ),
    bad(
        "experiment table2 --scale tiny --parallel 0 --output-dir experiment",
        "argument --parallel: expected an integer of at least 1, got '0'",
    ),
    bad(
        "experiment table2 --scale tiny --only base --set train.max_steps=many --output-dir experiment",
        "max_steps='many'",
    ),
    bad("experiment table9", "argument name: invalid choice: 'table9'"),
    # #29 item 3: the report of an experiment's records
    bad("experiment report", "report: name the experiment, e.g. transformer experiment report table2"),
    bad(
        "experiment report table2 --seeds 2 --output-dir experiment",
        "report reads records, it trains nothing: --seeds does not apply",
    ),
    bad("experiment report table2 --output-dir experiment", "--document EXPERIMENTS.md: no such file"),
    bad(
        "experiment report table2 --output-dir experiment --document tiny.yaml",
        "--output-dir experiment: no records in experiment/results.jsonl",
    ),
    bad(
        "experiment table2 --scale tiny --check --output-dir experiment",
        "table2 trains or measures, it does not report: --check does not apply",
    ),
    # --- serve (#27): refused before it serves; --port 0 so no fixed port is taken meanwhile ---
    bad(
        "serve --checkpoint damaged --port 0",
        "damaged/model.safetensors: the weights do not match the SHA-256 recorded when they were saved",
    ),
    bad("serve --checkpoint run --checkpoint run --port 0", "model name 'run' is given twice"),
    bad(
        "serve --checkpoint run --api-keys src.en --port 0",
        "--api-keys src.en:1: a key may not contain whitespace",
    ),
    bad("serve --checkpoint run --admit-every 0 --port 0", "--admit-every"),
    # --- #48 items 1-3 and 12: pipes, FIFOs, device nodes and symlinks; convert's destinations; CLI defaults ---
    # Item 1: a device as input is read as it comes; one without line ends is named, not read until memory ends.
    bad(
        "translate --checkpoint run --input /dev/zero",
        "/dev/zero line 1: more than 1,048,576 bytes without a line end (is this a binary file or a device",
    ),
    bad("evaluate --hypotheses /dev/zero --reference ref.de", "/dev/zero line 1: more than 1,048,576"),
    bad("backtranslate --checkpoint run --input /dev/zero --output bt", "/dev/zero line 1: more than"),
    bad("translate --checkpoint run --input dangling.en", "cannot read dangling.en: No such file"),
    # Item 2: outputs that are links or FIFOs are followed or written straight, never replaced; a loop is named.
    bad(
        "translate --checkpoint run --input src.en --output loop.de",
        "--output loop.de: a symbolic link that leads back to itself (Too many levels of symbolic links)",
    ),
    bad("evaluate --hypotheses src.en --reference ref.de --output loop.de", "--output loop.de: a symbolic"),
    bad("plot --run run --output loop.de", "--output loop.de: a symbolic link that leads back to itself"),
    bad(
        "translate --checkpoint run --input src.en --output folder-link",
        "--output folder-link: is a directory; expected a file",
    ),
    bad(
        "translate --checkpoint run --input nul.en --output fifo",
        "nul.en line 1: control character U+0000",  # the FIFO stays a FIFO: nothing opens it
    ),
    bad("convert --to ctranslate2 run fifo", "OUTPUT_DIR fifo: is not a directory; the output must be a"),
    # Item 3: convert replaces only what it wrote.
    bad(
        "convert --from hf-marian marian --to '{best}'",
        "--to {best}: not an earlier imported checkpoint; replacing it would delete model.safetensors, "
        "optimizer.safetensors, tokenizer.model and 1 more (choose a new or empty directory)",
    ),
    bad(
        "convert --to ctranslate2 run ct2",
        "OUTPUT_DIR ct2: not an earlier CTranslate2 export; replacing it would delete model.bin, notes.txt",
    ),
    bad(
        "convert --to hf-marian run marian",
        "OUTPUT_DIR marian: not an earlier HuggingFace Marian export; replacing it would delete config.json",
    ),
    # Item 12: attention caps the sentence it draws.
    pytest.param(
        ["attention", "--checkpoint", "run", "--text", "word " * 2100],
        "--text: 2,100 words; attention maps are drawn for at most 100 words",
        None,
        id="attention --checkpoint run --text '2,100 words'",
    ),
    # --- #48 items 4-5: tampered checkpoints and indexes; every numeric config field's range ---
    # Item 4: another tokenizer of the same size translated garbage with exit 0; checked at every load.
    bad(
        "translate --checkpoint swapped-tokenizer --input src.en",
        "swapped-tokenizer/tokenizer.model: not the tokenizer checkpoint swapped-tokenizer was saved with",
    ),
    bad(
        "evaluate --checkpoint swapped-tokenizer --source src.en --reference ref.de",
        "swapped-tokenizer/tokenizer.model: not the tokenizer checkpoint swapped-tokenizer was saved with",
    ),
    bad(
        "serve --checkpoint swapped-tokenizer --port 0",
        "swapped-tokenizer/tokenizer.model: not the tokenizer checkpoint swapped-tokenizer was saved with",
    ),
    bad(
        "attention --checkpoint swapped-tokenizer --text 'a b' --output-dir pictures",
        "swapped-tokenizer/tokenizer.model: not the tokenizer checkpoint swapped-tokenizer was saved with",
    ),
    bad(  # nor passed on under fresh checksums
        "convert --to hf-marian swapped-tokenizer exported",
        "swapped-tokenizer/tokenizer.model: not the tokenizer checkpoint swapped-tokenizer was saved with",
    ),
    bad(
        "average-checkpoints --inputs '{best}' swapped-tokenizer --output averaged",
        "swapped-tokenizer/tokenizer.model: not the tokenizer checkpoint swapped-tokenizer was saved with",
    ),
    # Item 4: the model config beside the weights was outside their checksum (num_heads edited translated).
    bad(
        "translate --checkpoint edited-config --input src.en",
        "edited-config/model.safetensors: the model config does not match the SHA-256 recorded when the "
        "checkpoint was saved",
    ),
    bad(
        "convert --to ctranslate2 edited-config exported",
        "edited-config/model.safetensors: the model config does not match the SHA-256 recorded",
    ),
    # Item 4: index.json pointing outside the run was followed; a malformed one was a traceback.
    bad(
        "translate --checkpoint escaping --input src.en",
        "escaping/checkpoints/index.json: \"latest\" names '../../{best}', which is outside "
        "escaping/checkpoints; an index names only the checkpoints in its own folder",
    ),
    bad(
        "translate --checkpoint escaping-link --input src.en",
        'escaping-link/checkpoints/index.json: "latest" names \'step-',  # a link to the run's best, outside
    ),
    bad(
        "translate --checkpoint index-list --input src.en",
        'index-list/checkpoints/index.json: expected a JSON object with "latest", "best" and "checkpoints", '
        "got []",
    ),
    bad(
        "evaluate --checkpoint index-number --source src.en --reference ref.de",
        'index-number/checkpoints/index.json: "best" must be a checkpoint name or null, got 5',
    ),
    bad(
        "average-checkpoints --run index-number --output averaged",
        'index-number/checkpoints/index.json: "best" must be a checkpoint name or null, got 5',
    ),
    bad(
        "train --config tiny.yaml --output-dir index-list --resume",
        'index-list/checkpoints/index.json: expected a JSON object with "latest", "best" and "checkpoints"',
    ),
    # Item 5: every numeric config field has a range, in a file as through --set.
    bad(
        "train --config tiny.yaml --output-dir new-run --set train.peak_learning_rate=-1",
        "--set train.peak_learning_rate=-1: [train] TrainConfig.peak_learning_rate=-1 must be positive or null",
    ),
    bad(
        "train --config negative-rate.yaml --output-dir new-run",
        "negative-rate.yaml: [train] TrainConfig.peak_learning_rate=-1 must be positive or null",
    ),
    bad(
        "prepare --config tiny.yaml --output-dir new-run --set train.adam_beta2=1",
        "--set train.adam_beta2=1: [train] TrainConfig.adam_beta2=1 must be in [0, 1)",
    ),
    bad(
        "train --config tiny.yaml --output-dir new-run --set model.layer_norm_eps=0",
        "--set model.layer_norm_eps=0: [model] TransformerConfig.layer_norm_eps=0 must be in (0, 1]",
    ),
    bad(
        "train --config tiny.yaml --output-dir new-run --set decode.length_penalty=-1",
        "--set decode.length_penalty=-1: [decode] DecodeConfig.length_penalty=-1 must be from 0 to 10",
    ),
    bad(
        "quickstart --config tiny.yaml --output-dir new-run --set data.synthetic_seed=-3",
        "--set data.synthetic_seed=-3: [data] DataConfig.synthetic_seed=-3 must be from 0 to",
    ),
    bad(
        "experiment table2 --scale tiny --only base --set train.adam_beta1=1.5 --output-dir experiment",
        "TrainConfig.adam_beta1=1.5 must be in [0, 1)",
    ),
    # --- distillation (#50) ---
    bad(
        "distill --teacher run --config no-such.yaml --output-dir new-run",
        "--config no-such.yaml: no such file",
    ),
    bad("distill --teacher folder --config tiny.yaml --output-dir new-run", "folder: no checkpoint here"),
    bad(
        "distill --teacher run --config tiny.yaml --output-dir ct2",
        "--output-dir ct2: exists and holds no distill.json of an earlier distill run",
    ),
    bad("distill --teacher run --config tiny.yaml --output-dir run", "--output-dir run: is --teacher run"),
    bad(
        "distill --teacher run --config tiny.yaml --output-dir new-run --reuse-teacher-pass folder",
        "--reuse-teacher-pass folder: no readable distill.json of a distill run",
    ),
    bad(
        "distill --teacher run --config tiny.yaml --output-dir new-run --set distill.teacher_precision=int4",
        "DistillConfig.teacher_precision='int4' is not one of ('fp32', 'bf16', 'int8')",
    ),
    # --- the vocabulary shortlist (#49 item 1) ---
    bad("shortlist --checkpoint run --per-source -1", "argument --per-source: expected an integer from 0 to"),
    bad("shortlist --checkpoint run --source src.en", "--source and --target go together"),
    bad(
        "shortlist --checkpoint run --source src.en --target ref.de --output src.en",
        "--output src.en: is --source src.en; writing it would destroy it",
    ),
    bad("shortlist --checkpoint run --output ref.de", "ref.de: exists and is not a shortlist file"),
    bad("shortlist --checkpoint folder", "folder: no checkpoint here"),
    bad(
        "translate --checkpoint run --input src.en --shortlist",
        "{best}/shortlist.safetensors: no such shortlist file (build one with `transformer shortlist`)",
    ),
    bad(
        "evaluate --checkpoint run --source src.en --reference ref.de --shortlist foreign.safetensors",
        "foreign.safetensors: built for vocabulary 0000000000000000, the checkpoint's is ",
    ),
    bad(
        "translate --checkpoint run --input src.en --shortlist src.en",
        "src.en: not a readable shortlist file",
    ),
    bad(
        "serve --checkpoint run --shortlist --port 0", "{best}/shortlist.safetensors: no such shortlist file"
    ),
]


def snapshot(root: Path) -> dict[str, tuple[bytes, int] | None]:
    """Every path under ``root``: a file's bytes and modification time, None for a folder."""
    state: dict[str, tuple[bytes, int] | None] = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        state[key] = (path.read_bytes(), path.lstat().st_mtime_ns) if path.is_file() else None
    return state


@pytest.fixture
def in_workspace(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(workspace)  # relative paths and default outputs (runs/...) land in the workspace
    yield workspace


@pytest.mark.parametrize(("arguments", "message", "stdin"), BAD_INPUTS)
def test_a_bad_input_gives_one_line_a_failure_status_and_touches_nothing(
    in_workspace: Path, monkeypatch, capsys, arguments: list[str], message: str, stdin: bytes | None
) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin or b""), "utf-8", "surrogateescape"))
    best = best_checkpoint(in_workspace)
    arguments = [argument.format(best=best) for argument in arguments]
    message = message.format(best=best)
    before = snapshot(in_workspace)
    status = main(arguments)
    output = capsys.readouterr()
    assert status == 2
    assert output.err.count("\n") == 1 and output.err.endswith("\n"), output.err
    assert output.err.startswith(f"transformer {arguments[0]}: error: "), output.err
    assert message in output.err, output.err
    assert output.out == ""
    assert snapshot(in_workspace) == before


def test_the_table_covers_every_command_with_files_and_standard_input() -> None:
    commands = {row.values[0][0] for row in BAD_INPUTS}
    parser_commands = {action.dest: action for action in cli.build_parser()._actions}["command"].choices
    assert commands == set(parser_commands)
    assert sum(row.values[2] is not None for row in BAD_INPUTS) >= 4


def test_every_number_option_of_every_command_is_range_checked() -> None:
    """No option parses with a bare ``int`` or ``float``: ``float`` takes "nan" and "inf", neither has bounds."""
    commands = {action.dest: action for action in cli.build_parser()._actions}["command"].choices
    numeric = {
        f"{name} {action.option_strings[0]}": action.type
        for name, parser in commands.items()
        for action in parser._actions
        if action.option_strings and action.type in (int, float)
    }
    # Any layer index; a wrong one is named by the model.
    assert numeric == {"attention --layer": int, "translate --alignment-layer": int}


def test_a_weights_file_as_checkpoint_translates_as_its_directory(in_workspace: Path, capsys) -> None:
    best = best_checkpoint(in_workspace)
    assert main(["translate", "--checkpoint", best, "--input", "src.en"]) == 0
    from_directory = capsys.readouterr().out
    assert main(["translate", "--checkpoint", f"{best}/model.safetensors", "--input", "src.en"]) == 0
    assert capsys.readouterr().out == from_directory and from_directory.count("\n") == 3


def test_a_long_translation_shows_its_progress_on_standard_error(
    in_workspace: Path, monkeypatch, capsys
) -> None:
    # As if the search took longer than the delay.
    monkeypatch.setattr(translation_progress, "PROGRESS_DELAY_SECONDS", 0.0)
    arguments = ["translate", "--checkpoint", "run", "--input", "src.en", "--max-length-offset", "1024"]
    assert main([*arguments, "--output", "progress.de"]) == 0
    output = capsys.readouterr()
    assert output.out == "" and "3/3" in output.err and "sentence" in output.err
    assert len((in_workspace / "progress.de").read_text(encoding="utf-8").splitlines()) == 3
    (in_workspace / "progress.de").unlink()  # the workspace stays as the table expects it
    # A translation shorter than the delay prints nothing extra (a delay no run reaches, so that a loaded
    # machine cannot make this translation "long"; the real delay is PROGRESS_DELAY_SECONDS = 3 s).
    monkeypatch.setattr(translation_progress, "PROGRESS_DELAY_SECONDS", 3600.0)
    assert main(arguments) == 0
    assert capsys.readouterr().err == ""
