"""``transformer experiment table1``: the paper's Table 1 measured instead of quoted.

Table 1 compares layer types by complexity per layer, sequential operations and maximum path length. This
module measures all three for self-attention (this package's :class:`MultiHeadAttention`), restricted
self-attention with a window of r positions on each side (the same module with
:func:`~transformer.model.masks.build_window_mask`, and a banded version that computes only the 2r + 1
scores per query), a recurrent layer (``nn.LSTM``), a convolution with kernel k (contiguous, and a dilated
stack for the path length) and a depthwise-separable convolution:

* forward+backward seconds (median of several repetitions after a warm-up), FLOPs counted by
  ``torch.utils.flop_counter.FlopCounterMode`` (on the meta device, so even points too slow to time are
  counted) and the activation memory the layer keeps for backward, over n in {16, ..., 4096} and d in
  {128, 512, 1024}; log-log slopes of time and FLOPs in n and in d beside the paper's O(.);
* the maximum path length: how many stacked layers (or, for the LSTM, recurrent steps) it takes before
  output position n - 1 gets a non-zero gradient from input position 0;
* the sequential operations: the depth of the autograd graph of one layer at two lengths (constant: O(1);
  growing with n: one dependent step per position);
* where self-attention stops being faster than the LSTM at each d (the paper: when n < d).

Unlike the training experiments it has no ``build_plan``: it defines :func:`run_measurement`, which
``transformer experiment table1`` calls instead of the runner. Its output directory holds ``table1.md``,
``measurements.jsonl`` (one line per (layer, n, d) point, rewritten on every run), ``structure.json`` (path
lengths and graph depths) and the plots ``time_vs_n.png`` and ``flops_vs_n.png``.

Scales: ``cpu`` (the issue's grid, within 15 minutes on two CPU cores: a layer's larger n are skipped at a d
once its forward+backward is predicted to take over two seconds, and the report lists what was skipped),
``gpu`` and ``paper`` (the same grid with a larger time budget per point) and ``tiny`` (small n and d, for
tests).
"""

import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from transformer.atomic_files import write_json_atomically, write_text_atomically
from transformer.device import resolve_device
from transformer.experiments.provenance import refuse_dirty_tree, source_state
from transformer.experiments.table1.flops import check_recurrent_formula
from transformer.experiments.table1.paths import measure_structure
from transformer.experiments.table1.report import plot_measurements, render_report
from transformer.experiments.table1.settings import (
    MEASUREMENTS_FILE,
    REPORT_FILE,
    STRUCTURE_FILE,
    TIMED_KINDS,
    scale_settings,
)
from transformer.experiments.table1.timing import measure_points


def run_measurement(
    output_dir: Path, device: str, scale: str, report: Callable[[str], None], allow_dirty: bool = False
) -> Path:
    """Measure Table 1 and write its report, measurements and plots.

    Parameters
    ----------
    output_dir : Path
        Created if missing; ``measurements.jsonl`` there is replaced.
    device : str
        ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.
    scale : str
        ``tiny``, ``cpu``, ``gpu`` or ``paper``.
    report : callable
        Receives one-line progress notes.
    allow_dirty : bool
        Measure even when the package's source has uncommitted changes (the records carry ``+dirty``).

    Returns
    -------
    Path
        ``table1.md``.

    Notes
    -----
    The entry point of a measurement experiment: ``transformer experiment table1`` calls it in place of the
    training runner. A rerun measures everything again (timings are of the machine at that moment).
    """
    settings = scale_settings(scale)
    torch_device = resolve_device(device, option="--device")
    state = source_state()
    refuse_dirty_tree(state, allow_dirty)  # before anything is written
    started = time.perf_counter()
    output_dir.mkdir(parents=True, exist_ok=True)
    measurements = output_dir / MEASUREMENTS_FILE
    measurements.unlink(missing_ok=True)
    report(f"table1: measuring {len(TIMED_KINDS)} layer types on {torch_device} at scale {scale}")
    records = measure_points(settings, torch_device, measurements, report, commit=state.label)
    report("table1: path lengths and graph depths")
    structure = measure_structure(settings)
    recurrent_check = check_recurrent_formula(settings.path_length, settings.path_width, settings)
    write_json_atomically(
        output_dir / STRUCTURE_FILE,
        {
            "settings": asdict(settings),
            "layers": structure,
            "recurrent_flops_check": list(recurrent_check),
            "commit": state.label,
        },
    )
    plot_measurements(records, settings, output_dir)
    text = render_report(settings, scale, records, structure, recurrent_check, time.perf_counter() - started)
    write_text_atomically(output_dir / REPORT_FILE, text)
    return output_dir / REPORT_FILE
