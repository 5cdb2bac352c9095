"""Training: the paper's recipe (section 5) in a resumable loop, on one process or many.

The schedule of Eq. (3) (``schedule.py``), Adam (``optimizer.py``), a label-smoothed gradient step
(``gradient_step.py``), the precision and thread count chosen by measurement
(``measured_defaults.py``, ``precision.py``), batches from the input pipeline (``data_feed.py``),
DistributedDataParallel under ``torchrun`` (``distributed.py``), checkpoints that resume exactly (``checkpoint.py``,
``resume.py``), a wall-clock budget (``run_clock.py``), the recipe ladder that picks a model for the budget
(``recipe_ladder.py``), and :class:`~transformer.training.trainer.Trainer`, which ties them together.
"""
