"""What an experiment is: named variants of one base configuration, each trained with one or more seeds.

A variant changes a few keys of the base run configuration (``model.num_heads: 1``); a *run* is one variant
with one seed, trained in its own run directory by the ordinary trainer. The resolved configuration of a run
(base, variant, seed) is what its result is tied to: :func:`config_differences` names what changed when an
experiment is rerun with different settings, so stale results are never mixed with new ones.
"""

import copy
import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from transformer.config.experiment import ExperimentConfig, experiment_from_dict
from transformer.config.files import apply_override
from transformer.config.train import TrainConfig

#: Keys that describe the machine, not the experiment: they may differ between a run and its resumption.
#: ``data.token_store*`` say where the encoded corpus is held (lists or a memory-mapped store), which gives the
#: same batches (tested), so they leave fingerprints of earlier runs unchanged.
MACHINE_KEYS = frozenset(
    {"train.device", "train.threads", "data.token_store", "data.token_store_verify", "data.mirror"}
)


@dataclass(frozen=True)
class Variant:
    """One row of an experiment: a name and the configuration keys it changes.

    Parameters
    ----------
    name : str
        Unique within the experiment, e.g. ``"A1"`` or ``"dk16-additive"``; used in directory names.
    overrides : dict of str to Any
        Dotted keys of the run configuration and their values, e.g. ``{"model.num_heads": 1}``.
    group : str
        The group the variant belongs to in tables and ``--only`` (Table 2's row letter, a scoring name).
    reported : dict of str to Any
        What the paper reports for this variant (e.g. ``{"dev_perplexity": 5.29, "dev_bleu": 24.9}``), shown
        beside our figures; empty when the paper has no number.
    step_factor : int or Fraction
        The variant trains ``step_factor`` times the base's ``train.max_steps``, rounded, at least 1 (Table
        2's big: 3, the paper's 300K against 100K; big-same-flops: base's FLOPs over big's); the plan's
        schedule rule gives the warm-up and cool-down that go with it.

    Notes
    -----
    Overrides are applied to the base configuration's dictionary before it is validated, so a variant is
    checked exactly as a YAML file would be: an unknown key stops the experiment before anything trains.
    The steps are a factor, not a value, so ``--set train.max_steps=N`` reaches every row in proportion.
    """

    name: str
    overrides: dict[str, Any] = field(default_factory=dict)
    group: str = ""
    reported: dict[str, Any] = field(default_factory=dict)
    step_factor: int | Fraction = 1


#: Turns a trained model and its data into extra metrics of a run (e.g. attention statistics).
MeasureHook = Callable[..., dict[str, Any]]
#: Gives the ``train`` keys that follow from ``train.max_steps`` (warm-up, cool-down, validation spacing).
ScheduleRule = Callable[[int], dict[str, int]]
#: Keys the runner sets for every run itself, so ``--set`` may not: the seed from ``--seeds``, the device from
#: ``--device`` and the threads from ``--parallel``.
RUNNER_KEYS = {"train.seed": "--seeds", "train.device": "--device", "train.threads": "--parallel"}


