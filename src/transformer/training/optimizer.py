"""Adam and the learning rate of Eq. (3) (section 5.3), built together from the recipe."""

from collections.abc import Callable

import torch
from torch import nn
from torch.optim.lr_scheduler import LRScheduler

from transformer.architectures import ModelConfig, model_width
from transformer.config.train import TrainConfig
from transformer.training.schedule import build_scheduler, scale_for_peak


def build_optimizer_and_schedule(
    model: nn.Module,
    model_config: ModelConfig,
    recipe: TrainConfig,
    device: torch.device,
    clock_step: Callable[[], float] | None = None,
) -> tuple[torch.optim.Adam, LRScheduler]:
    """Make the paper's optimizer and its learning-rate schedule for a model.

    Parameters
    ----------
    model : torch.nn.Module
        The model whose parameters are trained (unwrapped: not the DDP or compiled wrapper).
    model_config : TransformerConfig or RNNConfig
        Its config, whose width Eq. (3) scales with (:func:`transformer.architectures.model_width`).
    recipe : TrainConfig
        ``adam_beta1``, ``adam_beta2``, ``adam_epsilon``, ``warmup_steps``, ``learning_rate_scale`` or
        ``peak_learning_rate``, ``max_steps`` and ``cooldown_steps``.
    device : torch.device
        Where the parameters are; on CUDA, Adam runs as one fused kernel per step.
    clock_step : callable or None
        With a binding time budget, the step the wall clock has reached
        (:meth:`transformer.training.run_clock.RunClock.clock_step`); the schedule reads the larger of it and
        the optimizer step. None: the optimizer step alone.

    Returns
    -------
    optimizer : torch.optim.Adam
        Adam(beta_1, beta_2, epsilon) with a base rate of 1.0, so the schedule's factor is the absolute rate.
    scheduler : torch.optim.lr_scheduler.LRScheduler
        Eq. (3) times the scale, with the optional linear cool-down (:func:`build_scheduler`).

    Notes
    -----
    ``peak_learning_rate`` replaces ``learning_rate_scale`` by the scale at which Eq. (3) peaks at that rate
    (:func:`transformer.training.schedule.scale_for_peak`). On the CPU the fused Adam measured within noise
    of the default multi-tensor path, so it is used on CUDA only.
    """
    optimizer = torch.optim.Adam(
        model.parameters(),
        lr=1.0,  # the scheduler supplies the absolute rate
        betas=(recipe.adam_beta1, recipe.adam_beta2),
        eps=recipe.adam_epsilon,
        # One fused kernel per step on GPUs; on the CPU the fused path measured within noise of foreach.
        fused=device.type == "cuda",
    )
    width = model_width(model_config)
    scale = recipe.learning_rate_scale
    if recipe.peak_learning_rate is not None:
        scale = scale_for_peak(recipe.peak_learning_rate, width, recipe.warmup_steps)
    scheduler = build_scheduler(
        optimizer, width, recipe.warmup_steps, scale, recipe.max_steps, recipe.cooldown_steps, clock_step
    )
    return optimizer, scheduler
