"""Where a shortlist's BLEU loss comes from: the restriction, or normalising over the shortlist (issue #49).

A shortlisted search differs from the full vocabulary's in two ways at once: a sentence may only output its
shortlist's pieces, and each step's log-softmax runs over those pieces only, so every kept piece also gets the
probability mass of the pieces left out. This benchmark separates the two by translating the same batches
with the same search four ways:

- ``full``: the whole vocabulary, normalised over it (no shortlist);
- ``sentence``: each sentence's own shortlist, normalised over it (what ``--shortlist`` does);
- ``vocabulary``: each sentence's own shortlist, normalised over the whole vocabulary (the full projection
  is computed, so this is a measurement, not a speed-up);
- ``union``: every sentence of a batch over the union of its sentences' shortlists, normalised over that
  union (CTranslate2's vocabulary map; a translation then depends on its batch).

Each is scored with lowercased and cased BLEU and chrF against the references, and compared with ``full`` by
sacreBLEU's paired bootstrap (cased BLEU), with the count of sentences whose translation changed. Greedy
search picks the best piece of one step, which renormalising over a set does not change, so ``vocabulary``
equals ``sentence`` there; at beam 4 hypotheses whose steps were scored over different sets compete, which is
where the mass of the missing pieces tells.

Run from the repository root: ``python -m benchmarks.shortlist_normalisation --checkpoint
runs/multi30k/averaged`` (the checkpoint's ``shortlist.safetensors``, from ``transformer shortlist``). Writes a
Markdown record (``--output``) with the CPU, the date, the command and the commit. The figures do not depend on
the CPU beyond floating-point rounding (the searches are deterministic).
"""

import argparse
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch.nn import functional as F

from benchmarks.bench_environment import provenance_lines, write_record
from benchmarks.bench_worker import REPOSITORY
from transformer.checkpoint.layout import CheckpointError, resolve_checkpoint
from transformer.data.pipeline.text_files import CorpusError, read_parallel_files
from transformer.data.shortlist import ShortlistError
from transformer.decoding.shortlist import RestrictedProjection, ShortlistSearchState, ShortlistStepModel
from transformer.decoding.step_model import StepModel
from transformer.decoding.translator import Translator
from transformer.evaluation.bleu import paired_bootstrap_test, score_translations
from transformer.model.transformer import Transformer

#: Where ``data.corpus: multi30k`` caches the validation set.
DEFAULT_VALID = Path("~/.cache/transformer/multi30k").expanduser()
#: The shortlisted ways of normalising, besides ``full`` (no shortlist).
NORMALISATIONS = ("sentence", "vocabulary", "union")
#: A source-token budget large enough that each benchmark batch is one search (as in benchmarks.pareto).
ONE_BATCH_TOKENS = 1_000_000


class NormalisedProjection(RestrictedProjection):
    """A :class:`RestrictedProjection` whose rows are normalised over a chosen set of pieces.

    Parameters
    ----------
    model : Transformer
        The model.
    sentence_tokens : list of torch.Tensor, each shape (num_tokens,), int64
        Each sentence's shortlist, as for :class:`RestrictedProjection`.
    normalisation : {"sentence", "vocabulary", "union"}
        Over what each row's log-softmax runs (the module's docstring).

    Notes
    -----
    ``sentence`` is the parent's arithmetic unchanged. ``vocabulary`` multiplies by the whole output matrix
    at every step, normalises, then keeps the sentence's columns; ``union`` drops the per-sentence mask, so
    every row scores the whole union.
    """

    def __init__(self, model: Transformer, sentence_tokens: list[Tensor], normalisation: str) -> None:
        super().__init__(model, sentence_tokens)
        if normalisation not in NORMALISATIONS:
            raise ValueError(
                f"normalisation must be one of {', '.join(NORMALISATIONS)}, not {normalisation!r}"
            )
        self.normalisation = normalisation
        self.full_model = model
        if normalisation == "union":
            self.needs_mask = False

    def column_log_probs(self, hidden: Tensor, row_sentences: Tensor) -> Tensor:
        """Log-probabilities over the union's columns, normalised as chosen.

        Parameters
        ----------
        hidden : torch.Tensor, shape (rows, d_model)
            One step's final decoder states.
        row_sentences : torch.Tensor, shape (rows,), int64
            Each row's sentence.

        Returns
        -------
        torch.Tensor, shape (rows, shortlist), float32
            ``-inf`` at the union's columns outside the row's sentence (except for ``union``).

        Notes
        -----
        For ``vocabulary`` a kept piece's value is exactly the full vocabulary's log-probability of it, so
        the search's scores are the full model's, restricted.
        """
        if self.normalisation != "vocabulary":
            return super().column_log_probs(hidden, row_sentences)
        logits = self.full_model.project_output(hidden[:, None])[:, 0]  # (rows, vocab)
        full = F.log_softmax(logits, dim=-1, dtype=torch.float32)  # (rows, vocab)
        columns = full.index_select(1, self.token_ids)  # (rows, shortlist)
        return columns.masked_fill(~self.sentence_members[row_sentences], float("-inf"))


