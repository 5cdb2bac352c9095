"""ONNX export parity on the Multi30k validation set: onnxruntime against PyTorch on the same weights (issue #52).

The checkpoint is exported (``convert --to onnx --quantization int8``) and the 1,014 validation sentences are
translated by both engines with the same search (our searches drive both: greedy and beam 4, the checkpoint's
length penalty), fp32 and int8. Reported per search: sentences whose best hypothesis has the same tokens as
PyTorch fp32's, the largest difference of a hypothesis's score, lowercased BLEU of each engine and precision,
int8 against fp32 by sacreBLEU's paired bootstrap, and each engine's time (one pass after a warm-up, batches of
the PyTorch translator's default budget, this machine's threads). The step-level tolerance is measured too:
the largest difference of a decoder step's log-probabilities over the first validation batch, fed the
reference tokens (teacher forcing).

Run from the repository root: ``python -m benchmarks.onnx_parity --checkpoint runs/multi30k/averaged``. Writes a
Markdown record (``--output``) with the CPU, the date, the command and the commit.
"""

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.bench_environment import provenance_lines, write_record
from benchmarks.bench_worker import REPOSITORY
from transformer.checkpoint.layout import CheckpointError, resolve_checkpoint
from transformer.data.pipeline.batch import collate
from transformer.data.pipeline.dataset import encode_corpus
from transformer.data.pipeline.text_files import CorpusError, read_parallel_files
from transformer.decoding.candidate import Candidate
from transformer.decoding.step_model import TransformerStepModel, inference_context
from transformer.decoding.translator import Translator
from transformer.evaluation.bleu import paired_bootstrap_test, score_translations
from transformer.interop.onnx_export import export_onnx
from transformer.interop.onnx_step_model import OnnxStepModel
from transformer.interop.onnx_translation import OnnxTranslator

