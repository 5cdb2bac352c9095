"""How well the omission, hallucination and repetition flags find what they name (issue #51).

The test is built once from a validation set and committed (``--build-test``): for every sentence with a
reference of four words or more, three forced outputs, each a known fault:

- ``omission``: the reference cut at a word boundary after 40-70% of its words (its final full stop kept), so
  the rest of the source is left untranslated;
- ``hallucination``: another sentence's reference (half the set away), fluent and unrelated to the source;
- ``repetition``: a run of one to three of the reference's words repeated two or three more times in place;

and the full reference (``reference``), a faithful output the model did not choose. The negatives are the
model's own translations of every source (``real``, made at run time by its search).

Each flag's score is computed on every case by forced decoding (:func:`forced_signals`); its thresholds are
chosen on half ``a`` of the sentences (a seeded random half: the set's odd lines are longer than its even ones,
so parity would not do) as those finding the most of the flag's positives while flagging at most
:data:`MAX_FALSE_ALARMS` of the real outputs, and its precision and recall are reported on half ``b`` (real
outputs against that flag's positives), with how often each flag fires on every kind of case there. For the hallucination flag the source gain is compared with the model's probability alone (the
strongest single detector in Guerreiro et al., 2023).

Run from the repository root: ``python -m benchmarks.quality_flags --checkpoint runs/multi30k/averaged``.
Writes a Markdown record (``--output``) with the CPU, the date, the command and the commit.
"""

import argparse
import functools
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from benchmarks.bench_environment import provenance_lines, write_record
from benchmarks.bench_worker import REPOSITORY
from benchmarks.quality_flags_cases import CASE_KINDS, FlagCase, build_test, read_test, write_test
from transformer.checkpoint.layout import CheckpointError, resolve_checkpoint
from transformer.config.decode import DecodeConfig
from transformer.data.pipeline.text_files import CorpusError, read_parallel_files
from transformer.decoding.quality_flags import (
    FLAG_KINDS,
    FlagThresholds,
    SentenceSignals,
    forced_signals,
    omission_span,
    repetition_span,
    sentence_flags,
)
from transformer.decoding.translator import Translator

#: Where ``data.corpus: multi30k`` caches the validation set.
DEFAULT_VALID = Path("~/.cache/transformer/multi30k").expanduser()
#: The committed test built from the Multi30k validation set.
DEFAULT_TEST = REPOSITORY / "experiments" / "benchmarks" / "quality-flags-test-multi30k-val.tsv.gz"
#: The share of half ``a``'s real outputs a flag may fire on when its thresholds are chosen: a flag that cries
#: wolf on the model's ordinary translations is not read (the real outputs hold a few true faults too).
MAX_FALSE_ALARMS = 0.05


def case_signals(
    translator: Translator, cases: Sequence[FlagCase], batch_size: int = 64
) -> list[SentenceSignals]:
    """Translate the real cases, force every case's output and measure its signals.

    Parameters
    ----------
    translator : Translator
        The model and its search (what makes the ``real`` outputs).
    cases : sequence of FlagCase
        The test.
    batch_size : int
        Rows per forced pass.

    Returns
    -------
    list of SentenceSignals
        One per case, in order.

    Notes
    -----
    A real case is forced with the tokens its search chose, so its signals are exactly those
    ``Translator.translate_nbest(flags=...)`` would compute.
    """
    real = [index for index, case in enumerate(cases) if case.kind == "real"]
    found = translator.translate_nbest([cases[index].source for index in real])
    outputs: list[list[int]] = [translator.tokenizer.encode_target(case.target) for case in cases]
    for index, candidates in zip(real, found, strict=True):
        outputs[index] = candidates[0].tokens if candidates else []
    sources = [translator.tokenizer.encode(case.source) for case in cases]
    signals: list[SentenceSignals] = []
    for start in range(0, len(cases), batch_size):
        stop = start + batch_size
        signals += forced_signals(
            translator.model, translator.tokenizer, sources[start:stop], outputs[start:stop]
        )
    return signals


@dataclass(frozen=True)
class Detection:
    """Precision, recall and F1 of one flag on one half.

    Parameters
    ----------
    precision, recall, f1 : float
        In [0, 1]; precision is 1.0 where nothing fired.
    positives : int
        The flag's positive cases judged.

    Notes
    -----
    Negatives are the half's real outputs only; :func:`firing_rates` gives the rest.
    """

    precision: float
    recall: float
    f1: float
    positives: int


