"""``transformer experiment attention-scoring``: unscaled, 1/sqrt(d_k), 1/d_k and additive attention against d_k.

Section 3.2.1 of the paper makes three claims it gives no numbers for: additive attention beats unscaled dot
products for larger d_k; unscaled dot products "grow large in magnitude, pushing the softmax function into
regions where it has extremely small gradients"; and 1/sqrt(d_k) fixes that. (The user's notes add that 1/d_k
would give "excessively small values and poor gradient behavior".) This experiment trains one model per
scoring and key width, with everything else fixed, and reports:

* dev loss (NLL per target token), perplexity and BLEU against d_k, one line per scoring (``plot``);
* at initialisation and after training, per attention kind and averaged over layers: the variance of the raw
  q . k, the mean softmax entropy, the share of saturated rows (largest probability > 0.99) and the norm of
  the gradient reaching the attention logits (:mod:`.attention_statistics`).

Variants: scorings ``unscaled`` (``attention_scaling: none``), ``sqrt`` (the paper's), ``linear`` (1/d_k) and
``additive``, times d_k in {4, 8, 16, 32, 64, 128, 256}, named ``SCORING-dkN`` and grouped by scoring (so
``--only additive`` runs one scoring, ``--only sqrt-dk64`` one run). d_v is set equal to d_k; d_model, the
number of heads (4) and everything else stay fixed, so d_k may exceed d_model / h (the projections then widen:
``h * d_k`` may be larger than d_model, which the model allows). Since d_v follows d_k, the value and output
projections widen with it too: the parameter count grows with d_k for every scoring alike (the table shows it).

Reading the statistics at initialisation: section 3.2.1 assumes q and k have components of unit variance, so
that Var(q . k) = d_k. Here the projections are Xavier-uniform over all heads at once (d_model inputs,
h * d_k outputs), so with unit-variance (layer-normalised) inputs a component of q has variance
2 d_model / (d_model + h d_k), and Var(q . k) = d_k (2 d_model / (d_model + h d_k))^2: d_k only at
d_k = d_model / h, and *falling* beyond it. At the cpu scale it measured 13, 21, 28, 31, 27, 20 and 12.6
for d_k = 4 ... 256 (100 validation pairs, seed 1), so unscaled scores saturate most at d_k = 32 at
initialisation (13% of rows); the growth with d_k that the paper describes appears, if at all, through
training.

Scales:

* ``cpu`` trains on the built-in English-German grammar (``data.corpus: synthetic``, as
  ``configs/quickstart.yaml``): it is noise-free, its sentences are short and a 2+2-layer model of width 128
  learns it within a few hundred steps on two cores, so differences between scorings show in BLEU and
  perplexity instead of drowning in the noise of a Multi30k model trained for two minutes, far from
  converged. (``--set data.corpus=multi30k --set data.mirror=DIR --set model.vocab_size=8000`` runs the
  same grid on Multi30k, at several times the cost per step; the ``gpu`` scale is the place for it.)
* ``gpu``: Multi30k, d_model 256, 8 heads, 4+4 layers, as table2's gpu scale.
* ``paper``: WMT14 English-German from the corpus registry (``data.corpus: wmt14-en-de``), the base model's size.
  Additive scoring keeps a (batch, heads, query, key, d_k) tensor per layer: at d_k = 256 and the paper's
  batch it needs far more memory than one GPU has; lower ``train.max_tokens`` with ``train.accumulate``.
* ``tiny``: a few steps on 300 grammar pairs, for tests.

CPU calibration, 2026-11-23 (``grep -m1 'model name' /proc/cpuinfo``: "Intel(R) Xeon(R) Processor", 2 cores,
AVX-512 without AMX, so training runs in fp32). Measured with one thread while another experiment used the
other core (the process got 97-99% of its core): 40 steps per variant, seconds per training step after
the first five,

==============  =====  =====  =====  =====  =====  =====  =====
d_k               4      8      16     32     64     128    256
==============  =====  =====  =====  =====  =====  =====  =====
sqrt, linear    0.073    -    0.075  0.089  0.118  0.179  0.354
additive        (0.18) 0.103  0.132  0.242  0.49   1.10   2.96
==============  =====  =====  =====  =====  =====  =====  =====

(dot products at d_k 8 not timed; additive d_k 4 timed while the process got about two thirds of its core,
so about 0.09 s at a full core). Two full runs of 500 steps: ``sqrt-dk32``
44.6 s of training, dev BLEU 66.0, 2.7 s of scoring (perplexity, beam-4 BLEU on the 500 validation pairs,
the statistics at initialisation and after training); ``unscaled-dk256`` dev BLEU 1.6, and its steps slowed
from 0.29 s to 1.1 s as training went on: its softmax saturates (89% of rows above 0.99 at the end) and the
vanishing probabilities and gradients are denormal floats, which this CPU computes slowly (a forward and
backward pass of the trained model took 3.1x as long as with ``torch.set_flush_denormal(True)``). Adding
up, with unscaled d_k >= 64 at about three times their early speed, one step of each of the 28 variants
costs about 9.3 s, plus about 5 minutes of data generation and scoring for all runs: **400 steps** make
about 67 minutes at one thread per run (the trainer measures whether two threads are faster on an idle
machine and uses them if so). Additive scoring at d_k = 256 alone is 20 of those minutes.

Layout (docs/experiments.md): :mod:`.settings` (the scorings, key widths, scales, :func:`build_plan`),
:mod:`.run` (the measure hook), :mod:`.report` (the grids, the tables and the plots), :mod:`.verdicts` (the
generated section of EXPERIMENTS.md) and :mod:`.attention_statistics` (what the hook measures).
"""
