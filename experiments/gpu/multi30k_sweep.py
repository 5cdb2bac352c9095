"""Train and score many Multi30k variants of the shipped config on one GPU, several at a time.

    python -m experiments.gpu.multi30k_sweep SPEC_FILE MULTI30K_DIR WORK_DIR [--parallel N] [--config CONFIG]

from the repository root (``PYTHONPATH=src`` where the ``transformer`` package is not installed).

Each line of SPEC_FILE is ``NAME --set section.key=value ...`` (blank lines and ``#`` comments skipped): the
``transformer train`` overrides of that variant over ``--config`` (default ``configs/multi30k.yaml``;
``train.device=cuda`` and no time limit are added). Every run is averaged over its last 3 and last 5
checkpoints; the best (lowest validation loss) checkpoint and both averages are scored on the validation set
with beam 4 under the run's own decode settings and under the power length penalty with alpha 1. One JSON line
per (run, weights, search) goes to WORK_DIR/scores.jsonl and to standard output; each run's metrics.jsonl and
log stay in WORK_DIR/NAME.
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
#: How this script runs; the scoring steps run it again so, in the repository root.
MODULE = "experiments.gpu.multi30k_sweep"


def read_spec(path: Path) -> list[tuple[str, list[str]]]:
    """Read the variants to train from a spec file.

    Parameters
    ----------
    path : Path
        Lines of ``NAME ARG ...``; blank lines and lines starting with ``#`` are skipped.

    Returns
    -------
    list of tuple of (str, list of str)
        The run name and its ``transformer train`` arguments, in file order.

    Notes
    -----
    A missing file, unbalanced quotes and a repeated name (the runs would share an output directory) stop with
    one line naming the file (and line).
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise SystemExit(f"{path}: cannot read the spec ({error.strerror})") from None
    variants: list[tuple[str, list[str]]] = []
    for line_number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            name, *arguments = shlex.split(line)
        except ValueError as error:
            raise SystemExit(f"{path}:{line_number}: {error}") from None
        if any(name == seen for seen, _ in variants):
            raise SystemExit(f"{path}:{line_number}: run name {name!r} repeated")
        variants.append((name, arguments))
    return variants


def run_variant(name: str, arguments: list[str], config: Path, data: Path, work: Path) -> str:
    """Train one variant, average its checkpoints and score them; return its log's last line.

    Parameters
    ----------
    name : str
        Run name (the output directory under ``work``).
    arguments : list of str
        Extra ``transformer train`` arguments.
    config : Path
        The config file the arguments override.
    data : Path
        Folder with the Multi30k ``train.*`` and ``val.*`` gzip files.
    work : Path
        Folder for the runs and ``scores.jsonl``.

    Returns
    -------
    str
        The training log's summary line (or the error).

    Notes
    -----
    Each step runs as its own process, one CPU thread each, so many variants share the machine. A failed step
    ends this variant with a line naming its log, not the sweep.
    """
    environment = dict(os.environ, OMP_NUM_THREADS="1")
    run_dir = work / name
    train = [sys.executable, "-m", "transformer.cli", "train", "--config", str(config)]
    train += ["--set", f"data.mirror={data}", "--set", "train.device=cuda", "--set", "train.max_minutes=null"]
    train += ["--set", "train.threads=1", *arguments, "--output-dir", str(run_dir)]
    averaged = {count: work / f"{name}-avg{count}" for count in (3, 5)}
    average = [sys.executable, "-m", "transformer.cli", "average-checkpoints", "--run", str(run_dir)]
    weights = {"best": run_dir, **{f"avg{count}": path for count, path in averaged.items()}}
    # (step, command, whether it prints score lines): the scorer's JSON lines go to scores.jsonl, the rest to the log.
    steps = [("training", train, False)]
    steps += [
        (f"averaging {count}", [*average, "--last", str(count), "--output", str(path)], False)
        for count, path in averaged.items()
    ]
    steps += [
        (
            f"scoring {label}",
            [sys.executable, "-m", MODULE, "--score", name, label, str(path), str(data)],
            True,
        )
        for label, path in weights.items()
    ]
    with open(work / f"{name}.log", "w", encoding="utf-8") as log:
        for step, command, scoring in steps:
            log.flush()
            finished = subprocess.run(
                command,
                cwd=REPOSITORY,
                env=environment,
                stdout=subprocess.PIPE if scoring else log,
                stderr=log if scoring else subprocess.STDOUT,
                text=True,
            )
            if finished.returncode != 0:
                return f"{name}: {step} failed (exit {finished.returncode}), see {name}.log"
            if scoring:
                with open(work / "scores.jsonl", "a", encoding="utf-8") as scores:
                    scores.write(finished.stdout)
                print(finished.stdout, end="", flush=True)
    log_text = (work / f"{name}.log").read_text(encoding="utf-8").replace("\r", "\n")
    summary = [line for line in log_text.splitlines() if line.startswith("trained")]
    return f"{name}: {summary[-1] if summary else 'no summary line'}"


