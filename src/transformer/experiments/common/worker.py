"""Train and score one run of an experiment, in a process of its own.

``python -m transformer.experiments.common.worker RUN_DIR``.

The runner writes ``RUN_DIR/run.json`` (the experiment, variant, seed and the resolved configuration) and starts
this module with its output going to ``RUN_DIR/log.txt``. It trains with the ordinary trainer (resuming the
run's last checkpoint if there is one, reusing it as it is if training had finished), scores the model on the
validation split, and writes ``RUN_DIR/result.json`` atomically. A process of its own per run keeps a crash,
an out-of-memory kill or a stuck run from taking the other runs with it, and gives each run its own log.
"""

import json
import sys
import time
from pathlib import Path
from typing import Any

from transformer.atomic_files import write_json_atomically, write_text_atomically
from transformer.averaging import average_checkpoints
from transformer.checkpoint.layout import read_index
from transformer.checkpoint.model_checkpoint import Checkpoint, load_checkpoint, load_checkpoint_tokenizer
from transformer.config.experiment import experiment_from_dict
from transformer.data.pipeline.text_files import read_parallel_files
from transformer.decoding.translator import Translator
from transformer.evaluation.bleu import score_translations
from transformer.evaluation.perplexity import corpus_perplexity
from transformer.experiments.common.results import HYPOTHESES_FILE, REFERENCES_FILE
from transformer.experiments.registry import measure_hook
from transformer.training.launch import claim_run_dir_if_main, train_experiment

RUN_FILE = "run.json"
RESULT_FILE = "result.json"
LOG_FILE = "log.txt"


def read_run_spec(run_dir: Path) -> dict[str, Any]:
    """Read the specification the runner wrote into a run directory.

    Parameters
    ----------
    run_dir : Path
        A run directory prepared by the runner.

    Returns
    -------
    dict of str to Any
        ``run.json``: experiment, scale, variant, group, seed, commit and the full configuration.

    Notes
    -----
    The worker reads it to train and score the run; the experiments' measure hooks read it for the scale
    and group, which the configuration alone does not name.
    """
    spec: dict[str, Any] = json.loads((Path(run_dir) / RUN_FILE).read_text(encoding="utf-8"))
    return spec


def scored_checkpoint(run_dir: Path, average_last: int) -> Checkpoint:
    """Pick the checkpoint a run is scored with: its last one, or the average of its last ``average_last``.

    Parameters
    ----------
    run_dir : Path
        A finished run directory.
    average_last : int
        1 for the last checkpoint alone; N > 1 averages the last N the run kept (fewer if it kept fewer).

    Returns
    -------
    Checkpoint
        The weights to score (an in-memory average when ``average_last > 1``).

    Notes
    -----
    The *last* checkpoint, not the one with the best validation loss: the paper reports its models at the end
    of training (Table 2: "no checkpoint averaging"), and choosing by the dev loss would tune on the set the
    scores are reported on.
    """
    checkpoint_dir = run_dir / "checkpoints"
    names = sorted(read_index(checkpoint_dir).get("checkpoints", []))
    if not names:
        raise ValueError(f"{checkpoint_dir}: the run has no checkpoint to score")
    paths = [checkpoint_dir / name for name in names[-average_last:]]
    return average_checkpoints(paths) if len(paths) > 1 else load_checkpoint(paths[0])