@dataclass(frozen=True)
class ExperimentPlan:
    """An experiment at one scale: the base configuration, its variants and how runs are scored.

    Parameters
    ----------
    name : str
        The experiment's name (``table2``), as given to ``transformer experiment``.
    scale : str
        The scale it was built for (``cpu``, ``gpu``, ``paper`` or ``tiny``).
    base : dict of str to Any
        The base run configuration as nested dictionaries (the shape of a YAML config file).
    variants : sequence of Variant
        The variants, in table order.
    average_last : int
        Checkpoints averaged before scoring: 1 scores the last checkpoint alone (Table 2 of the paper used no
        averaging), more averages the last N the run kept.
    notes : str
        One paragraph printed under the table: the scale rule and what the numbers mean.
    schedule : callable or None
        ``steps -> {train key: value}``: the keys that scale with ``train.max_steps`` (e.g.
        :func:`~transformer.experiments.scale_recipes.short_schedule`); applied when a variant's
        ``step_factor`` or ``--set train.max_steps`` changes the steps. None keeps every other key as it is
        (the paper scale: the paper warms up 4,000 steps whether it trains 100K or 300K).
    pinned_keys : frozenset of str
        Keys given with ``--set``: no schedule rule changes them.

    Notes
    -----
    Plans are plain values built by each experiment module's ``build_plan``; the runner
    (:mod:`transformer.experiments.common.runner`) knows nothing about any particular experiment.
    """

    name: str
    scale: str
    base: dict[str, Any]
    variants: Sequence[Variant]
    average_last: int = 1
    notes: str = ""
    schedule: ScheduleRule | None = None
    pinned_keys: frozenset[str] = frozenset()

    def variant(self, name: str) -> Variant:
        """Find a variant by name.

        Parameters
        ----------
        name : str
            The variant's name.

        Returns
        -------
        Variant
            The variant.

        Raises
        ------
        ValueError
            Listing the names when there is no such variant.

        Notes
        -----
        The error lists the variant names, so a misspelt one is fixed without reading the plan.
        """
        for variant in self.variants:
            if variant.name == name:
                return variant
        raise ValueError(f"{self.name} has no variant {name!r}; variants: {[v.name for v in self.variants]}")

    def select(self, only: Sequence[str] | None) -> list[Variant]:
        """Keep the variants named (or whose group is named) in ``--only``.

        Parameters
        ----------
        only : sequence of str or None
            Variant names or group names; None keeps every variant.

        Returns
        -------
        list of Variant
            The selected variants, in table order.

        Raises
        ------
        ValueError
            Naming ``--only`` and the choices for a name that matches neither a variant nor a group.

        Notes
        -----
        A name matching neither a variant nor a group is an error, so a typo never silently runs nothing.
        """
        if not only:
            return list(self.variants)
        names = {variant.name for variant in self.variants} | {variant.group for variant in self.variants}
        unknown = sorted(set(only) - names)
        if unknown:
            raise ValueError(
                f"--only {','.join(unknown)}: {self.name} has no such variant or group; "
                f"choose from {sorted(name for name in names if name)}"
            )
        return [variant for variant in self.variants if variant.name in only or variant.group in only]


def set_dotted(values: dict[str, Any], key: str, value: Any) -> None:
    """Set ``values[section][key] = value`` for a dotted key ``section.key``.

    Parameters
    ----------
    values : dict of str to Any
        A nested run configuration, changed in place.
    key : str
        ``section.key``, e.g. ``model.num_heads``.
    value : Any
        The value.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        For a key without a section.

    Notes
    -----
    An unknown section or key is reported when the result is validated (:func:`run_config`), like a typo in a
    YAML file.
    """
    section, dot, name = key.partition(".")
    if not dot or not section or not name:
        raise ValueError(f"variant key {key!r}: expected section.key, e.g. model.num_heads")
    values.setdefault(section, {})[name] = value


