"""Compare decoding methods on one validation set: beam search, MBR and ensembles (issue #28).

    python -m benchmarks.compare_decoding --checkpoint runs/m30k-s1 --source VALID.en --reference VALID.de \
        --mbr 8 16 32 --ensemble runs/m30k-s2 runs/m30k-s3 runs/m30k-s4 \
        --output experiments/decoding-28/comparison.json

(from the repository root: a module of the ``benchmarks`` package).

Each row translates the sources with one method and records BLEU (sacreBLEU 13a, cased and lowercased),
chrF2 and seconds per sentence (wall clock, model loaded beforehand):

- ``beam 4``: each --checkpoint and --ensemble member alone (the baseline of every other row);
- ``MBR N (sampling, chrF)`` and ``MBR N (beam, chrF)`` for each N of --mbr, with the first checkpoint;
  sampled candidates use epsilon sampling (epsilon 0.02, Freitag et al. 2023);
- ``ensemble of K (prob)``: the first checkpoint with the first K - 1 --ensemble members, for K = 2 and 4
  (as many as given), averaging probabilities; beam 4.

Rows are written to the JSON file as they finish, and a rerun skips the rows already there: a run of hours
can be stopped and resumed. The report (Markdown, printed and written beside the JSON) names the CPU, the
thread count and the command.
"""

import argparse
import dataclasses
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import torch

from transformer.atomic_files import write_json_atomically, write_text_atomically
from transformer.config.decode import DecodeConfig
from transformer.data.pipeline.text_files import read_parallel_files
from transformer.decoding.translator import Translator
from transformer.device import describe_cpu
from transformer.evaluation.bleu import score_translations

#: How this script runs, for the command its report records.
MODULE = "benchmarks.compare_decoding"
#: The baseline search of every row: the paper's beam size with the power length penalty of configs/multi30k.
BEAM_4 = DecodeConfig(beam_size=4, length_penalty=1.0, length_penalty_form="power")
#: Sentences translated before the clock starts.
WARM_UP_SENTENCES = 8


@dataclasses.dataclass(frozen=True)
class Method:
    """One row of the comparison: a name, the checkpoints it decodes with and its search.

    Parameters
    ----------
    name : str
        The row's label, also its key for resuming.
    checkpoints : tuple of str
        One checkpoint, or an ensemble.
    config : DecodeConfig
        The search.

    Notes
    -----
    Two rows with one name are one row: the name must say everything that changes the result.
    """

    name: str
    checkpoints: tuple[str, ...]
    config: DecodeConfig


def plan_methods(checkpoints: list[str], ensemble: list[str], mbr_sizes: list[int]) -> list[Method]:
    """List the rows to measure, baselines first.

    Parameters
    ----------
    checkpoints : list of str
        The models compared (the first one is MBR's and the ensembles' first member).
    ensemble : list of str
        Further models for the ensembles.
    mbr_sizes : list of int
        The N of the MBR rows.

    Returns
    -------
    list of Method
        The rows.

    Notes
    -----
    Each single model's beam row is the baseline its MBR and ensemble rows are read against.
    """
    singles = list(dict.fromkeys([*checkpoints, *ensemble]))  # a model listed twice is measured once
    methods = [Method(f"beam 4: {path}", (path,), BEAM_4) for path in singles]
    first = checkpoints[0]
    for size in mbr_sizes:
        sampled = dataclasses.replace(BEAM_4, mbr=size, mbr_candidates="sampling", epsilon=0.02)
        methods.append(Method(f"MBR {size} (sampling eps 0.02, chrF): {first}", (first,), sampled))
        beam = dataclasses.replace(BEAM_4, mbr=size, mbr_candidates="beam")
        methods.append(Method(f"MBR {size} (beam n-best, chrF): {first}", (first,), beam))
    for size in (2, 4):
        if size - 1 <= len(ensemble):
            members = (first, *ensemble[: size - 1])
            methods.append(Method(f"ensemble of {size} (prob), beam 4: {' '.join(members)}", members, BEAM_4))
    return methods


