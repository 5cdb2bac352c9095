"""``transformer experiment positions``: no positions, sinusoids or learned positions (section 3.5, Table 2 row E).

Three questions, one command:

1. **Does the encoding matter?** Group ``multi30k``: the Table 2 base row of the scale (the same
   configuration as ``table2``'s ``base``; Multi30k at ``cpu`` and ``gpu``, WMT14 at ``paper``, the grammar
   corpus at ``tiny``) trained with ``positional_encoding`` ``none``, ``sinusoidal`` and ``learned``; dev
   perplexity and BLEU.
2. **Do the encodings extrapolate?** Group ``length``: the built-in grammar corpus, trained only on pairs of at
   most L BPE tokens on both sides (EOS included; ``data.max_len = L``, which drops longer training pairs) and
   tested on sentences of the same grammar bucketed by *source* length in tokens: ``<= L`` (the trained
   range), ``(L, 1.5L]``, ``(1.5L, 2L]``, ``(2L, 3L]``. The test sentences are generated from another seed
   (:data:`TEST_SEED`) and any English sentence of the run's training file is removed, so they are disjoint
   from training. Section 3.5 chose sinusoids because they "may allow the model to extrapolate to sequence
   lengths longer than the ones encountered during training".
3. **The permutation probe.** Pairs "The X verbs the Y." / "The Y verbs the X." built from the grammar's
   lexicon, whose token sequences are permutations of each other: (i) without positions the encoder output
   of the swapped sentence must be the same permutation of the original's rows (the largest difference is
   reported, float rounding only); (ii) how often the translation changes when subject and object swap —
   with positions it should almost always change (the meaning did), without them it cannot.

Learned positions and lengths beyond the table
----------------------------------------------
A learned table cannot index past its last row. The ``length-learned`` variant is trained with a table of
:data:`LEARNED_TABLE` rows (enough for every sentence the grammar makes, so the worker's dev scoring never
hits the limit), but on pairs of at most L tokens, so rows L and beyond never receive a gradient (Adam
without weight decay leaves them at their random initialisation). Its ``measure`` scores it twice:

* with the whole table (positions beyond L are untrained random vectors), and
* with the table cut to its first L rows: exactly a model trained with ``max_positions = L`` (the rows it
  keeps are the only ones training used; only the random initialisation of the other weights differs). Here
  the library's behaviour shows: the :class:`~transformer.decoding.translator.Translator` truncates every
  input to ``max_positions`` tokens (the share truncated is reported per bucket, 100% beyond L by
  construction), and the model raises ``ValueError`` ("sequence needs position ... but the learned
  positional embedding has max_positions=...") for anything longer. On the output side the searches cap
  every hypothesis at the table's size (``TransformerStepModel.max_output_length``; before that fix a
  hypothesis reaching L target tokens raised mid-search). The table says, per bucket, whether a search
  raised with the run's decode settings; the BLEU shown is with outputs capped at L tokens
  (``DecodeConfig.max_length = L``), the only way a table of L rows can translate.

Scales (one seed per run by default): ``tiny`` (seconds per run, the grammar corpus in both groups, for
tests); ``cpu`` (group ``multi30k`` = ``table2 --scale cpu``'s base row: d_model 128, 3+3 layers, 800 steps on
Multi30k; group ``length``: L = 12, d_model 256, 2+2 layers, 1,600 steps of 1,024 tokens, as the quickstart
recipe, on the about 13,000 of 40,000 generated pairs that fit L); ``gpu`` (Multi30k at the shipped model's size;
L = 16, d_model 256, 3+3 layers, 4,000 steps of 4,096 tokens); ``paper`` (the paper's base model on WMT14 as
in Table 2, with the paper's figures beside it; the length group as at ``gpu``).

Calibration of ``cpu`` (``Intel(R) Xeon(R) Processor``, 2 cores with AVX-512 and no AMX, fp32, while
``table2 --scale cpu`` trained beside it): the ``multi30k`` runs are ``table2``'s base row, which trained its
800 steps in 376 s (0.47 s a step) and was scored in 17 s; a ``length`` run measured 0.33 s a step over 60
steps (the trainer chose one thread, the other core being busy) and its ``measure`` took 40 s on an untrained
model (the longest outputs; the learned variant translates each bucket twice more). Whole experiment: about
3 x 7 + 3 x (1,600 x 0.33 s + 1.5 min) = 50 minutes, less on an idle machine.

``--set`` changes the base configuration, which is the ``multi30k`` group's; the ``length`` group sets the
keys of its own recipe explicitly (every key the ``multi30k`` base sets), so only keys neither base sets
(``data.mirror``, ``train.precision``, ...) reach it.

Layout (docs/experiments.md): :mod:`.settings` (encodings, length scales, :func:`build_plan`), :mod:`.run`
(the measure hook), :mod:`.report` (the table and the plot), :mod:`.verdicts` (the generated section of
EXPERIMENTS.md) and :mod:`.probes` (the length-bucketed test sets and the permutation probe).
"""
