"""The positions measure hook: scores per length bucket, the learned table cut to L rows, the probe."""

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from transformer.atomic_files import write_text_atomically
from transformer.config.decode import DecodeConfig
from transformer.config.experiment import ExperimentConfig
from transformer.data.corpora.synthetic import (
    generate_pairs,
)
from transformer.data.pipeline.text_files import read_lines
from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.decoding.translator import Translator
from transformer.evaluation.bleu import score_translations
from transformer.experiments.common.results import RUN_SENTENCES_DIR
from transformer.experiments.common.worker import read_run_spec
from transformer.experiments.positions.probes import (
    LengthBucket,
    length_buckets,
    permutation_probe,
    swap_pairs,
)
from transformer.experiments.positions.settings import LENGTH_SCALES, TEST_SEED
from transformer.model.transformer import Transformer


def cut_learned_table(model: Transformer, rows: int) -> Transformer:
    """Copy a learned-position model keeping only the first ``rows`` rows of its position table.

    Parameters
    ----------
    model : Transformer
        A model with ``positional_encoding="learned"`` and at least ``rows`` positions.
    rows : int
        The new ``max_positions``.

    Returns
    -------
    Transformer
        A model with ``max_positions = rows``, otherwise the same weights, on the same device, in eval mode.

    Notes
    -----
    When training never reached position ``rows`` (``data.max_len <= rows``), the cut model is what training
    with ``max_positions = rows`` would have given, up to the random initialisation of the other weights.
    """
    config = dataclasses.replace(model.config, max_positions=rows)
    cut = Transformer(config)
    state = dict(model.state_dict())
    key = "positional_encoding.embedding.weight"
    state[key] = state[key][:rows]
    cut.load_state_dict(state)
    return cut.to(next(model.parameters()).device).eval()


def _score_buckets(
    model: Transformer,
    tokenizer: TextTokenizer,
    buckets: Sequence[LengthBucket],
    decode: DecodeConfig,
    device: str,
    keep_in: Path | None = None,
    set_prefix: str = "length",
) -> list[dict[str, Any]]:
    """Score each bucket: BLEU and the share of truncated inputs, or the error the translation raised.

    With ``keep_in``, each bucket's translations and references are also written there as
    ``PREFIX-NAME.hypotheses.txt`` and ``PREFIX-NAME.references.txt`` (``set_prefix``: ``length`` for the
    model as trained, ``cut-length`` for its table cut to L rows), which the runner keeps for the paired
    tests between encodings (:func:`~transformer.experiments.common.results.keep_run_sentences`).
    """
    scores: list[dict[str, Any]] = []
    for bucket in buckets:
        if not bucket.pairs:
            scores.append({"bleu": None, "truncated_share": None, "error": None})
            continue
        translator = Translator(model, tokenizer, decode, device=device)
        try:
            hypotheses = translator.translate([source for source, _ in bucket.pairs])
        except ValueError as error:
            scores.append({"bleu": None, "truncated_share": None, "error": str(error).splitlines()[0]})
            continue
        references = [target for _, target in bucket.pairs]
        bleu = score_translations(hypotheses, references).bleu
        if keep_in is not None:
            keep_in.mkdir(parents=True, exist_ok=True)
            for kind, lines in (("hypotheses", hypotheses), ("references", references)):
                text = "".join(f"{line}\n" for line in lines)
                write_text_atomically(keep_in / f"{set_prefix}-{bucket.name}.{kind}.txt", text)
        scores.append(
            {"bleu": bleu, "truncated_share": translator.truncated_count / len(bucket.pairs), "error": None}
        )
    return scores


def _training_sources(run_dir: Path) -> frozenset[str]:
    """Read the source sentences of the run's training split (test sentences are kept disjoint from them)."""
    split_files = json.loads((run_dir / "split_files.json").read_text(encoding="utf-8"))
    return frozenset(line.strip() for line in read_lines(Path(split_files["train"][0])))


