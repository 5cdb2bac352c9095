"""How often translations use a glossary's terms, with and without it, and what it costs (issue #51).

The terminology test is built once (``--build-test``) and committed: a glossary of source word -> target word
pairs taken from the Multi30k validation references through word alignments. eflomal (the maintained
successor of fast_align; ``pip install eflomal``, only for building) aligns the training and validation pairs
together, both directions, lowercased words; a link counts when both directions have it (the intersection:
precise links, as a terminology extractor wants) and it is one-to-one in its sentence. Source words among the
:data:`FUNCTION_WORDS` most frequent of the training sources, and target words among the most frequent
training targets, are left out (articles and prepositions are no terms); a source word becomes an entry when
at least :data:`MIN_LINKS` of its validation links go to one target word, and that word (as the references
spell it: "Hund", not "hund") is at least :data:`MIN_SHARE` of them. The glossary is then one file, as a user
would give ``--glossary``: it applies to every validation sentence holding a source term, including those
whose reference translates the word otherwise.

The measurement translates the 1,014 validation sentences with the checkpoint, without and with the glossary
(``Translator.translate(..., glossary=...)``, beam 4), and reports: the term-use rate (a match's target term
appears, as a whole word and as written, in the translation) over every match and over the matches whose
reference uses the term; lowercased BLEU and chrF of both with sacreBLEU's paired bootstrap; and the time of
both, overall and on the sentences the glossary matches (the constrained search runs only for those).

Run from the repository root: ``python -m benchmarks.glossary --checkpoint runs/multi30k/averaged``. Writes a
Markdown record (``--output``) with the CPU, the date, the command and the commit.
"""

import argparse
import collections
import re
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from benchmarks.bench_environment import provenance_lines, write_record
from benchmarks.bench_worker import REPOSITORY
from transformer.atomic_files import write_text_atomically
from transformer.checkpoint.layout import CheckpointError, resolve_checkpoint
from transformer.config.decode import DecodeConfig
from transformer.data.pipeline.text_files import CorpusError, read_parallel_files
from transformer.decoding.glossary import Glossary, GlossaryError
from transformer.decoding.translator import Translator
from transformer.evaluation.bleu import paired_bootstrap_test, score_translations

#: Where ``data.corpus: multi30k`` caches the corpus.
DEFAULT_CORPUS = Path("~/.cache/transformer/multi30k").expanduser()
#: The committed glossary built from the Multi30k validation set.
DEFAULT_TEST = REPOSITORY / "experiments" / "benchmarks" / "glossary-test-multi30k-val.tsv"
#: Source (and target) words this frequent in the training data are function words, never terms.
FUNCTION_WORDS = 100
#: A source word needs this many one-to-one validation links to become an entry.
MIN_LINKS = 2
#: ... and this share of them going to one target word.
MIN_SHARE = 0.6
#: Words: letters and digits with inner hyphens or apostrophes, or one punctuation character.
WORD = re.compile(r"\w+(?:[-']\w+)*|[^\w\s]")


def words(text: str) -> list[str]:
    """Split a sentence into words and punctuation marks.

    Parameters
    ----------
    text : str
        A detokenised sentence.

    Returns
    -------
    list of str
        Its words, in order, as written.

    Notes
    -----
    The alignment's and the term check's unit; hyphenated compounds stay one word.
    """
    return WORD.findall(text)