def detection(fires: Sequence[bool], positive: Sequence[bool]) -> Detection:
    """Score a flag's firing against the truth.

    Parameters
    ----------
    fires : sequence of bool
        Whether the flag fired, per case.
    positive : sequence of bool
        Whether the case is the flag's positive, per case.

    Returns
    -------
    Detection
        Its precision, recall and F1.

    Notes
    -----
    F1 is 0.0 when nothing true is found.
    """
    true = sum(f and p for f, p in zip(fires, positive, strict=True))
    fired, positives = sum(fires), sum(positive)
    precision = true / fired if fired else 1.0
    recall = true / positives if positives else 0.0
    f1 = 2 * precision * recall / (precision + recall) if true else 0.0
    return Detection(precision, recall, f1, positives)


def threshold_grid() -> dict[str, list[FlagThresholds]]:
    """The thresholds tried for each flag, the others held at their defaults.

    Returns
    -------
    dict of str to list of FlagThresholds
        Per flag kind.

    Notes
    -----
    Coarse on purpose: a grid fine enough to fit half ``a``'s noise would judge worse on half ``b``.
    """
    default = FlagThresholds()
    return {
        "omission": [
            FlagThresholds(coverage, words, default.hallucination_below, default.repetition_words)
            for coverage, words in itertools.product([0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5], range(1, 7))
        ],
        "hallucination": [
            FlagThresholds(
                default.uncovered_below, default.omission_words, below / 4, default.repetition_words
            )
            for below in range(-8, 17)
        ],
        "repetition": [
            FlagThresholds(
                default.uncovered_below, default.omission_words, default.hallucination_below, words
            )
            for words in range(1, 7)
        ],
    }


def fires_of(kind: str, signals: Sequence[SentenceSignals], thresholds: FlagThresholds) -> list[bool]:
    """Whether one flag fires on each case at given thresholds.

    Parameters
    ----------
    kind : str
        The flag.
    signals : sequence of SentenceSignals
        Per case.
    thresholds : FlagThresholds
        Where it fires.

    Returns
    -------
    list of bool
        Per case.

    Notes
    -----
    The same decision :func:`sentence_flags` makes; the spans are computed here only as far as needed.
    """
    if kind == "omission":
        spans = [omission_span(item, thresholds.uncovered_below) for item in signals]
        return [words >= thresholds.omission_words for _, _, words in spans]
    if kind == "hallucination":
        return [
            bool(item.target_words) and item.mean_gain < thresholds.hallucination_below for item in signals
        ]
    return [repetition_span(item.target_words)[2] >= thresholds.repetition_words for item in signals]


def choose(
    kind: str, cases: Sequence[FlagCase], signals: Sequence[SentenceSignals], grid: Sequence[FlagThresholds]
) -> FlagThresholds:
    """Pick the thresholds of one flag that find the most positives of half ``a`` at few false alarms.

    Parameters
    ----------
    kind : str
        The flag.
    cases, signals : sequence
        The test and its signals.
    grid : sequence of FlagThresholds
        The candidates.

    Returns
    -------
    FlagThresholds
        The thresholds with the highest recall among those firing on at most :data:`MAX_FALSE_ALARMS` of half
        ``a``'s real outputs; ties go to fewer false alarms, then to the grid's order. With none so quiet, the
        quietest.

    Notes
    -----
    Judged on half ``a``'s real outputs and this flag's positives only.
    """
    return pick_quiet(
        grid, lambda thresholds: lambda items: fires_of(kind, items, thresholds), kind, cases, signals
    )


ChoiceT = TypeVar("ChoiceT")


def pick_quiet(
    grid: Sequence[ChoiceT],
    decision: Callable[[ChoiceT], Callable[[list[SentenceSignals]], list[bool]]],
    kind: str,
    cases: Sequence[FlagCase],
    signals: Sequence[SentenceSignals],
) -> ChoiceT:
    """Pick the setting of a decision with the most recall on half ``a`` at few false alarms.

    Parameters
    ----------
    grid : sequence
        The settings tried.
    decision : callable
        Maps a setting to its decision (whether it fires, for a list of signals).
    kind : str
        The flag whose cases are the positives.
    cases, signals : sequence
        The test and its signals.

    Returns
    -------
    setting
        The most recall among those firing on at most :data:`MAX_FALSE_ALARMS` of half ``a``'s real outputs;
        ties to fewer false alarms, then to the grid's order; with none so quiet, the quietest.

    Notes
    -----
    The one rule for the shipped flags and for the signals they are compared with.
    """
    real = [signals[i] for i, case in enumerate(cases) if case.half == "a" and case.kind == "real"]
    positives = [signals[i] for i, case in enumerate(cases) if case.half == "a" and case.kind == kind]
    measured = []
    for position, setting in enumerate(grid):
        fires = decision(setting)
        false_alarms = sum(fires(real)) / max(1, len(real))
        measured.append((false_alarms, sum(fires(positives)) / max(1, len(positives)), position, setting))
    quiet = [item for item in measured if item[0] <= MAX_FALSE_ALARMS]
    if not quiet:
        return min(measured, key=lambda item: (item[0], item[2]))[3]
    return min(quiet, key=lambda item: (-item[1], item[0], item[2]))[3]


