"""Each corpus's recipe at the experiments' scales, defined once: WMT14 at the paper's, Multi30k, the grammar.

An experiment's base configuration is one of these recipes (a nested dictionary shaped like a YAML config
file) with its own model settings on top: ``table2``, ``positions`` and ``attention-scoring`` at the ``paper``
scale all train :func:`wmt14_recipe`; ``table2``'s and ``positions``' ``cpu`` and ``gpu`` scales and
``attention-scoring``'s ``gpu`` scale train :func:`multi30k_recipe`; the ``tiny`` scales train
:func:`grammar_test_recipe`. A recipe changed here changes every experiment that trains it, and the runner
then refuses to mix the new runs with results recorded under the old recipe (their configurations differ).

Every function returns a new dictionary, so a caller may change its copy.
"""

from typing import Any

#: Multi30k at the short scales: BPE vocabulary, training steps and tokens per batch. The ``cpu`` steps were
#: chosen by measuring Table 2's base row: 3.4 steps a second with 2,048-token batches (fp32, 2 threads) on a
#: 2-core Xeon with AVX-512 and no AMX, 2026-11-23, so that the whole of Table 2, big's threefold steps
#: included, fits in about 2.5 hours there; a CPU with AMX (bf16) runs it several times faster, a loaded
#: machine slower. ``gpu`` is the shipped Multi30k model's schedule (``configs/multi30k.yaml``: 2,800 steps of
#: 4,096 tokens).
MULTI30K_SCALES = {
    "gpu": {"vocab_size": 10000, "steps": 2800, "max_tokens": 4096},
    "cpu": {"vocab_size": 8000, "steps": 800, "max_tokens": 2048},
}