def one_to_one_links(forward: list[tuple[int, int]], reverse: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Keep the links both directions agree on that join one source word to one target word.

    Parameters
    ----------
    forward, reverse : list of (int, int)
        A sentence's links, (source word, target word), from each direction.

    Returns
    -------
    list of (int, int)
        The intersection's one-to-one links, sorted.

    Notes
    -----
    A source word linked to two target words (or the reverse) is a phrase, not a word-for-word term.
    """
    both = set(forward) & set(reverse)
    source_counts = collections.Counter(i for i, _ in both)
    target_counts = collections.Counter(j for _, j in both)
    return sorted((i, j) for i, j in both if source_counts[i] == 1 and target_counts[j] == 1)


def build_glossary_test(
    train_pairs: Sequence[tuple[str, str]],
    valid_pairs: Sequence[tuple[str, str]],
    function_words: int = FUNCTION_WORDS,
) -> list[tuple[str, str]]:
    """Extract the terminology test's glossary from the validation references (see the module docstring).

    Parameters
    ----------
    train_pairs : sequence of (str, str)
        The training pairs, aligned with the validation pairs for better statistics and used for word
        frequencies.
    valid_pairs : sequence of (str, str)
        The validation pairs the terms come from.
    function_words : int
        How many of the most frequent training words on each side are left out as function words.

    Returns
    -------
    list of (str, str)
        (source word, target word) entries, sorted by source word.

    Notes
    -----
    Needs eflomal (imported here: the measurement itself does not).
    """
    import eflomal  # type: ignore[import-not-found, import-untyped, unused-ignore]

    pairs = [*train_pairs, *valid_pairs]
    tokenized = [(words(source), words(target)) for source, target in pairs]
    source_lines = [" ".join(word.lower() for word in source) for source, _ in tokenized]
    target_lines = [" ".join(word.lower() for word in target) for _, target in tokenized]
    with tempfile.TemporaryDirectory() as directory:
        forward_path, reverse_path = Path(directory) / "forward", Path(directory) / "reverse"
        eflomal.Aligner().align(
            source_lines, target_lines, links_filename_fwd=str(forward_path),
            links_filename_rev=str(reverse_path), quiet=True,
        )  # fmt: skip
        forward = [_links(line) for line in forward_path.read_text(encoding="utf-8").splitlines()]
        reverse = [_links(line) for line in reverse_path.read_text(encoding="utf-8").splitlines()]
    train_count = len(train_pairs)
    frequent_source = _most_frequent([source for source, _ in tokenized[:train_count]], function_words)
    frequent_target = _most_frequent([target for _, target in tokenized[:train_count]], function_words)
    links_of: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for index in range(train_count, len(pairs)):
        source, target = tokenized[index]
        for i, j in one_to_one_links(forward[index], reverse[index]):
            source_word, target_word = source[i].lower(), target[j]
            if (
                source_word.isalpha() and target_word.isalpha() and len(source_word) >= 3
                and source_word not in frequent_source and target_word.lower() not in frequent_target
            ):  # fmt: skip
                links_of[source_word][target_word] += 1
    entries = []
    for source_word, targets in sorted(links_of.items()):
        target_word, count = targets.most_common(1)[0]
        total = sum(targets.values())
        if total >= MIN_LINKS and count / total >= MIN_SHARE:
            entries.append((source_word, target_word))
    return entries


def _links(line: str) -> list[tuple[int, int]]:
    """Parse one line of Pharaoh links (``i-j`` pairs)."""
    return [(int(i), int(j)) for i, j in (pair.split("-") for pair in line.split())]


def _most_frequent(sentences: Sequence[Sequence[str]], count: int) -> set[str]:
    """Return the ``count`` most frequent lowercased words of some sentences."""
    counts = collections.Counter(word.lower() for sentence in sentences for word in sentence)
    return {word for word, _ in counts.most_common(count)}


def term_used(term: str, translation: str) -> bool:
    """Whether a target term appears in a translation as whole words, exactly as written.

    Parameters
    ----------
    term : str
        The glossary's target term.
    translation : str
        A translation.

    Returns
    -------
    bool
        True when the term's words occur in a row among the translation's words.

    Notes
    -----
    Case counts: the glossary's promise is the term as written ("Hund", which "hund" is not in German).
    """
    term_words, output_words = words(term), words(translation)
    width = len(term_words)
    return any(output_words[start : start + width] == term_words for start in range(len(output_words)))


def term_use(
    glossary: Glossary, sources: Sequence[str], translations: Sequence[str], references: Sequence[str]
) -> tuple[int, int, int, int]:
    """Count the glossary's matches and how many the translations honour.

    Parameters
    ----------
    glossary : Glossary
        The terms.
    sources, translations, references : sequence of str
        Line-aligned.

    Returns
    -------
    tuple of int
        (matches, matches used, matches whose reference uses the term, of those used).

    Notes
    -----
    A term matched twice in a sentence counts twice and is used when it appears at least once: the words
    are compared, not their count.
    """
    matches = used = agreeing = agreeing_used = 0
    for source, translation, reference in zip(sources, translations, references, strict=True):
        for term in glossary.target_terms(source):
            matches += 1
            hit = term_used(term, translation)
            used += hit
            if term_used(term, reference):
                agreeing += 1
                agreeing_used += hit
    return matches, used, agreeing, agreeing_used


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
    ``--build-test`` writes the glossary from the cached corpus and stops; otherwise ``--checkpoint`` is
    required.
    """
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.glossary", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--checkpoint", type=Path, help="checkpoint or run directory")
    parser.add_argument("--test", type=Path, default=DEFAULT_TEST, help="the glossary (.tsv)")
    parser.add_argument("--build-test", action="store_true", help="build the glossary with eflomal")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="folder of the Multi30k files")
    parser.add_argument("--beam", type=int, default=4, help="beam size (2 or more)")
    parser.add_argument("--precision", choices=["fp32", "bf16", "int8"], default="fp32")
    parser.add_argument("--output", type=Path, default=REPOSITORY / "benchmarks" / "results" / "glossary.md")
    args = parser.parse_args(argv)
    if args.beam < 2:
        parser.error(f"--beam must be at least 2 (a glossary needs beam search), not {args.beam}")
    if not args.build_test and args.checkpoint is None:
        parser.error("--checkpoint is required (or --build-test to write the glossary)")
    return args