def firing_rates(
    cases: Sequence[FlagCase], signals: Sequence[SentenceSignals], thresholds: FlagThresholds, half: str = "b"
) -> dict[str, dict[str, float]]:
    """How often each flag fires on each kind of case of a half.

    Parameters
    ----------
    cases, signals : sequence
        The test and its signals.
    thresholds : FlagThresholds
        Where the flags fire.
    half : str
        The half judged.

    Returns
    -------
    dict of str to dict of str to float
        ``rates[case_kind][flag]``, a share in [0, 1].

    Notes
    -----
    Through :func:`sentence_flags`, the library's own decision.
    """
    rates: dict[str, dict[str, float]] = {}
    for case_kind in CASE_KINDS:
        rows = [i for i, case in enumerate(cases) if case.half == half and case.kind == case_kind]
        flags = [{flag.kind for flag in sentence_flags(signals[i], thresholds)} for i in rows]
        rates[case_kind] = {
            kind: sum(kind in found for found in flags) / max(1, len(rows)) for kind in FLAG_KINDS
        }
    return rates


def judged(
    kind: str,
    cases: Sequence[FlagCase],
    signals: Sequence[SentenceSignals],
    fires: Callable[[list[SentenceSignals]], list[bool]],
    half: str = "b",
) -> Detection:
    """Score a flag's decision on one half: its real outputs against the flag's positives.

    Parameters
    ----------
    kind : str
        The flag (whose cases are the positives).
    cases, signals : sequence
        The test and its signals.
    fires : callable
        Whether the flag fires, for a list of signals.
    half : str
        The half judged.

    Returns
    -------
    Detection
        Precision, recall and F1.

    Notes
    -----
    Takes the decision as a function, so the shipped flag and an alternative signal are judged alike.
    """
    rows = [i for i, case in enumerate(cases) if case.half == half and case.kind in ("real", kind)]
    return detection(fires([signals[i] for i in rows]), [cases[i].kind == kind for i in rows])