def score(name: str, label: str, checkpoint: str, data: Path) -> None:
    """Print the validation BLEU of one checkpoint under two searches as JSON lines.

    Parameters
    ----------
    name : str
        Run name, copied into the records.
    label : str
        Which weights ("best", "avg3", "avg5"), copied into the records.
    checkpoint : str
        Run directory or averaged checkpoint.
    data : Path
        Folder with ``val.en.gz`` and ``val.de.gz``.

    Returns
    -------
    None

    Notes
    -----
    Searches: the checkpoint's own decode settings (in the recorded sweeps: beam 4, GNMT penalty 0.6; the
    config has since moved to the power penalty, so "own" and "power1" now coincide), and the
    same with the power length penalty, alpha 1 (fairseq's and CTranslate2's default).
    """
    import dataclasses

    from transformer.data.pipeline.text_files import read_lines
    from transformer.decoding.translator import Translator
    from transformer.evaluation.bleu import score_translations

    sources, references = read_lines(data / "val.en.gz"), read_lines(data / "val.de.gz")
    translator = Translator.from_checkpoint(checkpoint, None, "cuda")
    own = translator.decode_config
    power = dataclasses.replace(own, length_penalty=1.0, length_penalty_form="power")
    for search, decode_config in (("own", own), ("power1", power)):
        translator.decode_config = decode_config
        hypotheses = translator.translate(sources)
        cased = score_translations(hypotheses, references).bleu
        lowercased = score_translations(hypotheses, references, lowercase=True).bleu
        record = {"run": name, "weights": label, "search": search, "bleu": round(cased, 2)}
        record["bleu_lc"] = round(lowercased, 2)
        print(json.dumps(record))


def main() -> None:
    """Run the sweep named on the command line (or score one checkpoint, the internal ``--score`` mode).

    Returns
    -------
    None

    Notes
    -----
    Arguments as the module docstring says.
    """
    if sys.argv[1:2] == ["--score"]:
        name, label, checkpoint, data = sys.argv[2:6]
        score(name, label, checkpoint, Path(data))
        return
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.splitlines()[0])
    parser.add_argument("spec", type=Path)
    parser.add_argument("data", type=Path)
    parser.add_argument("work", type=Path)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--config", type=Path, default=REPOSITORY / "configs" / "multi30k.yaml")
    args = parser.parse_args()
    variants = read_spec(args.spec)
    args.work.mkdir(parents=True, exist_ok=True)
    started = time.time()
    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        futures = [
            pool.submit(
                run_variant, name, arguments, args.config.resolve(), args.data.resolve(), args.work.resolve()
            )
            for name, arguments in variants
        ]
        for future in futures:
            print(future.result(), flush=True)
    print(f"sweep of {len(variants)} runs took {time.time() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
