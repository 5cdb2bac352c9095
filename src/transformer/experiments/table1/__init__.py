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

Unlike the training experiments it has no ``build_plan``: its :mod:`.run` defines ``run_measurement``, which
``transformer experiment table1`` calls instead of the runner. Its output directory holds ``table1.md``,
``measurements.jsonl`` (one line per (layer, n, d) point, rewritten on every run), ``structure.json`` (path
lengths and graph depths) and the plots ``time_vs_n.png`` and ``flops_vs_n.png``.

Scales: ``cpu`` (the issue's grid, within 15 minutes on two CPU cores: a layer's larger n are skipped at a d
once its forward+backward is predicted to take over two seconds, and the report lists what was skipped),
``gpu`` and ``paper`` (the same grid with a larger time budget per point) and ``tiny`` (small n and d, for
tests).

Layout (docs/experiments.md): :mod:`.settings` (the layer kinds, the grid per scale), :mod:`.run` (the
measurement), :mod:`.report` (the tables of ``table1.md`` and the plots), and what they use: :mod:`.layers`
(the layers measured), :mod:`.timing`, :mod:`.flops`, :mod:`.paths` (path lengths and graph depths) and
:mod:`.analysis` (slopes and crossovers).
"""
