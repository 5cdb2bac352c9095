"""How well a translation's confidence ranks its quality: Spearman against sentence chrF (issue #51).

On the Multi30k validation set (or any ``--source``/``--reference`` pair), the model translates every sentence
with its search; each translation gets its confidence (``Candidate.confidence``, the geometric mean of its token
probabilities) and its sentence-level chrF against the reference. Reported, with 95% bootstrap intervals over
sentences:

- Spearman's rank correlation of the confidence with chrF;
- the mean chrF of the most confident 80% against the mean of all (what a user who drops the least confident
  fifth gains);
- the same correlation for the other signals a confidence could use (the length-normalised search score, the
  least probable token, cross-attention coverage, the length ratio, attention on the source EOS), and a
  least-squares combination of the signals fitted on the even sentences and judged on the odd ones, with the
  paired bootstrap interval of its gain over the confidence alone there: the evidence for shipping one signal
  or a combination.

Run from the repository root: ``python -m benchmarks.confidence --checkpoint runs/multi30k/averaged``. Writes
a Markdown record (``--output``) with the CPU, the date, the command and the commit. Quality figures do not
depend on the CPU (the search is deterministic); the CPU is stated because the machine is.
"""

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sacrebleu
import torch
from torch.nn import functional as F

from benchmarks.bench_environment import provenance_lines, write_record
from benchmarks.bench_worker import REPOSITORY
from transformer.checkpoint.layout import CheckpointError
from transformer.config.decode import DecodeConfig
from transformer.data.pipeline.batch import pad_sequences
from transformer.data.pipeline.text_files import CorpusError, read_parallel_files
from transformer.decoding.candidate import Candidate
from transformer.decoding.translator import Translator
from transformer.model.transformer import Transformer

#: Where ``data.corpus: multi30k`` caches the validation set.
DEFAULT_VALID = Path("~/.cache/transformer/multi30k").expanduser()
#: The signals a least-squares combination may use, besides the confidence's own (mean token log-prob).
COMBINED_SIGNALS = ("mean_log_prob", "min_log_prob", "coverage", "length_deviation", "source_eos_attention")


def ranks(values: np.ndarray) -> np.ndarray:
    """Rank values from 0, ties sharing their mean rank (what Spearman's correlation correlates).

    Parameters
    ----------
    values : numpy.ndarray, shape (n,)
        Any real values.

    Returns
    -------
    numpy.ndarray, shape (n,), float64
        Their ranks.

    Notes
    -----
    Mean ranks for ties, as ``scipy.stats.rankdata`` (not a dependency here) gives by default.
    """
    order = np.argsort(values, kind="stable")
    positions = np.empty(len(values))
    positions[order] = np.arange(len(values))
    _, group, counts = np.unique(values, return_inverse=True, return_counts=True)
    return (np.bincount(group, weights=positions) / counts)[group]


def spearman(first: np.ndarray, second: np.ndarray) -> float:
    """Spearman's rank correlation of two samples.

    Parameters
    ----------
    first, second : numpy.ndarray, shape (n,)
        Paired values.

    Returns
    -------
    float
        Pearson's correlation of their ranks, in [-1, 1]; 0.0 where either sample is constant.

    Notes
    -----
    A rank correlation, because a confidence is used to order or threshold translations: its scale is free.
    """
    first_ranks, second_ranks = ranks(first), ranks(second)
    if first_ranks.std() == 0 or second_ranks.std() == 0:
        return 0.0
    return float(np.corrcoef(first_ranks, second_ranks)[0, 1])


def top_share_mean(confidence: np.ndarray, quality: np.ndarray, share: float = 0.8) -> float:
    """Mean quality of the most confident ``share`` of the sentences.

    Parameters
    ----------
    confidence, quality : numpy.ndarray, shape (n,)
        Per sentence, its confidence and its quality (chrF).
    share : float
        The fraction kept, most confident first.

    Returns
    -------
    float
        The kept sentences' mean quality.

    Notes
    -----
    Ties at the cut keep the earlier sentences (a stable sort), so the figure is deterministic.
    """
    kept = max(1, round(share * len(quality)))
    return float(quality[np.argsort(-confidence, kind="stable")[:kept]].mean())


@dataclass(frozen=True)
class Interval:
    """A statistic with its percentile bootstrap interval.

    Parameters
    ----------
    value : float
        On the whole sample.
    low, high : float
        The 2.5th and 97.5th percentiles over resamples.

    Notes
    -----
    Sentences are resampled with replacement, the pairs kept together.
    """

    value: float
    low: float
    high: float

    def __str__(self) -> str:
        """Write ``value [low, high]`` with three decimals."""
        return f"{self.value:+.3f} [{self.low:+.3f}, {self.high:+.3f}]"


