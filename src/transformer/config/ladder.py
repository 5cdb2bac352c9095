"""The ``ladder`` section: recipes to choose from by the training speed measured on the machine at hand."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from transformer.typed_fields import (
    NON_NEGATIVE,
    FieldRange,
    build_dataclass,
    check_field_types,
    check_ranges,
)

#: Config sections a rung of the recipe ladder may change: not ``data`` (the rungs share one vocabulary).
LADDER_SECTIONS = ("model", "train", "decode")


@dataclass(frozen=True)
class LadderRung:
    """One recipe of a ladder: overrides of the configuration, and the training tokens it needs to pay off.

    Parameters
    ----------
    name : str
        What ``ladder.choose`` and the log call it, e.g. "4x256-4k".
    min_target_tokens : int
        The rung is taken when the machine's measured training speed times ``train.max_minutes`` gives at
        least this many target tokens (0: always, the last rung's value). Non-negative.
    overrides : tuple of str
        ``section.key=value`` items, as ``--set`` takes them, applied on top of the file's values; sections
        ``model``, ``train`` and ``decode`` only, and never ``model.vocab_size``.

    Notes
    -----
    The thresholds come from sweeps (BENCHMARKS.md, "The Multi30k recipe ladder"): below some number of
    training tokens a shallower model with smaller batches and less dropout reaches a higher BLEU than the
    full recipe does in the same time.
    """

    name: str
    min_target_tokens: int = 0
    overrides: tuple[str, ...] = ()

    #: The range of every numeric field (:func:`transformer.typed_fields.check_ranges`), as the docstring says.
    FIELD_RANGES: ClassVar[Mapping[str, FieldRange]] = {"min_target_tokens": NON_NEGATIVE}

    def __post_init__(self) -> None:
        object.__setattr__(self, "overrides", tuple(self.overrides))  # JSON and YAML give lists
        check_field_types(self)
        if not self.name or self.name in LADDER_CHOICES:
            raise ValueError(f"rung name {self.name!r} must be non-empty and not one of {LADDER_CHOICES}")
        check_ranges(self, prefix=f"rung {self.name!r}: ")
        for item in self.overrides:
            key = str(item).partition("=")[0].strip()
            if key.partition(".")[0] not in LADDER_SECTIONS or key == "model.vocab_size":
                raise ValueError(
                    f"rung {self.name!r}: override {item!r} may only change {', '.join(LADDER_SECTIONS)} "
                    "(not model.vocab_size): every rung trains on the same data and vocabulary"
                )


#: ``ladder.choose`` values other than a rung's name.
LADDER_CHOICES = ("auto", "none")


@dataclass(frozen=True)
class LadderConfig:
    """A small ladder of recipes, one of which is trained: the largest that the time budget pays for.

    Parameters
    ----------
    choose : str
        "auto" (default): with ``train.max_minutes``, the first rung whose ``min_target_tokens`` the measured
        training speed reaches within the budget (the first rung without a budget); "none": the file's values
        as they are; or a rung's name.
    rungs : tuple of LadderRung
        From the largest recipe to the smallest; empty: no ladder.

    Notes
    -----
    Resolved once per run by :func:`transformer.training.recipe_ladder.resolve_ladder`, which logs one line
    with the measured speeds and records the rung taken in ``choose``, so ``--resume`` and checkpoints keep
    it whatever the machine measures later.
    """

    choose: str = "auto"
    rungs: tuple[LadderRung, ...] = ()

    def __post_init__(self) -> None:
        rungs = tuple(
            rung if isinstance(rung, LadderRung) else build_dataclass(LadderRung, dict(rung))
            for rung in self.rungs
        )
        object.__setattr__(self, "rungs", rungs)
        names = [rung.name for rung in rungs]
        if len(set(names)) != len(names):
            raise ValueError(f"rungs: names must be unique, got {names}")
        if self.choose not in (*LADDER_CHOICES, *names):
            raise ValueError(f"choose={self.choose!r} is not one of {[*LADDER_CHOICES, *names]}")