def flatten(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten a nested configuration into dotted keys.

    Parameters
    ----------
    values : mapping of str to Any
        Nested dictionaries (a run configuration).
    prefix : str
        Prefix of the keys (used by the recursion).

    Returns
    -------
    dict of str to Any
        ``{"model.d_model": 512, ...}``, sorted by key.

    Notes
    -----
    Lists and tuples are kept as values; comparing two flattened configs names exactly the keys that differ.
    """
    flat: dict[str, Any] = {}
    for key, value in values.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{dotted}."))
        else:
            flat[dotted] = value
    return dict(sorted(flat.items()))


def run_config(plan: ExperimentPlan, variant: Variant, seed: int) -> dict[str, Any]:
    """Resolve the full run configuration of one variant and seed, validated.

    Parameters
    ----------
    plan : ExperimentPlan
        The experiment.
    variant : Variant
        One of its variants.
    seed : int
        The seed (``train.seed``), from 1.

    Returns
    -------
    dict of str to Any
        The nested configuration, as :meth:`ExperimentConfig.to_dict` gives it: every field explicit, so a
        changed default shows up as a difference too.

    Raises
    ------
    ValueError
        Naming the variant when its overrides do not make a valid configuration.

    Notes
    -----
    The configuration is validated here, when the runs are planned, so a bad variant is reported before any
    run trains.
    """
    values = copy.deepcopy(plan.base)
    for key, value in variant.overrides.items():
        set_dotted(values, key, value)
    steps = values.get("train", {}).get("max_steps", TrainConfig.max_steps)
    if variant.step_factor != 1 and _is_step_count(steps):  # a bad value is reported by the validation below
        _set_steps(values, plan, max(1, round(steps * variant.step_factor)))
    set_dotted(values, "train.seed", seed)
    try:
        experiment: ExperimentConfig = experiment_from_dict(
            values, source=f"{plan.name} variant {variant.name}"
        )
    except (TypeError, ValueError) as error:
        raise ValueError(f"{plan.name} variant {variant.name}: {error}") from None
    return experiment.to_dict()


def config_fingerprint(config: Mapping[str, Any]) -> str:
    """Hash a resolved run configuration, leaving out the keys that describe the machine.

    Parameters
    ----------
    config : mapping of str to Any
        A nested configuration from :func:`run_config`.

    Returns
    -------
    str
        SHA-256 of its canonical JSON (sorted keys), without :data:`MACHINE_KEYS`.

    Notes
    -----
    ``train.device`` and ``train.threads`` are left out so that a run resumed on another machine, or with
    ``--parallel`` changed, is still the same run; so is ``data.mirror``, where this machine keeps a local copy
    of the corpus: its files are checked against the corpus's checksums, so the path (absolute in one
    session, relative in the next) says nothing about the data.
    """
    flat = {key: value for key, value in flatten(config).items() if key not in MACHINE_KEYS}
    return hashlib.sha256(json.dumps(flat, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def config_differences(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Name the configuration keys whose values differ between a recorded run and the current plan.

    Parameters
    ----------
    recorded : mapping of str to Any
        The nested configuration stored with a result or a run directory.
    current : mapping of str to Any
        The nested configuration the plan resolves to now.

    Returns
    -------
    list of str
        ``"model.d_model: 256 (recorded) != 128 (now)"`` per differing key, machine keys left out; empty
        when the two are the same run.

    Notes
    -----
    A key the recorded configuration lacks counts as the same when the current value is that field's
    default: options are added with the default that reproduces the earlier behaviour, so results recorded
    before an option existed stay valid. Any other one-sided key is reported with ``<absent>``.
    """
    # Through JSON, as results are stored: a tuple and the list it is read back as compare equal.
    old = json.loads(json.dumps(flatten(recorded), default=str))
    new = json.loads(json.dumps(flatten(current), default=str))
    defaults = json.loads(json.dumps(flatten(default_config()), default=str))
    differences = []
    for key in sorted(set(old) | set(new)):
        if key in MACHINE_KEYS:
            continue
        before, after = old.get(key, "<absent>"), new.get(key, "<absent>")
        if key not in old and key in defaults and after == defaults[key]:
            continue
        if before != after:
            differences.append(f"{key}: {before!r} (recorded) != {after!r} (now)")
    return differences


def default_config() -> dict[str, Any]:
    """Return the run configuration every field of which has its default value.

    Returns
    -------
    dict of str to Any
        ``ExperimentConfig().to_dict()`` with the default model (the paper's base; ``vocab_size`` 8, which
        has no default).

    Notes
    -----
    Used to accept results recorded before an option was added (see :func:`config_differences`).
    """
    # vocab_size has no default; any value serves, since every configuration records it.
    return experiment_from_dict({"model": {"vocab_size": 8}}, source="defaults").to_dict()