def short_schedule(steps: int, checkpoints: int = 4) -> dict[str, int]:
    """Give the training keys of the short scales that follow from the number of steps.

    Parameters
    ----------
    steps : int
        ``train.max_steps``.
    checkpoints : int
        Checkpoints (and validations) over the run.

    Returns
    -------
    dict of str to int
        ``warmup_steps`` (a tenth, at least 1), ``cooldown_steps`` (the last third), ``log_every`` (a
        twentieth), ``validate_every`` and ``checkpoint_every``.

    Notes
    -----
    The schedule rule of the short scales
    (:attr:`~transformer.experiments.common.plan.ExperimentPlan.schedule`): doubling the steps doubles the
    warm-up and the cool-down, so a longer run keeps the shape of the learning-rate curve instead of a warm-up
    sized for a shorter one.
    """
    every = max(1, steps // checkpoints)
    return {
        "warmup_steps": max(1, steps // 10),
        "cooldown_steps": steps // 3,
        "log_every": max(1, steps // 20),
        "validate_every": every,
        "checkpoint_every": every,
    }


def short_recipe(steps: int, max_tokens: int, peak: float, checkpoints: int = 4) -> dict[str, Any]:
    """Build the training section the experiments' short scales share.

    Parameters
    ----------
    steps : int
        ``train.max_steps``: a fixed number of steps, no time budget (the paper trains every row alike).
    max_tokens : int
        Tokens per batch.
    peak : float
        Peak learning rate.
    checkpoints : int
        Checkpoints (and validations) over the run.

    Returns
    -------
    dict of str to Any
        A ``train`` section: linear warm-up over a tenth of the steps, inverse square root, cool-down over the
        last third, label smoothing 0.1, the last two checkpoints kept (:func:`short_schedule` for the keys
        that follow from the steps).

    Notes
    -----
    One definition for every short scale of ``table2``, ``positions`` and ``attention-scoring``, so they
    train with the same schedule and a change to it reaches all three (their recorded configurations then
    differ, and the runner refuses to mix old and new results).
    """
    return {
        "max_tokens": max_tokens,
        "max_steps": steps,
        "max_minutes": None,
        "peak_learning_rate": peak,
        "label_smoothing": 0.1,
        "keep_checkpoints": 2,
        **short_schedule(steps, checkpoints),
    }


def wmt14_recipe() -> dict[str, Any]:
    """Give the paper's recipe: its base model's training on WMT14 English-German.

    Returns
    -------
    dict of str to Any
        ``model`` (a 37,000-piece shared vocabulary, post-norm), ``data`` (``wmt14-en-de`` from the corpus
        registry, read through the token store), ``train`` (100K steps of 25,000 tokens, 4,000 warm-up steps,
        label smoothing 0.1) and ``decode`` (beam 4, GNMT length penalty 0.6).

    Notes
    -----
    Sections 5.1-5.4 and 6.1 of the paper; the model's sizes are the configuration's defaults (the base
    model). Unlike the short scales, nothing here follows from the number of steps: the paper warms up 4,000
    steps whether it trains 100K or 300K (big).
    """
    return {
        "model": {"vocab_size": 37000, "norm_first": False},
        "data": {"corpus": "wmt14-en-de", "token_store": True, "max_len": 256},
        "train": {
            "max_steps": 100_000,
            "max_minutes": None,
            "max_tokens": 25000,
            "warmup_steps": 4000,
            "label_smoothing": 0.1,
            "validate_every": 5000,
            "checkpoint_every": 5000,
            "keep_checkpoints": 2,
        },
        "decode": {"beam_size": 4, "length_penalty": 0.6, "length_penalty_form": "gnmt"},
    }


def multi30k_data() -> dict[str, Any]:
    """Give the ``data`` section of every Multi30k run: English to German, sentences up to 100 tokens.

    Returns
    -------
    dict of str to Any
        ``corpus``, ``source_lang``, ``target_lang`` and ``max_len``.

    Notes
    -----
    The direction and length limit of the shipped ``configs/multi30k.yaml``; the corpus is downloaded once
    (``--set data.mirror=DIR`` reads a local copy).
    """
    return {"corpus": "multi30k", "source_lang": "en", "target_lang": "de", "max_len": 100}


def multi30k_decode() -> dict[str, Any]:
    """Give the ``decode`` section of every Multi30k run: beam 4, power length penalty 1.

    Returns
    -------
    dict of str to Any
        ``beam_size``, ``length_penalty`` and ``length_penalty_form``.

    Notes
    -----
    The shipped Multi30k model's search; its sentences are short, so the paper's GNMT penalty of 0.6 (tuned on
    WMT14's dev set) is not used.
    """
    return {"beam_size": 4, "length_penalty": 1.0, "length_penalty_form": "power"}


def multi30k_recipe(scale: str, checkpoints: int = 4) -> dict[str, Any]:
    """Give the Multi30k recipe of a short scale.

    Parameters
    ----------
    scale : str
        ``cpu`` or ``gpu`` (:data:`MULTI30K_SCALES`).
    checkpoints : int
        Checkpoints (and validations) over the run.

    Returns
    -------
    dict of str to Any
        ``model`` (the scale's vocabulary, pre-norm), ``data`` (:func:`multi30k_data`), ``train``
        (:func:`short_recipe` at peak learning rate 0.002) and ``decode`` (:func:`multi30k_decode`).

    Raises
    ------
    KeyError
        For a scale without a Multi30k recipe.

    Notes
    -----
    Pre-norm, as the shipped Multi30k recipe: on budgets of a few thousand steps post-norm learns far more
    slowly (BENCHMARKS.md).
    """
    size = MULTI30K_SCALES[scale]
    return {
        "data": multi30k_data(),
        "decode": multi30k_decode(),
        "model": {"vocab_size": size["vocab_size"], "norm_first": True},
        "train": short_recipe(
            size["steps"], max_tokens=size["max_tokens"], peak=0.002, checkpoints=checkpoints
        ),
    }


def grammar_data(train_pairs: int, valid_pairs: int, test_pairs: int) -> dict[str, Any]:
    """Give the ``data`` section of a run on the built-in English-German grammar corpus.

    Parameters
    ----------
    train_pairs, valid_pairs, test_pairs : int
        Sentence pairs generated for each split.

    Returns
    -------
    dict of str to Any
        ``corpus: synthetic``, the three sizes and ``max_len`` 64 (longer than any sentence it makes).

    Notes
    -----
    The grammar corpus is generated, not downloaded, so runs on it need no network and no mirror; it is
    noise-free, so a small model learns it within a few hundred steps.
    """
    return {
        "corpus": "synthetic",
        "synthetic_train_pairs": train_pairs,
        "synthetic_valid_pairs": valid_pairs,
        "synthetic_test_pairs": test_pairs,
        "max_len": 64,
    }


def grammar_test_recipe(checkpoints: int = 4) -> dict[str, Any]:
    """Give the ``tiny`` scale's recipe: four steps on 300 grammar pairs, for tests.

    Parameters
    ----------
    checkpoints : int
        Checkpoints (and validations) over the run.

    Returns
    -------
    dict of str to Any
        ``model`` (a 120-piece vocabulary, pre-norm), ``data`` (:func:`grammar_data` with 300, 12 and 12
        pairs), ``train`` (:func:`short_recipe`: 4 steps of 512 tokens, one thread) and ``decode`` (beam 2,
        outputs at most 5 tokens longer than their source).

    Notes
    -----
    Seconds per run, so the tests run every experiment end to end; one thread, so runs trained side by side
    (``--parallel``) do not slow each other down.
    """
    return {
        "model": {"vocab_size": 120, "norm_first": True},
        "data": grammar_data(train_pairs=300, valid_pairs=12, test_pairs=12),
        "train": {**short_recipe(4, max_tokens=512, peak=0.002, checkpoints=checkpoints), "threads": 1},
        "decode": {"beam_size": 2, "max_length_offset": 5},
    }