def bootstrap(
    statistic: Callable[..., float], columns: list[np.ndarray], resamples: int, seed: int = 12345
) -> Interval:
    """Bootstrap a statistic of paired columns over their rows.

    Parameters
    ----------
    statistic : callable
        Takes the columns (each shape (n,)) and returns a float.
    columns : list of numpy.ndarray, each shape (n,)
        Paired values, one row per sentence.
    resamples : int
        How many resamples.
    seed : int
        The resampling's seed, so a record can be reproduced.

    Returns
    -------
    Interval
        The statistic and its 95% percentile interval.

    Notes
    -----
    The same seed gives the same resamples to every statistic of a run, so intervals of two signals are
    drawn over the same resampled sets.
    """
    generator = np.random.default_rng(seed)
    size = len(columns[0])
    values = []
    for _ in range(resamples):
        rows = generator.integers(0, size, size)
        values.append(statistic(*(column[rows] for column in columns)))
    low, high = np.percentile(values, [2.5, 97.5])
    return Interval(statistic(*columns), float(low), float(high))


def sentence_signals(
    translator: Translator, sentences: list[str], found: list[Candidate]
) -> dict[str, np.ndarray]:
    """Teacher-force each translation and read the signals a confidence could use.

    Parameters
    ----------
    translator : Translator
        The translator that made ``found`` (a Transformer, fp32 or bf16).
    sentences : list of str
        The sources.
    found : list of Candidate
        Each source's best translation.

    Returns
    -------
    dict of str to numpy.ndarray, each shape (sentences,)
        ``mean_log_prob`` and ``min_log_prob`` of the output's tokens and its EOS, ``coverage`` (the mean over
        source tokens of ``log(min(attention received, 1))``, GNMT's coverage penalty, from the decoder
        layers' cross-attention averaged over layers and heads), ``length_deviation`` (minus the distance of
        the log length ratio from its mean), ``source_eos_attention`` (the last layer's mean attention on
        the source EOS), and ``score`` (the search's length-normalised score).

    Notes
    -----
    One forced pass over batches of 64; the search's own log-probabilities are not reused, so the signals
    are the same whatever search made the outputs.
    """
    model = translator.model
    if not isinstance(model, Transformer):
        raise ValueError("the attention signals need a Transformer")
    config = model.config
    columns: dict[str, list[float]] = {name: [] for name in (*COMBINED_SIGNALS, "log_length_ratio")}
    for start in range(0, len(sentences), 64):
        rows = range(start, min(start + 64, len(sentences)))
        sources = [[*translator.tokenizer.encode(sentences[row]), config.eos_id] for row in rows]
        outputs = [found[row].tokens for row in rows]
        src_tokens = pad_sequences(sources, config.pad_id).to(translator.device)
        tgt_tokens = pad_sequences([[config.start_id, *output] for output in outputs], config.pad_id)
        with torch.inference_mode():
            logits, weights = model.forward_with_attention(src_tokens, tgt_tokens.to(translator.device))
            log_probs = F.log_softmax(logits.float(), dim=-1).cpu()  # (rows, tgt_len, vocab)
            layers = torch.stack([layer.float().mean(dim=1) for layer in weights.cross]).cpu()
        for index, (source, output) in enumerate(zip(sources, outputs, strict=True)):
            targets = torch.tensor([*output, config.eos_id])
            token_log_probs = log_probs[index, : len(targets)].gather(1, targets[:, None]).squeeze(1)
            words = len(source) - 1  # the source without its EOS
            attention = layers[:, index, : len(targets), : words + 1]  # (layers, tgt, src + EOS)
            received = attention.mean(dim=0)[:, :words].sum(dim=0)  # (src,)
            columns["mean_log_prob"].append(float(token_log_probs.mean()))
            columns["min_log_prob"].append(float(token_log_probs.min()))
            columns["coverage"].append(float(received.clamp(1e-6, 1.0).log().mean()) if words else 0.0)
            columns["log_length_ratio"].append(float(np.log((len(output) + 1) / (words + 1))))
            columns["source_eos_attention"].append(float(attention[-1, :, words].mean()))
    signals = {name: np.array(values) for name, values in columns.items() if values}
    ratio = np.array(columns["log_length_ratio"])
    signals["length_deviation"] = -np.abs(ratio - ratio.mean())
    signals["score"] = np.array([candidate.score for candidate in found])
    del signals["log_length_ratio"]
    return signals