#: Where ``data.corpus: multi30k`` caches the corpus.
DEFAULT_CORPUS = Path("~/.cache/transformer/multi30k").expanduser()
#: The searches compared, by label.
SEARCHES = {"greedy": 1, "beam 4": 4}


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line.

    Parameters
    ----------
    argv : list of str or None
        Arguments (None: ``sys.argv[1:]``).

    Returns
    -------
    argparse.Namespace
        ``checkpoint``, ``corpus``, ``output``.

    Notes
    -----
    The corpus folder is where ``transformer train --config configs/multi30k.yaml`` caches Multi30k.
    """
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.onnx_parity", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--checkpoint", type=Path, required=True, help="checkpoint or run directory")
    parser.add_argument(
        "--corpus", type=Path, default=DEFAULT_CORPUS, help="folder with val.en.gz, val.de.gz"
    )
    parser.add_argument(
        "--output", type=Path, default=REPOSITORY / "benchmarks" / "results" / "onnx-parity.md", help="record"
    )
    return parser.parse_args(argv)


def timed(translator: Translator | OnnxTranslator, sources: list[str]) -> tuple[list[list[Candidate]], float]:
    """Translate after a warm-up of 32 sentences; return the candidates and the seconds of the pass.

    Parameters
    ----------
    translator : Translator or OnnxTranslator
        Either engine, its search set.
    sources : list of str
        The sentences.

    Returns
    -------
    tuple
        Candidates per sentence, and wall-clock seconds.

    Notes
    -----
    The warm-up loads kernels and lets onnxruntime allocate its arenas, so neither engine pays that in the pass.
    """
    translator.translate_nbest(sources[:32])
    started = time.perf_counter()
    candidates = translator.translate_nbest(sources)
    return candidates, time.perf_counter() - started


def step_difference(translator: Translator, exported: OnnxTranslator, pairs: list[tuple[str, str]]) -> float:
    """The largest difference of a decoder step's log-probabilities, teacher-forced on 64 validation pairs.

    Parameters
    ----------
    translator : Translator
        PyTorch fp32.
    exported : OnnxTranslator
        onnxruntime fp32 of the same checkpoint.
    pairs : list of (str, str)
        Source and reference pairs; the first 64 are fed.

    Returns
    -------
    float
        ``max |log p_onnx - log p_torch|`` over every row, step and vocabulary entry.

    Notes
    -----
    Both step models are fed the reference tokens, so every step of both sees the same prefix.
    """
    ours, theirs = TransformerStepModel(translator.model), OnnxStepModel(exported.model)  # type: ignore[arg-type]
    corpus = encode_corpus(pairs[:64], translator.tokenizer, max_len=1024, eos_id=ours.eos_id)
    batch = collate(list(range(len(corpus))), corpus, ours.pad_id, ours.bos_id, ours.eos_id)
    largest = 0.0
    with inference_context(ours):
        state, onnx_state = ours.start(batch.src_tokens), theirs.start(batch.src_tokens)
        for position in range(batch.tgt_input.size(1)):
            tokens = batch.tgt_input[:, position]
            difference = (ours.log_probs(state, tokens) - theirs.log_probs(onnx_state, tokens)).abs().max()
            largest = max(largest, float(difference))
    return largest


def measure(args: argparse.Namespace) -> list[str]:
    """Export, translate with both engines and precisions, compare; return the record's lines.

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
    The search is the checkpoint's own with only the beam size changed, for both engines.
    """
    checkpoint = resolve_checkpoint(args.checkpoint)
    pairs = read_parallel_files(args.corpus / "val.en.gz", args.corpus / "val.de.gz")
    sources, references = [pair[0] for pair in pairs], [pair[1] for pair in pairs]
    lowered = [text.lower() for text in references]
    with tempfile.TemporaryDirectory(prefix="onnx-parity-") as scratch:
        started = time.perf_counter()
        directory = export_onnx(checkpoint, Path(scratch) / "onnx", "int8")
        export_seconds = time.perf_counter() - started
        engines: dict[str, Translator | OnnxTranslator] = {
            "PyTorch fp32": Translator.from_checkpoint(checkpoint, device="cpu"),
            "PyTorch int8": Translator.from_checkpoint(checkpoint, device="cpu", precision="int8"),
            "onnxruntime fp32": OnnxTranslator.from_directory(directory),
            "onnxruntime int8": OnnxTranslator.from_directory(directory, "int8"),
        }
        base = engines["PyTorch fp32"].decode_config
        step_gap = step_difference(engines["PyTorch fp32"], engines["onnxruntime fp32"], pairs)  # type: ignore[arg-type]
        lines = [
            "# ONNX export parity on the Multi30k validation set (`python -m benchmarks.onnx_parity`, issue #52)",
            "",
            *provenance_lines("benchmarks.onnx_parity"),
            f"- model: `{args.checkpoint}`; export (fp32 and int8 graphs) {export_seconds:.1f} s; "
            f"{torch.get_num_threads()} threads; {len(sources)} sentences; search: the checkpoint's "
            f"({base.length_penalty_form} penalty, alpha {base.length_penalty}, offset {base.max_length_offset})",
            f"- teacher-forced decoder steps, 64 validation pairs: largest log-probability difference, onnxruntime "
            f"fp32 against PyTorch fp32: {step_gap:.2e}",
            "",
            "| search | engine | same tokens as PyTorch fp32 | largest score difference | BLEU (lc) | time (s) "
            "| sentences/s |",
            "|---|---|---|---|---|---|---|",
        ]
        notes = []
        for label, beam in SEARCHES.items():
            results = {}
            for name, translator in engines.items():
                translator.decode_config = dataclasses.replace(base, beam_size=beam, nbest=1)
                results[name] = timed(translator, sources)
            expected = results["PyTorch fp32"][0]
            texts = {
                name: [found[0].text if found else "" for found in value[0]]
                for name, value in results.items()
            }
            for name, (candidates, seconds) in results.items():
                same = sum(
                    [item.tokens for item in got[:1]] == [item.tokens for item in want[:1]]
                    for got, want in zip(candidates, expected, strict=True)
                )
                gap = max(
                    (abs(got[0].score - want[0].score) for got, want in zip(candidates, expected, strict=True)
                     if got and want and got[0].tokens == want[0].tokens),
                    default=0.0,
                )  # fmt: skip
                bleu = score_translations(texts[name], references, lowercase=True).bleu
                lines.append(
                    f"| {label} | {name} | {same}/{len(sources)} | {gap:.1e} | {bleu:.2f} | {seconds:.1f} | "
                    f"{len(sources) / seconds:.1f} |"
                )
            for engine in ("PyTorch", "onnxruntime"):
                test = paired_bootstrap_test(
                    [text.lower() for text in texts[f"{engine} fp32"]],
                    [text.lower() for text in texts[f"{engine} int8"]],
                    lowered,
                )
                notes.append(
                    f"- {label}, {engine}: int8 against fp32, BLEU (lowercased) {test.baseline_score:.2f} -> "
                    f"{test.variant_score:.2f} ({test.variant_score - test.baseline_score:+.2f}), paired bootstrap "
                    f"p = {test.p_value:.3f}"
                )
    return [*lines, "", *notes]


def main(argv: list[str] | None = None) -> None:
    """Run the comparison and write its record.

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
        raise SystemExit(f"python -m benchmarks.onnx_parity: {error}") from None
    write_record(args.output, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