def probability_alone(
    cases: Sequence[FlagCase], signals: Sequence[SentenceSignals]
) -> tuple[float, Detection]:
    """Judge a hallucination flag on the mean token log-probability alone, for comparison with the gain.

    Parameters
    ----------
    cases, signals : sequence
        The test and its signals.

    Returns
    -------
    tuple of (float, Detection)
        The threshold chosen on half ``a`` (nats per token) and the detection on half ``b``.

    Notes
    -----
    A grid of thresholds as fine as the shipped signal's, chosen by the same rule (:func:`pick_quiet`).
    """

    def below(threshold: float) -> Callable[[list[SentenceSignals]], list[bool]]:
        return lambda items: [bool(item.target_words) and item.mean_log_prob < threshold for item in items]

    grid = [step / 4 for step in range(-24, 1)]
    best = pick_quiet(grid, below, "hallucination", cases, signals)
    return best, judged("hallucination", cases, signals, below(best))


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
    ``--build-test`` writes the test from ``--source``/``--reference`` (the cached Multi30k validation set by
    default) and stops; otherwise ``--checkpoint`` is required and the test is read from ``--test``.
    """
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.quality_flags", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--checkpoint", type=Path, help="checkpoint or run directory")
    parser.add_argument("--test", type=Path, default=DEFAULT_TEST, help="the test (.tsv.gz)")
    parser.add_argument("--build-test", action="store_true", help="build the test from --source/--reference")
    parser.add_argument("--source", type=Path, default=DEFAULT_VALID / "val.en.gz")
    parser.add_argument("--reference", type=Path, default=DEFAULT_VALID / "val.de.gz")
    parser.add_argument("--beam", type=int, default=4, help="beam size of the real outputs (1: greedy)")
    parser.add_argument(
        "--output", type=Path, default=REPOSITORY / "benchmarks" / "results" / "quality_flags.md"
    )
    args = parser.parse_args(argv)
    if args.beam < 1:
        parser.error(f"--beam must be at least 1, not {args.beam}")
    if not args.build_test and args.checkpoint is None:
        parser.error("--checkpoint is required (or --build-test to write the test)")
    return args


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def measure(args: argparse.Namespace) -> list[str]:
    """Choose each flag's thresholds on half ``a``, judge them on half ``b``; return the record's lines.

    Parameters
    ----------
    args : argparse.Namespace
        From :func:`parse_arguments`.

    Returns
    -------
    list of str
        The record (Markdown).

    Notes
    -----
    The record states the CPU, the date, the command, the commit and the chosen thresholds, which are what
    :class:`FlagThresholds` should default to for a model like this one.
    """
    resolve_checkpoint(args.checkpoint)
    cases = read_test(args.test)
    translator = Translator.from_checkpoint(args.checkpoint, decode_config=DecodeConfig(beam_size=args.beam))
    signals = case_signals(translator, cases)
    grid = threshold_grid()
    picked = {kind: choose(kind, cases, signals, grid[kind]) for kind in FLAG_KINDS}
    thresholds = FlagThresholds(
        picked["omission"].uncovered_below,
        picked["omission"].omission_words,
        picked["hallucination"].hallucination_below,
        picked["repetition"].repetition_words,
    )
    sentences = len({case.index for case in cases})
    lines = [
        "# Quality flags against a test of known faults (`python -m benchmarks.quality_flags`, issue #51)",
        "",
        *provenance_lines("benchmarks.quality_flags"),
        f"- model: `{args.checkpoint}`, real outputs by beam {args.beam}; test `{args.test.name}`: {sentences} "
        f"sentences, {len(cases)} cases; thresholds chosen on half a (the most recall at <= "
        f"{MAX_FALSE_ALARMS:.0%} of its real outputs flagged), judged on half b",
        f"- chosen: {thresholds}",
        "",
        "| flag | chosen on a | real flagged on a | precision on b | recall on b | F1 on b | positives on b |",
        "|---|---|---|---|---|---|---|",
    ]
    settings = {
        "omission": f"coverage < {thresholds.uncovered_below}, >= {thresholds.omission_words} words",
        "hallucination": f"mean source gain < {thresholds.hallucination_below} nats",
        "repetition": f"copies add >= {thresholds.repetition_words} words",
    }
    real_a = [signals[i] for i, case in enumerate(cases) if case.half == "a" and case.kind == "real"]
    for kind in FLAG_KINDS:
        on_b = judged(kind, cases, signals, functools.partial(fires_of, kind, thresholds=thresholds))
        false_alarms = sum(fires_of(kind, real_a, thresholds)) / max(1, len(real_a))
        lines.append(
            f"| {kind} | {settings[kind]} | {_percent(false_alarms)} | "
            f"{on_b.precision:.3f} | {on_b.recall:.3f} | {on_b.f1:.3f} | {on_b.positives} |"
        )
    threshold, alone = probability_alone(cases, signals)
    lines.append(
        f"| hallucination by probability alone | mean log-prob < {threshold} nats | - | {alone.precision:.3f} | "
        f"{alone.recall:.3f} | {alone.f1:.3f} | {alone.positives} |"
    )
    rates = firing_rates(cases, signals, thresholds)
    lines += ["", "How often each flag fires on half b, by kind of case (the last column: the hallucination flag "
              "by probability alone, at its threshold above):", "",
              "| case | " + " | ".join(FLAG_KINDS) + " | hallucination by probability alone |",
              "|---|" + "---|" * (len(FLAG_KINDS) + 1)]  # fmt: skip
    for case_kind in CASE_KINDS:
        rows = [signals[i] for i, case in enumerate(cases) if case.half == "b" and case.kind == case_kind]
        alone_rate = sum(bool(item.target_words) and item.mean_log_prob < threshold for item in rows) / max(
            1, len(rows)
        )
        cells = [_percent(rates[case_kind][k]) for k in FLAG_KINDS] + [_percent(alone_rate)]
        lines.append(f"| {case_kind} | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> None:
    """Build the test, or run the measurement and write its record.

    Parameters
    ----------
    argv : list of str or None
        Command-line arguments.

    Returns
    -------
    None

    Notes
    -----
    Prints the record and where it went; a missing checkpoint, test or corpus is one line naming the file.
    """
    args = parse_arguments(argv)
    try:
        if args.build_test:
            pairs = read_parallel_files(args.source, args.reference)
            cases = build_test([pair[0] for pair in pairs], [pair[1] for pair in pairs])
            write_test(args.test, cases)
            print(
                f"{len(cases)} cases of {len({case.index for case in cases})} sentences written to {args.test}"
            )
            return
        lines = measure(args)
    except (CheckpointError, CorpusError) as error:
        raise SystemExit(f"python -m benchmarks.quality_flags: {error}") from None
    text = "\n".join(lines) + "\n"
    write_record(args.output, text)


if __name__ == "__main__":
    main()
