"""The paper's experiments, runnable with one command each: ``transformer experiment NAME``.

An experiment is a named list of variants of one base configuration (:mod:`transformer.experiments.common.plan`),
each trained, scored and recorded by :mod:`transformer.experiments.common.runner` with the ordinary trainer,
checkpoints and decoder. The experiments themselves are one module each (:mod:`transformer.experiments.table2`,
...), listed in :mod:`transformer.experiments.registry`.
"""
