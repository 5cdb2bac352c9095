"""Typed run configuration: data, training, decoding and the recipe ladder, composed with the model's.

``configs/*.yaml`` hold values only. :class:`~transformer.config.experiment.ExperimentConfig` is what
``transformer train --config`` reads: a ``model`` section (the model package's
:class:`~transformer.model.config.TransformerConfig`, or with ``architecture: rnn`` the recurrent baseline's
:class:`~transformer.baselines.rnn_config.RNNConfig`), and one section per module here:

- :mod:`transformer.config.data`: ``data`` (:class:`~transformer.config.data.DataConfig`)
- :mod:`transformer.config.train`: ``train`` (:class:`~transformer.config.train.TrainConfig`)
- :mod:`transformer.config.decode`: ``decode`` (:class:`~transformer.config.decode.DecodeConfig`)
- :mod:`transformer.config.ladder`: ``ladder`` (:class:`~transformer.config.ladder.LadderConfig`)
- :mod:`transformer.config.distill`: ``distill`` (:class:`~transformer.config.distill.DistillConfig`), read by
  ``transformer distill`` only

:mod:`transformer.config.experiment` composes them and builds them from nested dictionaries;
:mod:`transformer.config.files` reads YAML files, applies ``--set`` overrides and finds the shipped configs.
"""