def measure(
    *,
    model: Transformer,
    tokenizer: TextTokenizer,
    pairs: Sequence[tuple[str, str]],
    config: ExperimentConfig,
    run_dir: Path,
) -> dict[str, Any]:
    """Measure a trained run: the permutation probe, and for the length group BLEU per length bucket.

    Parameters
    ----------
    model : Transformer
        The scored model.
    tokenizer : TextTokenizer
        Its tokenizer.
    pairs : sequence of (str, str)
        The validation pairs (unused: the length test sets are generated).
    config : ExperimentConfig
        The run's configuration; ``data.max_len`` is L for the length group.
    run_dir : Path
        The run directory (its ``run.json`` names the group and scale).

    Returns
    -------
    dict of str to Any
        The probe's keys (:func:`permutation_probe`); for the length group also ``length_limit`` (L) and
        ``length_buckets``: per bucket ``name``, ``sentences``, ``bleu``, ``truncated_share`` and ``error``,
        and for learned positions ``cut_bleu``, ``cut_truncated_share`` (table cut to L rows, outputs capped
        at L tokens) and ``cut_uncapped_error`` (what the run's own decode settings raised with the cut
        table, None if nothing), plus ``learned_position_error``: the model's message for a too-long input.
        Each bucket's translations are written to the run's sentences directory: ``length-NAME``, and for
        learned positions ``cut-length-NAME`` (the capped cut table's).

    Notes
    -----
    Called by the worker after the dev scoring. Everything is deterministic given the model: the test
    sentences come from the grammar with :data:`TEST_SEED`.
    """
    del pairs
    spec = read_run_spec(run_dir)
    size = LENGTH_SCALES[spec["scale"]]
    model.eval()
    device = config.train.device
    translator = Translator(model, tokenizer, config.decode, device=device)
    metrics: dict[str, Any] = permutation_probe(
        model, tokenizer, translator, swap_pairs(size.probe_pairs, TEST_SEED)
    )
    if spec["group"] != "length":
        return metrics
    limit = config.data.max_len
    buckets = length_buckets(
        generate_pairs(size.generated, TEST_SEED),
        lambda sentence: len(tokenizer.encode(sentence)) + 1,
        limit,
        size.per_bucket,
        exclude=_training_sources(run_dir),
    )
    keep_in = run_dir / RUN_SENTENCES_DIR
    rows = [
        {"name": bucket.name, "low": bucket.low, "high": bucket.high, "sentences": len(bucket.pairs), **score}
        for bucket, score in zip(
            buckets, _score_buckets(model, tokenizer, buckets, config.decode, device, keep_in), strict=True
        )
    ]
    if model.config.positional_encoding == "learned":
        metrics["learned_position_error"] = _score_cut_table(
            model, tokenizer, buckets, rows, config, limit, keep_in
        )
    metrics["length_limit"] = limit
    metrics["length_buckets"] = rows
    return metrics


def _score_cut_table(
    model: Transformer,
    tokenizer: TextTokenizer,
    buckets: Sequence[LengthBucket],
    rows: list[dict[str, Any]],
    config: ExperimentConfig,
    limit: int,
    keep_in: Path,
) -> str | None:
    """Score the learned model with its table cut to L rows into ``rows``; return its too-long-input error.

    The capped translations are kept in ``keep_in`` as the ``cut-length-NAME`` sets, so the cut table can be
    tested against the sinusoids bucket by bucket.
    """
    device = config.train.device
    cut = cut_learned_table(model, limit)
    capped = dataclasses.replace(config.decode, max_length=min(config.decode.max_length or limit, limit))
    cut_scores = _score_buckets(cut, tokenizer, buckets, capped, device, keep_in, set_prefix="cut-length")
    for row, score in zip(rows, cut_scores, strict=True):
        row["cut_bleu"], row["cut_truncated_share"] = score["bleu"], score["truncated_share"]
    for row, score in zip(rows, _score_buckets(cut, tokenizer, buckets, config.decode, device), strict=True):
        row["cut_uncapped_error"] = score["error"]
    too_long = torch.full((1, limit + 1), cut.config.unk_id, device=next(cut.parameters()).device)
    try:
        cut.encode(too_long)
    except ValueError as error:
        return str(error)
    return None