def _set_steps(values: dict[str, Any], plan: ExperimentPlan, steps: int) -> None:
    """Set ``train.max_steps`` and the schedule keys that follow from it, except the pinned ones."""
    set_dotted(values, "train.max_steps", steps)
    if plan.schedule is not None:
        for key, value in plan.schedule(steps).items():
            if f"train.{key}" not in plan.pinned_keys:
                set_dotted(values, f"train.{key}", value)


def with_base_overrides(plan: ExperimentPlan, overrides: Sequence[str]) -> ExperimentPlan:
    """Apply ``--set section.key=value`` overrides to a plan's base configuration.

    Parameters
    ----------
    plan : ExperimentPlan
        The plan.
    overrides : sequence of str
        ``section.key=value`` items (values are YAML).

    Returns
    -------
    ExperimentPlan
        A copy whose base has the overrides (and whose ``pinned_keys`` name them); variants still apply on
        top of it.

    Raises
    ------
    ValueError
        Quoting a malformed item, or naming a key the runner sets per run.

    Notes
    -----
    Parsed like ``transformer train --set``; a malformed item is an error. A key that the runner sets per run
    (:data:`RUNNER_KEYS`: ``train.seed`` comes from ``--seeds``) is refused, instead of being overwritten
    without a word; one that a selected row sets itself is refused when the runs are planned
    (:func:`refuse_overridden_keys`). ``train.max_steps`` brings the plan's schedule rule along (warm-up,
    cool-down and validation spacing in proportion), except for keys also given; a row with a ``step_factor``
    trains that multiple of the new steps. The overrides become part of every run's configuration, so results
    recorded without them are refused, not mixed in.
    """
    if not overrides:
        return plan
    base = copy.deepcopy(plan.base)
    given = set()
    for override in overrides:
        apply_override(base, override)  # raises for a malformed item before the key is read from it
        key = override.partition("=")[0].strip()
        _refuse_runner_key(key, override)
        given.add(key)
    plan = dataclasses.replace(plan, base=base, pinned_keys=plan.pinned_keys | given)
    steps = plan.base.get("train", {}).get("max_steps")
    if "train.max_steps" in given and _is_step_count(steps):
        _set_steps(plan.base, plan, steps)
    return plan


def _is_step_count(value: Any) -> bool:
    """Tell whether a ``train.max_steps`` value can scale a schedule (a bad one is left to validation)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _refuse_runner_key(key: str, override: str) -> None:
    """Raise ValueError when ``--set KEY`` names a key the runner sets for each run itself."""
    if key in RUNNER_KEYS:
        option = RUNNER_KEYS[key]
        example = " (e.g. --seeds 1,5,7)" if key == "train.seed" else ""
        raise ValueError(f"--set {override}: {key} is set for each run by {option}; use {option}{example}")


def refuse_overridden_keys(plan: ExperimentPlan, variants: Sequence[Variant]) -> None:
    """Refuse a ``--set`` key that a selected row defines itself, which would silently win over it.

    Parameters
    ----------
    plan : ExperimentPlan
        The plan, with the ``--set`` keys in ``pinned_keys``.
    variants : sequence of Variant
        The rows selected to run (``--only``).

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Naming the key and the rows that set it.

    Notes
    -----
    Issue #29: ``--set model.d_model=...`` on Table 2 was ignored, since every row states its width. Checked
    against the selection, so ``--only`` can leave out the rows that define a key (positions' ``multi30k``
    rows take ``--set train.max_steps``; its ``length`` rows carry their own recipe).
    """
    for key in sorted(plan.pinned_keys):
        rows = [variant.name for variant in variants if key in variant.overrides]
        if not rows:
            continue
        if len(rows) == len(plan.variants):
            which = "every row sets it"
        else:
            which = f"row {rows[0]} sets it" if len(rows) == 1 else f"rows {', '.join(rows)} set it"
        raise ValueError(
            f"--set {key}: {plan.name} defines it per row ({which}), so --set cannot change it; "
            "leave those rows out with --only, or change the rows in the experiment's module"
        )