def combination_gain(
    signals: dict[str, np.ndarray], confidence: np.ndarray, quality: np.ndarray, resamples: int
) -> tuple[Interval, Interval]:
    """Fit chrF on the signals over the even sentences and judge the fit on the odd ones.

    Parameters
    ----------
    signals : dict of str to numpy.ndarray
        :func:`sentence_signals`; :data:`COMBINED_SIGNALS` are combined.
    confidence, quality : numpy.ndarray, shape (sentences,)
        The shipped confidence and the sentences' chrF.
    resamples : int
        Bootstrap resamples of the odd sentences.

    Returns
    -------
    tuple of Interval
        The combination's Spearman correlation on the odd sentences, and its gain over the confidence's
        there (a paired interval: both computed on each resample).

    Notes
    -----
    Least squares with an intercept; the held-out half keeps the fit from grading itself.
    """
    design = np.column_stack([signals[name] for name in COMBINED_SIGNALS] + [np.ones(len(quality))])
    even, odd = np.arange(0, len(quality), 2), np.arange(1, len(quality), 2)
    weights, *_ = np.linalg.lstsq(design[even], quality[even], rcond=None)
    predicted = design[odd] @ weights
    fitted = bootstrap(spearman, [predicted, quality[odd]], resamples)

    def gain(combined: np.ndarray, alone: np.ndarray, chrf: np.ndarray) -> float:
        return spearman(combined, chrf) - spearman(alone, chrf)

    return fitted, bootstrap(gain, [predicted, confidence[odd], quality[odd]], resamples)


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the benchmark's command line.

    Parameters
    ----------
    argv : list of str or None
        Arguments (None: ``sys.argv[1:]``).

    Returns
    -------
    argparse.Namespace
        The settings.

    Notes
    -----
    ``--source`` and ``--reference`` default to the cached Multi30k validation set.
    """
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.confidence", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--checkpoint", type=Path, required=True, help="checkpoint or run directory")
    parser.add_argument("--source", type=Path, default=DEFAULT_VALID / "val.en.gz")
    parser.add_argument("--reference", type=Path, default=DEFAULT_VALID / "val.de.gz")
    parser.add_argument("--beam", type=int, default=4, help="beam size (1: greedy)")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument(
        "--output", type=Path, default=REPOSITORY / "benchmarks" / "results" / "confidence.md"
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N sentences (a smoke test)")
    args = parser.parse_args(argv)
    for name in ("beam", "resamples", "limit"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name} must be at least 1, not {value}")
    return args


def measure(args: argparse.Namespace) -> list[str]:
    """Translate, score and correlate; return the record's Markdown lines.

    Parameters
    ----------
    args : argparse.Namespace
        From :func:`parse_arguments`.

    Returns
    -------
    list of str
        The record.

    Notes
    -----
    The record states the CPU, the date, the command and the commit.
    """
    pairs = read_parallel_files(args.source, args.reference)[: args.limit]
    sources, references = [pair[0] for pair in pairs], [pair[1] for pair in pairs]
    translator = Translator.from_checkpoint(args.checkpoint, decode_config=DecodeConfig(beam_size=args.beam))
    found = [candidates[0] for candidates in translator.translate_nbest(sources)]
    quality = np.array(
        [sacrebleu.sentence_chrf(c.text, [r]).score for c, r in zip(found, references, strict=True)]
    )
    confidence = np.array([candidate.confidence for candidate in found])
    signals = sentence_signals(translator, sources, found)
    correlation = bootstrap(spearman, [confidence, quality], args.resamples)
    kept = bootstrap(lambda c, q: top_share_mean(c, q) - q.mean(), [confidence, quality], args.resamples)
    fitted, gain = combination_gain(signals, confidence, quality, args.resamples)
    lines = [
        "# Confidence against sentence chrF (`python -m benchmarks.confidence`, issue #51)",
        "",
        *provenance_lines("benchmarks.confidence"),
        f"- model: `{args.checkpoint}`; {len(sources)} sentences of `{args.source}`; beam {args.beam}",
        f"- bootstrap: {args.resamples} resamples of the sentences, 95% percentile intervals",
        "",
        "| figure | value [95% interval] |",
        "|---|---|",
        f"| Spearman(confidence, chrF) | {correlation} |",
        f"| mean chrF of the most confident 80% - mean chrF of all ({quality.mean():.2f}) | {kept} |",
    ]
    for name in ("score", *COMBINED_SIGNALS):
        lines.append(
            f"| Spearman({name}, chrF) | {bootstrap(spearman, [signals[name], quality], args.resamples)} |"
        )
    lines += [
        f"| least squares of {', '.join(COMBINED_SIGNALS)}: fitted on the even sentences, Spearman on the odd | "
        f"{fitted} |",
        f"| ... its gain over the confidence alone on the odd sentences (paired) | {gain} |",
    ]
    return lines


def main(argv: list[str] | None = None) -> None:
    """Run the measurement and write its record.

    Parameters
    ----------
    argv : list of str or None
        Command-line arguments.

    Returns
    -------
    None

    Notes
    -----
    Prints the record and where it went; a missing checkpoint or corpus is one line naming the file.
    """
    args = parse_arguments(argv)
    try:
        lines = measure(args)
    except (CheckpointError, CorpusError) as error:
        raise SystemExit(f"python -m benchmarks.confidence: {error}") from None
    text = "\n".join(lines) + "\n"
    write_record(args.output, text)


if __name__ == "__main__":
    main()
