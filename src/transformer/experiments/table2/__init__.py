"""``transformer experiment table2``: every row of the paper's Table 2, at a scale this machine can train.

"Table 2" is the name the user's notes give the table of model variations; in the published paper it is
Table 3 ("Variations on the Transformer architecture").

Table 2 varies the base model one aspect at a time (A heads, B key size, C size, D regularisation, E positional
encoding, and the big model) and reports newstest2013 perplexity per word-piece, BLEU and parameters after
100K steps (300K for big), beam search as in section 6.1 and "no checkpoint averaging".

One rule maps every row onto a scale, so the ratios between rows are the paper's:

* widths (``d_model``, ``d_ff``, ``d_k``, ``d_v``) are multiplied by ``w = d_model(scale) / 512``;
* layer counts by ``l = N(scale) / 6``, rounded, at least 1;
* head counts, dropout and label smoothing keep the paper's values;
* every row trains the scale's number of steps, big three times as many (the paper's 300K against 100K).

Scales: ``cpu`` (Multi30k, w = 1/4, l = 1/2: d_model 128, N 3; about 2.5 hours for the whole table on two CPU
cores), ``gpu`` (Multi30k, the shipped model's size: w = 1/2, l = 2/3, d_model 256, N 4), ``paper`` (w = l = 1,
WMT14 English-German from the corpus registry (``data.corpus: wmt14-en-de``, downloaded once, read through the token
store), the paper's batch of 25,000 tokens) and
``tiny`` (the built-in grammar corpus, for tests). The CPU and GPU scales train pre-norm, as the shipped
Multi30k recipe does: on budgets of a few thousand steps post-norm learns far more slowly (BENCHMARKS.md);
the paper scale is post-norm, as the paper.

Layout (docs/experiments.md): :mod:`.settings` (the scale rule, the rows, :func:`build_plan`), :mod:`.compute`
(a row's training FLOPs, for big-same-flops), :mod:`.report` (the table and the plots) and :mod:`.verdicts`
(the generated section of EXPERIMENTS.md); no ``run`` module,
since the worker's perplexity and BLEU are all Table 2 reports.
"""
