"""``transformer experiment rnn-baseline``: the Transformer against the attentional LSTM it replaced.

The paper's claim (section 6.1 and its training-cost table): better quality "at a fraction of the training
cost" of the recurrent and convolutional models before it. Issue #17 asks for that comparison at a size this
project trains: the shipped Multi30k Transformer (``configs/multi30k.yaml``, 9.9M parameters) against the
recurrent baseline (``configs/multi30k-rnn.yaml``: a bidirectional LSTM encoder, an LSTM decoder with
Luong's "general" attention and input feeding, 9.6M parameters), on the same data, the same joint BPE
vocabulary (the runner learns it once for both), the same 4,096-token batches, the same 28-minute budget and
the same search (beam 4, power length penalty 1).

Variants ``transformer`` and ``rnn`` carry the two configs' values (a test compares them with the files);
only ``train.checkpoint_every`` (100 steps; the configs save every 250) and ``train.keep_checkpoints`` (all of
them) change, so that the run leaves a time-to-quality curve on disk. Per run, besides the worker's dev BLEU
(beam 4, the average of the last :data:`AVERAGE_LAST` checkpoints, as the configs' runs are scored; 100 steps
apart here, 250 there, or, where the 28-minute budget binds, one a minute: the trainer then follows the clock),
the measure hook records:

* **the curve**: greedy dev BLEU of every kept checkpoint against the training seconds, step and target
  tokens its ``trainer_state.json`` records (:mod:`.quality_curve`); greedy, not beam 4, to keep scoring 30
  checkpoints short (greedy scores about 1.7 BLEU under beam 4 for the shipped Transformer, BENCHMARKS.md);
  and, from it, the training time at which each model first reaches dev BLEU :data:`BLEU_LEVELS` (or "not
  reached");
* **training FLOPs**: counted with ``FlopCounterMode`` on the run's first training batches (forward, loss,
  backward; :mod:`.training_flops`), per target token, times the target tokens the run trained on;
* **decoding speed**: sentences and output tokens per second on the whole validation set, greedy and beam 4,
  fp32, the same thread count for both models (:mod:`.decode_speed`);
* the precision and thread count the trainer chose (``precision: auto``, ``threads: null``), read back from
  the autotuning cache: on a CPU with AMX a model that gains from bf16 trains several times faster.

Scales: ``cpu`` (the configs as shipped; two 28-minute trainings, then scoring), ``gpu`` (the same
configurations: on a GPU both finish their 2,800 steps well inside the budget, so the curves compare the time
each takes over the same schedule), ``tiny`` (the built-in grammar corpus, 8 steps per model, for tests).

Timings are wall-clock: run on a quiet machine with ``--parallel 1`` (the default), so each training has the
machine to itself. A run interrupted and resumed trains for another ``max_minutes`` (the trainer's budget
counts per invocation), which the table flags.

Layout (docs/experiments.md): :mod:`.settings` (the variants, the scales, :func:`build_plan`), :mod:`.run`
(the measure hook), :mod:`.report` (the table and the plot), :mod:`.verdicts` (the generated section of
EXPERIMENTS.md), and the measurements the hook makes: :mod:`.quality_curve`, :mod:`.training_flops` and
:mod:`.decode_speed`.
"""