def measure(method: Method, sources: list[str], references: list[str], device: str) -> dict[str, Any]:
    """Translate with one method and score it.

    Parameters
    ----------
    method : Method
        The row.
    sources, references : list of str
        The validation set.
    device : str
        Where to translate.

    Returns
    -------
    dict
        The row: name, BLEU (cased and lowercased), chrF2, seconds per sentence, signature.

    Notes
    -----
    The clock starts after the models are loaded and have translated a few sentences untimed (the first
    calls pay for allocator growth and oneDNN kernel selection): loading is the same for every method.
    """
    translator = Translator.from_checkpoints(list(method.checkpoints), method.config, device)
    translator.translate(sources[:WARM_UP_SENTENCES])
    start = time.perf_counter()
    hypotheses = translator.translate(sources)
    seconds = time.perf_counter() - start
    cased = score_translations(hypotheses, references)
    lowercased = score_translations(hypotheses, references, lowercase=True)
    return {
        "name": method.name,
        "bleu": round(cased.bleu, 2),
        "bleu_lowercased": round(lowercased.bleu, 2),
        "chrf": round(cased.chrf, 2),
        "seconds_per_sentence": round(seconds / len(sources), 4),
        "bleu_signature": cased.bleu_signature,
        "search": dataclasses.asdict(method.config),
    }


def render_markdown(report: dict[str, Any]) -> str:
    """Format the report as a Markdown table with its command and machine.

    Parameters
    ----------
    report : dict
        The JSON report.

    Returns
    -------
    str
        The Markdown.

    Notes
    -----
    Seconds per sentence are only comparable within one report (one machine, one load).
    """
    lines = [
        f"Command: `{report['command']}` ({report['date']}, {report['threads']} threads)",
        "",
        f"CPU: {report['cpu']}",
        "",
        "| method | BLEU | BLEU (lowercased) | chrF2 | s/sentence |",
        "|---|---|---|---|---|",
    ]
    for row in report["rows"]:
        lines.append(
            f"| {row['name']} | {row['bleu']} | {row['bleu_lowercased']} | {row['chrf']} | "
            f"{row['seconds_per_sentence']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the comparison (see the module docstring).

    Parameters
    ----------
    argv : list of str or None
        Arguments; None reads ``sys.argv``.

    Returns
    -------
    int
        0.

    Notes
    -----
    Resumable: rows already in ``--output`` are kept and not measured again.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", nargs="+", required=True, help="models compared (first: MBR's)")
    parser.add_argument("--ensemble", nargs="*", default=[], help="further models for the ensemble rows")
    parser.add_argument("--source", required=True)
    parser.add_argument("--reference", required=True)
    parser.add_argument("--mbr", nargs="*", type=int, default=[8, 16, 32], help="MBR candidate counts")
    parser.add_argument("--limit", type=int, default=None, help="only the first N sentences")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--output", required=True, help="JSON file (Markdown written beside it)")
    args = parser.parse_args(argv)
    pairs = read_parallel_files(Path(args.source), Path(args.reference))[: args.limit]
    sources, references = [source for source, _ in pairs], [reference for _, reference in pairs]
    output = Path(args.output)
    report = json.loads(output.read_text(encoding="utf-8")) if output.exists() else {"rows": []}
    report.update(
        command=" ".join(["python", "-m", MODULE, *map(shlex.quote, argv or sys.argv[1:])]),
        date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        cpu=describe_cpu(),
        threads=torch.get_num_threads(),
        sentences=len(sources),
    )
    done = {row["name"] for row in report["rows"]}
    for method in plan_methods(args.checkpoint, args.ensemble, args.mbr):
        if method.name in done:
            continue
        report["rows"].append(measure(method, sources, references, args.device))
        write_json_atomically(output, report)  # a finished row survives an interruption
        print(report["rows"][-1], flush=True)
    markdown = render_markdown(report)
    write_json_atomically(output, report)
    write_text_atomically(output.with_suffix(".md"), markdown)
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
