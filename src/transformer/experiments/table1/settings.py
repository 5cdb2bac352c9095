"""What Table 1 measures and at which sizes: the scales, the layer kinds and the output files."""

from dataclasses import dataclass, replace

MEASUREMENTS_FILE = "measurements.jsonl"
STRUCTURE_FILE = "structure.json"
REPORT_FILE = "table1.md"
TIME_PLOT_FILE = "time_vs_n.png"
FLOPS_PLOT_FILE = "flops_vs_n.png"
#: How many of the largest lengths the slope in n is fitted on (fixed costs dominate the smallest ones).
SLOPE_POINTS = 4


@dataclass(frozen=True)
class Table1Settings:
    """The grid and the budgets of one scale.

    Parameters
    ----------
    lengths : tuple of int
        Sequence lengths n, increasing.
    widths : tuple of int
        Model widths d, increasing.
    num_heads : int
        Heads of the attention layers (d must divide by it).
    window : int
        r of restricted self-attention: a query sees r positions on each side.
    kernel : int
        k of the convolutions.
    batch : int
        Sequences per forward pass.
    point_budget_seconds : float
        A layer's larger lengths are skipped at a width once one forward+backward is predicted (or measured)
        to take longer than this.
    total_budget_seconds : float
        Timing stops (and the remaining points are listed as skipped) after this many seconds.
    repeat_seconds : float
        Repetitions per point aim at this much time in total, between ``min_repeats`` and ``max_repeats``.
    min_repeats : int
        Fewest timed repetitions per point (after one warm-up).
    max_repeats : int
        Most timed repetitions per point.
    path_length : int
        n of the path-length and graph-depth measurements.
    path_width : int
        d of those measurements.
    reference_length : int
        n at which the slope in d, the FLOPs and the memory are reported.
    reference_width : int
        d at which the FLOPs and the memory are reported.

    Notes
    -----
    Built by :func:`scale_settings`; recorded in ``structure.json`` so a report says what produced it.
    """

    lengths: tuple[int, ...]
    widths: tuple[int, ...]
    num_heads: int
    window: int
    kernel: int
    batch: int
    point_budget_seconds: float
    total_budget_seconds: float
    repeat_seconds: float
    min_repeats: int
    max_repeats: int
    path_length: int
    path_width: int
    reference_length: int
    reference_width: int


@dataclass(frozen=True)
class LayerKind:
    """One row of Table 1, with the paper's entries.

    Parameters
    ----------
    name : str
        Identifier in ``measurements.jsonl``, e.g. ``"self_attention"``.
    label : str
        Row label of the report.
    complexity : str
        The paper's complexity per layer, e.g. ``"O(n²·d)"``.
    exponents : str
        The exponents of n and d that complexity predicts, e.g. ``"2, 1"``.
    sequential : str
        The paper's sequential operations.
    path : str
        The paper's maximum path length.
    timed : bool
        Whether its time, FLOPs and memory are measured (the dilated stack costs what the contiguous
        convolution costs per layer, so only its path length is).

    Notes
    -----
    Separable convolutions are not a row of Table 1; their complexity is quoted from section 4's text.
    """

    name: str
    label: str
    complexity: str
    exponents: str
    sequential: str
    path: str
    timed: bool = True


LAYER_KINDS = (
    LayerKind("self_attention", "Self-attention", "O(n²·d)", "2, 1", "O(1)", "O(1)"),
    LayerKind("recurrent", "Recurrent (LSTM)", "O(n·d²)", "1, 2", "O(n)", "O(n)"),
    LayerKind("convolution", "Convolutional (kernel k, contiguous)", "O(k·n·d²)", "1, 2", "O(1)", "O(n/k)"),
    LayerKind(
        "dilated_convolution",
        "Convolutional (kernel k, dilated stack)",
        "O(k·n·d²)",
        "1, 2",
        "O(1)",
        "O(log_k(n))",
        timed=False,
    ),
    LayerKind(
        "separable_convolution",
        "Separable convolution (kernel k)",
        "O(k·n·d + n·d²)",
        "1, 1 to 2",
        "O(1)",
        "O(n/k)",
    ),
    LayerKind(
        "restricted_masked",
        "Self-attention (restricted r, window mask)",
        "O(r·n·d)",
        "1, 1",
        "O(1)",
        "O(n/r)",
    ),
    LayerKind(
        "restricted_banded",
        "Self-attention (restricted r, banded)",
        "O(r·n·d)",
        "1, 1",
        "O(1)",
        "O(n/r)",
    ),
)
TIMED_KINDS = tuple(kind.name for kind in LAYER_KINDS if kind.timed)


def scale_settings(scale: str) -> Table1Settings:
    """Give the grid and budgets of a scale.

    Parameters
    ----------
    scale : str
        ``tiny``, ``cpu``, ``gpu`` or ``paper``.

    Returns
    -------
    Table1Settings
        The settings.

    Raises
    ------
    ValueError
        For another name.

    Notes
    -----
    ``cpu`` covers n = 16 .. 4096 and d = 128, 512, 1024 (the issue's grid) with one sequence per pass, 8
    heads, r = 16 and k = 3; its budgets keep the whole measurement under 15 minutes on two CPU cores. ``gpu``
    and ``paper`` use the same grid with ten seconds per point.
    """
    full_grid = Table1Settings(
        lengths=tuple(2**power for power in range(4, 13)),
        widths=(128, 512, 1024),
        num_heads=8,
        window=16,
        kernel=3,
        batch=1,
        point_budget_seconds=2.0,
        total_budget_seconds=12 * 60.0,
        repeat_seconds=0.3,
        min_repeats=3,
        max_repeats=10,
        path_length=64,
        path_width=16,
        reference_length=512,
        reference_width=512,
    )
    if scale == "cpu":
        return full_grid
    if scale in ("gpu", "paper"):
        return replace(
            full_grid,
            point_budget_seconds=10.0,
            total_budget_seconds=60 * 60.0,
            repeat_seconds=0.5,
            min_repeats=5,
            max_repeats=50,
        )
    if scale == "tiny":
        return Table1Settings(
            lengths=(8, 16, 32),
            widths=(16, 32),
            num_heads=2,
            window=2,
            kernel=3,
            batch=1,
            point_budget_seconds=1.0,
            # The tests' scale: every point is timed on a loaded 2-core machine too (the grid takes well under
            # a minute quiet; a 60 s budget left the last lengths untimed under a second job's load).
            total_budget_seconds=600.0,
            repeat_seconds=0.01,
            min_repeats=2,
            max_repeats=3,
            path_length=16,
            path_width=8,
            reference_length=16,
            reference_width=32,
        )
    raise ValueError(f"table1: unknown scale {scale!r}; choose tiny, cpu, gpu or paper")
