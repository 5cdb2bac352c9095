"""The table1 experiment's measurement: every layer timed and counted over the grid, then report and plots."""

import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from transformer.atomic_files import write_json_atomically, write_text_atomically
from transformer.device import resolve_device
from transformer.experiments.common.provenance import refuse_dirty_tree, source_state
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