def _timed_translation(
    translator: Translator, sentences: list[str], glossary: Glossary | None
) -> tuple[list[str], float]:
    """Translate and time it (seconds)."""
    start = time.perf_counter()
    translations = translator.translate(sentences, glossary=glossary)
    return translations, time.perf_counter() - start


def reference_terms_translations(
    translator: Translator, glossary: Glossary, sources: Sequence[str], references: Sequence[str]
) -> list[str]:
    """Translate each sentence with only the glossary entries whose target term its reference uses.

    Parameters
    ----------
    translator : Translator
        The model and search.
    glossary : Glossary
        The test's glossary.
    sources, references : sequence of str
        Line-aligned.

    Returns
    -------
    list of str
        One translation per sentence (the plain one where no entry agrees with the reference).

    Notes
    -----
    An oracle glossary per sentence, as terminology test sets annotate terms (Dinu et al., 2019): it
    separates what the constrained search costs from what forcing a term the reference does not use costs.
    One call per sentence, so it is not timed.
    """
    translations = []
    for source, reference in zip(sources, references, strict=True):
        entries = [
            match.entry for match in glossary.matches(source) if term_used(match.entry.target, reference)
        ]
        own = Glossary(entries)
        translations.append(translator.translate([source], glossary=own if len(own) else None)[0])
    return translations


def _seconds(value: float | None) -> str:
    """A time for the table, or a dash where none was taken."""
    return "-" if value is None else f"{value:.1f}"