class NormalisedShortlistStepModel(ShortlistStepModel):
    """A :class:`ShortlistStepModel` whose searches build a :class:`NormalisedProjection`.

    Parameters
    ----------
    model, shortlist, use_cache, native_step
        As for :class:`ShortlistStepModel`.
    normalisation : {"sentence", "vocabulary", "union"}
        Passed to each search's projection.

    Notes
    -----
    The parent builds its projection, which this replaces: a per-batch cost of about 10 ms that is not timed.
    """

    def __init__(
        self, model: Transformer, shortlist: Any, use_cache: bool, native_step: Any, normalisation: str
    ):
        super().__init__(model, shortlist, use_cache, native_step)
        self.normalisation = normalisation

    def start(self, src_tokens: Tensor) -> ShortlistSearchState:
        """Encode the source and restrict the projection, normalised as chosen.

        Parameters
        ----------
        src_tokens : torch.Tensor, shape (batch, src_len), int64
            Source token ids, right-padded.

        Returns
        -------
        ShortlistSearchState
            One row per sentence.

        Notes
        -----
        Padding is dropped before the lookup, as in the parent.
        """
        state = super().start(src_tokens)
        sentences = [row[row != self.pad_id] for row in src_tokens.cpu()]
        state.projection = NormalisedProjection(
            self.model, [self.shortlist.sentence_tokens(row) for row in sentences], self.normalisation
        )
        return state


class NormalisedTranslator(Translator):
    """A :class:`Translator` whose shortlisted searches normalise as ``normalisation`` says.

    Parameters
    ----------
    *args, **kwargs
        As for :class:`Translator`.

    Notes
    -----
    ``normalisation`` is set after construction (``Translator.from_checkpoint`` builds the class it is called
    on); ``sentence`` gives ``Translator``'s own translations.
    """

    normalisation = "sentence"

    def _member_step_model(
        self, model: Any, use_cache: bool, extra_tokens: Sequence[Sequence[int]] | None = None
    ) -> StepModel[Any]:
        """The model's step model, its shortlist normalised as chosen (no glossary: ``extra_tokens`` unused)."""
        if self.shortlist is not None and isinstance(model, Transformer):
            native_step = self.native_steps.get(id(model))
            return NormalisedShortlistStepModel(
                model, self.shortlist, use_cache, native_step, self.normalisation
            )
        return super()._member_step_model(model, use_cache, extra_tokens)


@dataclasses.dataclass
class NormalisationRow:
    """One way of normalising, scored.

    Parameters
    ----------
    name : str
        ``full`` or one of :data:`NORMALISATIONS`.
    translations : list of str
        One per sentence.
    bleu_lowercase, bleu, chrf : float
        Corpus scores against the references.
    changed : int
        Sentences whose translation differs from ``full``'s.
    p_value : float or None
        The paired bootstrap's p-value against ``full`` (cased BLEU); None for ``full`` itself.

    Notes
    -----
    A record's row.
    """

    name: str
    translations: list[str]
    bleu_lowercase: float
    bleu: float
    chrf: float
    changed: int
    p_value: float | None


def translate_in_batches(translator: Translator, sources: list[str], batch_size: int) -> list[str]:
    """Translate consecutive batches of ``batch_size`` sentences, each one search.

    Parameters
    ----------
    translator : Translator
        With ``max_tokens`` of :data:`ONE_BATCH_TOKENS`.
    sources : list of str
        The source sentences.
    batch_size : int
        Sentences per search (the batch ``union`` normalises over).

    Returns
    -------
    list of str
        One translation per source, in order.

    Notes
    -----
    The batches are the same for every way of normalising, so ``union``'s rows see the same neighbours.
    """
    translations: list[str] = []
    for start in range(0, len(sources), batch_size):
        translations += translator.translate(sources[start : start + batch_size])
    return translations