def score_run(run_dir: Path, spec: dict[str, Any]) -> dict[str, Any]:
    """Score a trained run on its validation split: perplexity, BLEU, parameters, plus the experiment's own.

    Parameters
    ----------
    run_dir : Path
        The run directory (trained).
    spec : dict of str to Any
        The contents of ``run.json``.

    Returns
    -------
    dict of str to Any
        ``dev_perplexity`` (per target BPE token, teacher forcing), ``dev_bleu`` and ``dev_chrf`` (sacreBLEU,
        the run's ``decode`` settings), ``params``, and whatever the experiment's measure hook adds. The
        translations and their references are written to ``dev_hypotheses.txt`` and ``dev_references.txt``.

    Notes
    -----
    Table 2's "PPL (dev)" is per word-piece, as here; it compares only models with the same vocabulary, which
    every variant of an experiment shares (the runner gives them one tokenizer).
    """
    experiment = experiment_from_dict(spec["config"], source=str(run_dir / RUN_FILE))
    checkpoint = scored_checkpoint(run_dir, int(spec["average_last"]))
    model = checkpoint.build_model()
    tokenizer = load_checkpoint_tokenizer(checkpoint.path)
    split_files = json.loads((run_dir / "split_files.json").read_text(encoding="utf-8"))
    pairs = read_parallel_files(Path(split_files["valid"][0]), Path(split_files["valid"][1]))
    translator = Translator(model, tokenizer, experiment.decode, device=experiment.train.device)
    perplexity = corpus_perplexity(translator.model, tokenizer, pairs)
    hypotheses = translator.translate([source for source, _ in pairs])
    references = [target for _, target in pairs]
    scores = score_translations(hypotheses, references)
    # Kept for the paired bootstrap test against the baseline's run of the same seed (the runner stores them).
    write_text_atomically(run_dir / HYPOTHESES_FILE, "".join(f"{line}\n" for line in hypotheses))
    write_text_atomically(run_dir / REFERENCES_FILE, "".join(f"{line}\n" for line in references))
    metrics: dict[str, Any] = {
        "dev_perplexity": perplexity.perplexity,
        "dev_nll": perplexity.nll_per_token,
        "dev_bleu": scores.bleu,
        "dev_chrf": scores.chrf,
        "params": model.num_parameters(),
    }
    hook = measure_hook(spec["experiment"])
    if hook is not None:
        metrics.update(
            hook(model=model, tokenizer=tokenizer, pairs=pairs, config=experiment, run_dir=run_dir)
        )
    return metrics


def run(run_dir: Path) -> dict[str, Any]:
    """Train (or resume) and score the run described by ``run_dir/run.json``; write ``result.json``.

    Parameters
    ----------
    run_dir : Path
        A run directory prepared by the runner.

    Returns
    -------
    dict of str to Any
        The result record: the run's identity, training figures (steps, seconds, stop reason) and metrics.

    Notes
    -----
    Training resumes the newest checkpoint when there is one, and a run whose training had ended (by steps
    or by its time budget) is reused as it is, so a killed experiment never trains a finished variant twice.
    """
    spec = read_run_spec(run_dir)
    experiment = experiment_from_dict(spec["config"], source=str(run_dir / RUN_FILE))
    resume = (run_dir / "checkpoints" / "index.json").exists()
    started = time.monotonic()
    with claim_run_dir_if_main(run_dir):
        result, data = train_experiment(experiment, run_dir, resume=resume, reuse_finished=True)
    split_files = {name: [str(path) for path in pair] for name, pair in data.split_files.items()}
    write_json_atomically(run_dir / "split_files.json", split_files)
    metrics = score_run(run_dir, spec)
    record = {
        "experiment": spec["experiment"],
        "scale": spec["scale"],
        "variant": spec["variant"],
        "group": spec["group"],
        "seed": spec["seed"],
        "train_steps": result.step,
        "train_seconds": result.elapsed_seconds,
        "stop_reason": result.stop_reason,
        "worker_seconds": time.monotonic() - started,
        "commit": spec.get("commit"),
        **metrics,
    }
    write_json_atomically(run_dir / RESULT_FILE, record)
    return record


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m transformer.experiments.common.worker RUN_DIR``.

    Parameters
    ----------
    argv : list of str or None
        The arguments (default ``sys.argv[1:]``): one run directory.

    Returns
    -------
    int
        0 on success, 2 with a one-line message on standard error for a bad input.

    Notes
    -----
    Any other exception propagates with its traceback into the run's log, where the runner points the user.
    """
    arguments = sys.argv[1:] if argv is None else argv
    if len(arguments) != 1:
        print("usage: python -m transformer.experiments.common.worker RUN_DIR", file=sys.stderr)
        return 2
    try:
        run(Path(arguments[0]))
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