def measure(args: argparse.Namespace) -> list[str]:
    """Translate the validation set with and without the glossary; return the record's lines.

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
    Each translation runs once after a warm-up of 32 sentences; the times are wall-clock on this machine's
    threads (stated), so compare them within the record only.
    """
    resolve_checkpoint(args.checkpoint)
    glossary = Glossary.from_file(args.test)
    pairs = read_parallel_files(args.corpus / "val.en.gz", args.corpus / "val.de.gz")
    sources, references = [pair[0] for pair in pairs], [pair[1] for pair in pairs]
    config = DecodeConfig(beam_size=args.beam)
    translator = Translator.from_checkpoint(args.checkpoint, config, precision=args.precision)
    translator.translate(sources[:32], glossary=glossary)  # warm-up: kernels, caches
    plain, plain_s = _timed_translation(translator, sources, None)
    constrained, constrained_s = _timed_translation(translator, sources, glossary)
    matched = [index for index, source in enumerate(sources) if glossary.matches(source)]
    matched_sources = [sources[index] for index in matched]
    _, matched_plain_s = _timed_translation(translator, matched_sources, None)
    _, matched_constrained_s = _timed_translation(translator, matched_sources, glossary)
    oracle = reference_terms_translations(translator, glossary, sources, references)
    lines = [
        "# Glossary term use on the Multi30k validation set (`python -m benchmarks.glossary`, issue #51)",
        "",
        *provenance_lines("benchmarks.glossary"),
        f"- model: `{args.checkpoint}`, {args.precision}, beam {args.beam}, {torch.get_num_threads()} threads; "
        f"glossary `{args.test.name}`: {len(glossary)} entries matching {len(matched)} of {len(sources)} "
        "sentences",
        "",
        "| | term use, every match | term use where the reference uses it | BLEU (lc) | chrF | time (s) "
        "| time on matched sentences (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, translations, seconds, matched_seconds in (
        ("without glossary", plain, plain_s, matched_plain_s),
        ("with glossary", constrained, constrained_s, matched_constrained_s),
        ("each sentence given only the terms its reference uses", oracle, None, None),
    ):
        matches, used, agreeing, agreeing_used = term_use(glossary, sources, translations, references)
        scores = score_translations(translations, references, lowercase=True)
        lines.append(
            f"| {name} | {used}/{matches} = {used / max(1, matches):.1%} | {agreeing_used}/{agreeing} = "
            f"{agreeing_used / max(1, agreeing):.1%} | {scores.bleu:.2f} | {scores.chrf:.2f} | "
            f"{_seconds(seconds)} | {_seconds(matched_seconds)} |"
        )
    lines.append("")
    for name, variant in (("with glossary", constrained), ("reference's terms only", oracle)):
        low_plain, low_variant, low_references = (
            [text.lower() for text in group] for group in (plain, variant, references)
        )
        bleu_test = paired_bootstrap_test(low_plain, low_variant, low_references, metric="BLEU")
        chrf_test = paired_bootstrap_test(plain, variant, references, metric="chrF")
        lines.append(
            f"- {name} against without, paired bootstrap (sacreBLEU, 1,000 resamples): BLEU (lowercased) "
            f"{bleu_test.baseline_score:.2f} -> {bleu_test.variant_score:.2f}, p = {bleu_test.p_value:.3f}; "
            f"chrF {chrf_test.baseline_score:.2f} -> {chrf_test.variant_score:.2f}, p = {chrf_test.p_value:.3f}"
        )
    lines += [
        f"- speed cost: {constrained_s / plain_s:.2f}x the time over the whole set, "
        f"{matched_constrained_s / matched_plain_s:.2f}x on the matched sentences",
    ]
    return lines


def main(argv: list[str] | None = None) -> None:
    """Build the glossary, or run the measurement and write its record.

    Parameters
    ----------
    argv : list of str or None
        Command-line arguments.

    Returns
    -------
    None

    Notes
    -----
    A missing checkpoint, corpus or glossary is one line naming the file.
    """
    args = parse_arguments(argv)
    try:
        if args.build_test:
            train = read_parallel_files(args.corpus / "train.en.gz", args.corpus / "train.de.gz")
            valid = read_parallel_files(args.corpus / "val.en.gz", args.corpus / "val.de.gz")
            entries = build_glossary_test(train, valid)
            write_text_atomically(args.test, "".join(f"{source}\t{target}\n" for source, target in entries))
            print(f"{len(entries)} glossary entries written to {args.test}")
            return
        lines = measure(args)
    except (CheckpointError, CorpusError, GlossaryError) as error:
        raise SystemExit(f"python -m benchmarks.glossary: {error}") from None
    write_record(args.output, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