def measure_normalisations(
    checkpoint: Path,
    sources: list[str],
    references: list[str],
    beam_size: int,
    batch_size: int = 32,
    precision: str = "fp32",
    shortlist: Path | bool = True,
    resamples: int = 1000,
) -> list[NormalisationRow]:
    """Translate with the full vocabulary and each shortlisted normalisation; score and compare them.

    Parameters
    ----------
    checkpoint : Path
        A checkpoint or run directory.
    sources, references : list of str
        Source sentences and one reference each.
    beam_size : int
        The search (1: greedy), with the checkpoint's other decoding settings.
    batch_size : int
        Sentences per search.
    precision : {"fp32", "bf16", "int8"}
        The model's precision.
    shortlist : Path or True
        The shortlist file; True reads the checkpoint's.
    resamples : int
        Paired bootstrap resamples (at least 100).

    Returns
    -------
    list of NormalisationRow
        ``full`` first, then :data:`NORMALISATIONS` in order.

    Notes
    -----
    One model load per row; the searches are deterministic, so a row does not depend on the others.
    """
    rows: list[NormalisationRow] = []
    for name in ("full", *NORMALISATIONS):
        translator = NormalisedTranslator.from_checkpoint(
            checkpoint, precision=precision, shortlist=False if name == "full" else shortlist
        )
        translator.normalisation = "sentence" if name == "full" else name
        translator.decode_config = dataclasses.replace(translator.decode_config, beam_size=beam_size, nbest=1)
        translator.max_tokens = ONE_BATCH_TOKENS
        translations = translate_in_batches(translator, sources, batch_size)
        lowercase = score_translations(translations, references, lowercase=True)
        cased = score_translations(translations, references)
        baseline = rows[0].translations if rows else translations
        test = paired_bootstrap_test(baseline, translations, references, samples=resamples) if rows else None
        changed = sum(ours != theirs for ours, theirs in zip(translations, baseline, strict=True))
        rows.append(
            NormalisationRow(
                name,
                translations,
                lowercase.bleu,
                cased.bleu,
                cased.chrf,
                changed,
                None if test is None else test.p_value,
            )
        )
    return rows


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
        prog="python -m benchmarks.shortlist_normalisation", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--checkpoint", type=Path, required=True, help="checkpoint or run directory")
    parser.add_argument(
        "--shortlist", type=Path, default=None, help="shortlist file (default: the checkpoint's)"
    )
    parser.add_argument("--source", type=Path, default=DEFAULT_VALID / "val.en.gz")
    parser.add_argument("--reference", type=Path, default=DEFAULT_VALID / "val.de.gz")
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 4], help="beam sizes (1: greedy)")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per search")
    parser.add_argument("--precision", choices=["fp32", "bf16", "int8"], default="fp32")
    parser.add_argument("--resamples", type=int, default=1000, help="paired bootstrap resamples (>= 100)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N sentences (a smoke test)")
    parser.add_argument(
        "--output", type=Path, default=REPOSITORY / "benchmarks" / "results" / "shortlist-normalisation.md"
    )
    args = parser.parse_args(argv)
    for name, least in (("batch_size", 1), ("resamples", 100), ("limit", 1)):
        value = getattr(args, name)
        if value is not None and value < least:
            parser.error(f"--{name.replace('_', '-')} must be at least {least}, not {value}")
    for beam in args.beams:
        if beam < 1:
            parser.error(f"--beams must be at least 1, not {beam}")
    return args


def record(args: argparse.Namespace) -> list[str]:
    """Run every beam size's rows and return the record's Markdown lines.

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
    The record states the CPU, the date, the command and the commit. The checkpoint is resolved before the
    corpus is read, so a mistyped checkpoint is what the error names.
    """
    resolve_checkpoint(args.checkpoint)
    pairs = read_parallel_files(args.source, args.reference)[: args.limit]
    sources, references = [pair[0] for pair in pairs], [pair[1] for pair in pairs]
    shortlist = args.shortlist if args.shortlist is not None else True
    lines = [
        "# A shortlist's normalisation against its restriction (`python -m benchmarks.shortlist_normalisation`)",
        "",
        *provenance_lines("benchmarks.shortlist_normalisation"),
        f"- model: `{args.checkpoint}` ({args.precision}); {len(sources)} sentences of `{args.source}` in "
        f"batches of {args.batch_size}; shortlist: {args.shortlist or 'the checkpoint’s'}",
        f"- paired bootstrap against `full`: sacreBLEU, cased BLEU, {args.resamples} resamples",
        "",
        "| search | scored over | normalised over | BLEU (lc) | against full | p | BLEU | chrF | sentences changed |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    scored_over = {
        "full": ("the whole vocabulary", "the whole vocabulary"),
        "sentence": ("each sentence's shortlist (`--shortlist`)", "the sentence's shortlist"),
        "vocabulary": ("each sentence's shortlist", "the whole vocabulary"),
        "union": ("the batch's union (CTranslate2's vocabulary map)", "the union"),
    }
    for beam in args.beams:
        search = "greedy" if beam == 1 else f"beam {beam}"
        rows = measure_normalisations(
            args.checkpoint,
            sources,
            references,
            beam,
            args.batch_size,
            args.precision,
            shortlist,
            args.resamples,
        )
        for row in rows:
            scored, normalised = scored_over[row.name]
            against = "" if row.p_value is None else f"{row.bleu_lowercase - rows[0].bleu_lowercase:+.2f}"
            p_value = "" if row.p_value is None else f"{row.p_value:.3f}"
            lines.append(
                f"| {search} | {scored} | {normalised} | {row.bleu_lowercase:.2f} | {against} | {p_value} | "
                f"{row.bleu:.2f} | {row.chrf:.2f} | {row.changed} |"
            )
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
    Prints the record and where it went; a missing checkpoint, shortlist or corpus is one line naming the file.
    """
    args = parse_arguments(argv)
    try:
        lines = record(args)
    except (CheckpointError, CorpusError, ShortlistError) as error:
        raise SystemExit(f"python -m benchmarks.shortlist_normalisation: {error}") from None
    text = "\n".join(lines) + "\n"
    write_record(args.output, text)


if __name__ == "__main__":
    main()
