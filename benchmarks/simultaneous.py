"""Simultaneous translation by test-time wait-k on the Multi30k validation set: BLEU against Average Lagging.

The checkpoint (a full-sentence model) translates the 1,014 validation sentences with
:func:`~transformer.decoding.simultaneous.wait_k_translate` for several k, and with full-sentence greedy
decoding (k beyond every source length, which reads the whole source first), in batches of sentences of
similar length. Reported per k: lowercased BLEU, chrF, mean Average Lagging in source tokens (Ma et al., 2019),
the BLEU difference from full-sentence decoding with sacreBLEU's paired bootstrap, and the time; the full-sentence row is checked against the offline greedy search's tokens. Issue #52.

Run from the repository root: ``python -m benchmarks.simultaneous --checkpoint runs/multi30k/averaged``. Writes a
Markdown record (``--output``) with the CPU, the date, the command and the commit.
"""

import argparse
import time
from pathlib import Path

import torch

from benchmarks.bench_environment import provenance_lines, write_record
from benchmarks.bench_worker import REPOSITORY
from transformer.checkpoint.layout import CheckpointError
from transformer.config.decode import DecodeConfig
from transformer.data.pipeline.text_files import CorpusError, read_parallel_files
from transformer.decoding.simultaneous import wait_k_translate_batched
from transformer.decoding.translator import Translator
from transformer.evaluation.bleu import paired_bootstrap_test, score_translations
from transformer.model.transformer import Transformer

#: Where ``data.corpus: multi30k`` caches the corpus.
DEFAULT_CORPUS = Path("~/.cache/transformer/multi30k").expanduser()
#: A k longer than any source: full-sentence decoding.
FULL_SENTENCE = 10**6
#: Sentences translated together.
BATCH = 64


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line.

    Parameters
    ----------
    argv : list of str or None
        Arguments (None: ``sys.argv[1:]``).

    Returns
    -------
    argparse.Namespace
        ``checkpoint``, ``corpus``, ``waits``, ``output``.

    Notes
    -----
    k is counted in source tokens (BPE pieces), as the model reads them.
    """
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.simultaneous", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--checkpoint", type=Path, required=True, help="checkpoint or run directory")
    parser.add_argument(
        "--corpus", type=Path, default=DEFAULT_CORPUS, help="folder with val.en.gz, val.de.gz"
    )
    parser.add_argument("--waits", type=int, nargs="+", default=[1, 3, 5, 7, 9], help="the k values")
    parser.add_argument(
        "--output",
        type=Path,
        default=REPOSITORY / "benchmarks" / "results" / "simultaneous.md",
        help="record",
    )
    return parser.parse_args(argv)


def measure(args: argparse.Namespace) -> list[str]:
    """Run every k and full-sentence decoding; return the record's lines.

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
    fp32 on this machine's threads; the times compare the rows of one record only.
    """
    pairs = read_parallel_files(args.corpus / "val.en.gz", args.corpus / "val.de.gz")
    references = [pair[1] for pair in pairs]
    translator = Translator.from_checkpoint(args.checkpoint, DecodeConfig(beam_size=1), device="cpu")
    model = translator.model
    assert isinstance(model, Transformer)
    sources = [translator.tokenizer.encode(pair[0].strip())[:1023] + [model.config.eos_id] for pair in pairs]
    greedy = translator.translate_nbest([pair[0] for pair in pairs])
    lines = [
        "# Simultaneous translation, test-time wait-k, on the Multi30k validation set "
        "(`python -m benchmarks.simultaneous`, issue #52)",
        "",
        *provenance_lines("benchmarks.simultaneous"),
        f"- model: `{args.checkpoint}` (trained on whole sentences), fp32, greedy, {torch.get_num_threads()} "
        f"threads; {len(pairs)} sentences; k and Average Lagging in source tokens (BPE pieces)",
        "",
        "| k | BLEU (lc) | chrF | Average Lagging | BLEU vs full sentence (paired bootstrap, 1,000) | time (s) |",
        "|---|---|---|---|---|---|",
    ]
    rows: list[str] = []
    outputs: dict[int, list[str]] = {}
    same = 0
    for wait in [FULL_SENTENCE, *args.waits]:
        started = time.perf_counter()
        found = wait_k_translate_batched(model, sources, wait, BATCH)
        seconds = time.perf_counter() - started
        outputs[wait] = [translator.tokenizer.decode(item.tokens).strip() for item in found]
        scores = score_translations(outputs[wait], references, lowercase=True)
        lagging = sum(item.average_lagging for item in found) / len(found)
        if wait == FULL_SENTENCE:
            same = sum(
                item.tokens == (best[0].tokens if best else [])
                for item, best in zip(found, greedy, strict=True)
            )
            rows.append(
                f"| full sentence | {scores.bleu:.2f} | {scores.chrf:.2f} | {lagging:.2f} | - | {seconds:.1f} |"
            )
            continue
        full, variant = ([text.lower() for text in outputs[key]] for key in (FULL_SENTENCE, wait))
        test = paired_bootstrap_test(full, variant, [text.lower() for text in references])
        rows.append(
            f"| {wait} | {scores.bleu:.2f} | {scores.chrf:.2f} | {lagging:.2f} | "
            f"{test.variant_score - test.baseline_score:+.2f} (p {test.p_value:.3f}) | {seconds:.1f} |"
        )
    lines += [
        *rows[1:],
        rows[0],
        "",
        f"- full-sentence wait-k against the offline greedy search: {same}/{len(sources)} identical",
    ]
    mean_source = sum(len(source) - 1 for source in sources) / len(sources)
    lines.append(
        f"- mean source length: {mean_source:.2f} tokens (the Average Lagging of full-sentence decoding)"
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
    A missing checkpoint or corpus is one line naming the file.
    """
    args = parse_arguments(argv)
    try:
        lines = measure(args)
    except (CheckpointError, CorpusError, ValueError) as error:
        raise SystemExit(f"python -m benchmarks.simultaneous: {error}") from None
    write_record(args.output, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
