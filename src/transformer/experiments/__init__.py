"""The paper's experiments, runnable with one command each: ``transformer experiment NAME``.

An experiment is a named list of variants of one base configuration
(:mod:`transformer.experiments.common.plan`), each trained, scored and recorded by
:mod:`transformer.experiments.common.runner` with the ordinary trainer, checkpoints and decoder. Every
experiment is a package with the same modules (``settings``, ``run``, ``report``, ``verdicts``), listed in
:mod:`transformer.experiments.registry`; the command's workflow is :mod:`transformer.experiments.command`,
each corpus's recipe :mod:`transformer.experiments.scale_recipes`. docs/experiments.md says how to add one.
"""
