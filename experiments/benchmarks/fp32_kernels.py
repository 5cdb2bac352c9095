"""What ``fp32_kernels: auto`` measures on this CPU, at the base model's shapes, and what it buys a search.

Two parts. First, the probe itself (:func:`transformer.autotune.linear_probe.measure_linear_seconds`: MKL's
sgemm through ``F.linear`` against oneDNN's packed linear, interleaved, best of a few rounds) at every product
shape of the base model (d_model 512, d_ff 2048, 32,000 target pieces), run ``REPEATS`` times, the median of
the repeats reported, with the decision the probe's rule takes. Second, whole searches of a base-size model with
random weights (32 sentences of 20 tokens, 20 output tokens each; greedy and beam 4) with every layer on MKL
and with the layers the probe chose on oneDNN, interleaved, median of ``SEARCH_REPEATS``, and whether the two
found the same tokens. Run from the repository root: ``python -m experiments.benchmarks.fp32_kernels``
(``--threads N``, default 2); it prints Markdown.
"""

import argparse
import copy
import statistics
import time

import torch

from transformer import TransformerConfig
from transformer.autotune.linear_probe import PROBE_ROWS, choose_linear_backend, measure_linear_seconds
from transformer.config.decode import DecodeConfig
from transformer.decoding.beam_search import search
from transformer.device import describe_cpu
from transformer.model.fp32_kernels import swap_fp32_linear_layers
from transformer.model.transformer import Transformer

D_MODEL, D_FF, VOCAB = 512, 2048, 32000
#: (in_features, out_features, role, what it is).
PRODUCTS = [
    (D_MODEL, 3 * D_MODEL, "decoder", "stacked q/k/v"),
    (D_MODEL, D_MODEL, "decoder", "query / attention output"),
    (D_MODEL, D_FF, "decoder", "feed-forward in"),
    (D_FF, D_MODEL, "decoder", "feed-forward out"),
    (D_MODEL, VOCAB, "decoder", "output projection"),
    (D_MODEL, 3 * D_MODEL, "encoder", "stacked q/k/v"),
    (D_MODEL, D_MODEL, "encoder", "attention output, cross keys/values"),
    (D_MODEL, D_FF, "encoder", "feed-forward in"),
    (D_FF, D_MODEL, "encoder", "feed-forward out"),
]
REPEATS = 5
SEARCH_REPEATS = 3


def probe_table() -> dict[tuple[int, int, str], str]:
    """Print the probe's figures per product and return the backend its rule picks for each."""
    chosen: dict[tuple[int, int, str], str] = {}
    print("| product (in -> out), role | rows: MKL ms / oneDNN ms (speed-up) | probe picks |")
    print("|---|---|---|")
    for in_features, out_features, role, label in PRODUCTS:
        runs = [measure_linear_seconds(in_features, out_features, PROBE_ROWS[role]) for _ in range(REPEATS)]
        median = {
            rows: {name: statistics.median(run[rows][name] for run in runs) for name in ("mkl", "onednn")}
            for rows in runs[0]
        }
        chosen[(in_features, out_features, role)] = choose_linear_backend(median)
        cells = "; ".join(
            f"{rows}: {1e3 * value['mkl']:.3f} / {1e3 * value['onednn']:.3f} ({value['mkl'] / value['onednn']:.2f}x)"
            for rows, value in median.items()
        )
        print(
            f"| {in_features} -> {out_features}, {role} ({label}) | {cells} | {chosen[(in_features, out_features, role)]} |"
        )
    return chosen


def search_table(chosen: dict[tuple[int, int, str], str]) -> None:
    """Time whole searches of a base-size random model on MKL and as the probe chose; print the table."""
    config = TransformerConfig(vocab_size=VOCAB, d_model=D_MODEL, d_ff=D_FF, num_heads=8, dropout=0.0)
    reference = Transformer(config).eval()
    swapped = swap_fp32_linear_layers(
        copy.deepcopy(reference),
        lambda in_features, out_features, role: chosen[(in_features, out_features, role)],
    )
    generator = torch.Generator().manual_seed(0)
    src_tokens = torch.randint(4, VOCAB, (32, 20), generator=generator)
    src_tokens[:, -1] = 2
    print(
        "\n| search (32 sentences x 20 tokens, 20 steps) | MKL s | probe's choice s | speed-up | same tokens |"
    )
    print("|---|---|---|---|---|")
    for beam in (1, 4):
        settings = DecodeConfig(beam_size=beam, length_penalty=0.0, min_length=20, max_length=20)
        times: dict[str, list[float]] = {"mkl": [], "chosen": []}
        outputs = {}
        with torch.inference_mode():
            for _ in range(SEARCH_REPEATS):
                for name, model in (("mkl", reference), ("chosen", swapped)):
                    start = time.perf_counter()
                    outputs[name] = [
                        hypotheses[0].tokens for hypotheses in search(model, src_tokens, settings)
                    ]
                    times[name].append(time.perf_counter() - start)
        mkl, ours = statistics.median(times["mkl"]), statistics.median(times["chosen"])
        same = sum(a == b for a, b in zip(outputs["mkl"], outputs["chosen"], strict=True))
        label = "greedy" if beam == 1 else f"beam {beam}"
        print(f"| {label} | {mkl:.2f} | {ours:.2f} | {mkl / ours:.2f}x | {same}/32 |", flush=True)


def main() -> None:
    """Parse ``--threads``, print the CPU line, the probe's table and the search table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"CPU: {describe_cpu()}; torch {torch.__version__}, {torch.get_num_threads()} threads\n")
    search_table(probe_table())


if __name__ == "__main__":
    main()
