"""The quick start: train on the built-in corpus, then translate its test split and score it.

``transformer quickstart`` (the README's first command). A second run reuses the finished run instead of
training again, even one its time budget ended, so the command is cheap to repeat; the test split is
translated with the run's ``decode`` settings.
"""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from transformer.config.experiment import ExperimentConfig
from transformer.data.pipeline.text_files import read_parallel_files
from transformer.decoding.translation_progress import TranslationProgress, open_progress
from transformer.decoding.translator import Translator
from transformer.evaluation.bleu import TranslationScores, score_translations
from transformer.training.launch import claim_run_dir_if_main, train_experiment
from transformer.training.result import TrainResult


@dataclass(frozen=True)
class QuickstartOutcome:
    """What the quick start trained and how it scored on the test split.

    Parameters
    ----------
    train_result : TrainResult
        The training run (or the finished run reused).
    pairs : list of (str, str)
        The test split's (source, reference) pairs; empty when the corpus has no test split.
    hypotheses : list of str
        The model's translations of the test sources, in order.
    scores : TranslationScores or None
        BLEU and chrF of the translations; None without a test split.
    beam_size : int
        The beam the test split was translated with (the run's ``decode.beam_size``).

    Notes
    -----
    The pairs and hypotheses are kept so that a caller can show examples beside the score.
    """

    train_result: TrainResult
    pairs: list[tuple[str, str]]
    hypotheses: list[str]
    scores: TranslationScores | None
    beam_size: int


def train_and_test(
    experiment: ExperimentConfig,
    run_dir: Path,
    report: Callable[[str], None],
    progress: TranslationProgress | None = None,
) -> QuickstartOutcome:
    """Train (or reuse a finished run), then translate and score the test split.

    Parameters
    ----------
    experiment : ExperimentConfig
        The quick start's configuration (``configs/quickstart.yaml`` with any overrides).
    run_dir : Path
        The run directory; a finished run there is reused.
    report : callable
        Receives the training summary (:meth:`TrainResult.describe`) as soon as training ends, before the
        test split is translated.
    progress : TranslationProgress or None
        A progress display for the test translation.

    Returns
    -------
    QuickstartOutcome
        The training result, the test pairs, translations and scores.

    Raises
    ------
    ValueError
        For a run directory another process holds, bad data or settings (see
        :func:`~transformer.training.launch.train_experiment`).
    TrainingDivergedError
        When the loss becomes NaN or infinite.

    Notes
    -----
    The run directory is locked while training (:func:`~transformer.training.launch.claim_run_dir_if_main`);
    the translation reads only the finished checkpoint, so it runs after the lock is released.
    """
    resume = (run_dir / "checkpoints" / "index.json").exists()
    with claim_run_dir_if_main(run_dir):
        # Running the quick start again reuses its finished run, even one its time limit ended.
        result, data = train_experiment(experiment, run_dir, resume=resume, reuse_finished=True)
    report(result.describe())
    beam_size = experiment.decode.beam_size
    if "test" not in data.split_files:
        return QuickstartOutcome(result, [], [], None, beam_size)
    pairs = read_parallel_files(*data.split_files["test"])
    translator = Translator.from_checkpoint(run_dir, experiment.decode)
    with open_progress(progress, len(pairs)) as advance:
        hypotheses = translator.translate([source for source, _ in pairs], advance)
    scores = score_translations(hypotheses, [target for _, target in pairs])
    return QuickstartOutcome(result, pairs, hypotheses, scores, beam_size)
