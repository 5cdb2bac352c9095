"""Dataclasses built from YAML values: unknown keys refused, every field's annotated type checked.

The run configuration (:mod:`transformer.config`) and the model configuration (:mod:`transformer.model.config`)
both go through here, so a typo or a wrongly typed value in a YAML file stops with a message naming the class
and the field. The checks that config classes share in their ``__post_init__`` (every numeric field's range,
a field that must be one of a few names) are here too, so every class words them the same way.
"""

import dataclasses
import math
import types
import typing
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

T = typing.TypeVar("T")


def build_dataclass(cls: type[T], values: dict[str, Any]) -> T:
    """Construct a config dataclass from a mapping, refusing unknown keys.

    Parameters
    ----------
    cls : type
        A dataclass type.
    values : dict of str to Any
        Field names and values.

    Returns
    -------
    object
        An instance of ``cls``.

    Notes
    -----
    The error for an unknown key (a ValueError) names the key and the class, and lists the known fields.
    Missing keys take the field defaults, so a file written before a field existed still loads; the types
    are checked by the class itself (its ``__post_init__`` calls :func:`check_field_types`).
    """
    known = {item.name for item in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for {cls.__name__}; known: {sorted(known)}")
    return cls(**values)


def check_field_types(instance: Any) -> None:
    """Check that every field of a dataclass instance holds a value of its annotated type.

    Parameters
    ----------
    instance : Any
        A dataclass instance whose annotations are ``int``, ``float``, ``bool``, ``str``, ``X | None``,
        ``tuple[...]`` or ``list[...]``.

    Returns
    -------
    None

    Raises
    ------
    TypeError
        Naming the class, field, value and expected type.
    ValueError
        For a float that is NaN or infinite (YAML's ``.nan``, ``.inf``).

    Notes
    -----
    An int is accepted for a float field; a bool is never accepted for an int field (YAML's ``yes`` would
    otherwise become 1). For ``tuple[...]`` and ``list[...]`` only the container is checked, not its items.
    NaN and infinite floats (YAML's ``.nan``, ``.inf``) are refused: no setting means "not a number", and a
    NaN passes every range check (``nan <= 0`` is false), so it would reach the search or the optimizer.
    """
    hints = typing.get_type_hints(type(instance))
    for item in dataclasses.fields(instance):
        value = getattr(instance, item.name)
        if not _has_type(value, hints[item.name]):
            raise TypeError(
                f"{type(instance).__name__}.{item.name}={value!r} has type {type(value).__name__}, "
                f"expected {hints[item.name]}"
            )
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{type(instance).__name__}.{item.name}={value} must be a finite number")


@dataclass(frozen=True)
class FieldRange:
    """The values a numeric config field may take: an interval, each end closed, open or unbounded.

    Parameters
    ----------
    low : int or float or None
        The lower end; None for none.
    high : int or float or None
        The upper end; None for none.
    low_open : bool
        Whether ``low`` itself is refused (``(0, 1]``: a learning rate).
    high_open : bool
        Whether ``high`` itself is refused (``[0, 1)``: a dropout probability).
    reason : str
        Why the range is what it is, added to the refusal in parentheses; empty for none.

    Notes
    -----
    A config class lists one for each of its numeric fields in its ``FIELD_RANGES`` and calls
    :func:`check_ranges` in ``__post_init__``; a test walks every numeric field of every config class, so a
    field added without a range fails it. Ranges are generous (a value outside is never a sane setting, not
    merely an unusual one), since experiments and tests use small and special values.
    """

    low: int | float | None = None
    high: int | float | None = None
    low_open: bool = False
    high_open: bool = False
    reason: str = ""

    def contains(self, value: int | float) -> bool:
        """Say whether a value lies in the range.

        Parameters
        ----------
        value : int or float
            The field's value.

        Returns
        -------
        bool
            True inside the interval.

        Notes
        -----
        Written as "not inside" tests (``not value >= low``), so that a NaN, which compares false with
        everything, is outside any bounded range rather than inside.
        """
        if self.low is not None and not (value > self.low if self.low_open else value >= self.low):
            return False
        return self.high is None or bool(value < self.high if self.high_open else value <= self.high)

    def describe(self) -> str:
        """Say the range in words, as an error message ends.

        Returns
        -------
        str
            "positive", "non-negative", "at least 2", "from 0 to 1024" or "in (0, 1]", for example.

        Notes
        -----
        The one-sided forms keep the wording the configs used before the ranges were declared ("must be
        positive"), which messages, documentation and tests quote.
        """
        low, high = _format_bound(self.low), _format_bound(self.high)
        if self.high is None:
            if self.low == 0:
                return "positive" if self.low_open else "non-negative"
            return f"above {low}" if self.low_open else f"at least {low}"
        if self.low is None:
            return f"below {high}" if self.high_open else f"at most {high}"
        if not self.low_open and not self.high_open:
            return f"from {low} to {high}"
        return f"in {'(' if self.low_open else '['}{low}, {high}{')' if self.high_open else ']'}"


#: Ranges most fields share: counts of at least one, counts that may be zero, sizes of a step, probabilities.
POSITIVE = FieldRange(0, low_open=True)
NON_NEGATIVE = FieldRange(0)
PROBABILITY_BELOW_ONE = FieldRange(0, 1, high_open=True)
#: The largest random seed: a signed 64-bit integer (``torch.manual_seed`` takes them all).
MAX_SEED = 2**63 - 1
#: A random seed: the signed 64-bit integers that are not negative.
SEED = FieldRange(0, MAX_SEED)


def check_ranges(instance: Any, prefix: str | None = None) -> None:
    """Check every numeric field a config class lists in its ``FIELD_RANGES`` against its range.

    Parameters
    ----------
    instance : Any
        A dataclass instance whose class has ``FIELD_RANGES``, a mapping of field name to :class:`FieldRange`.
    prefix : str or None
        What the message starts with before the field's name; None for ``"<Class>."``.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        ``"<Class>.<field>=<value> must be <range>"`` for the first field outside its range, in the order of
        ``FIELD_RANGES``, with ``" or null"`` when the field may be None, and the range's reason if it has one.

    Notes
    -----
    Call it right after :func:`check_field_types` and before checks that relate fields to each other, so a
    value out of range is named as such rather than as a clash with another field. None is let through: only
    fields annotated ``X | None`` can hold it, which the type check has made sure of.
    """
    owner = f"{type(instance).__name__}." if prefix is None else prefix
    ranges: dict[str, FieldRange] = type(instance).FIELD_RANGES
    for name, bounds in ranges.items():
        value = getattr(instance, name)
        if value is None or bounds.contains(value):
            continue
        message = f"{owner}{name}={value} must be {bounds.describe()}"
        # The hints only for the message: resolving them costs about 40 us, and the server builds a config a request.
        if type(None) in typing.get_args(typing.get_type_hints(type(instance))[name]):
            message += " or null"
        raise ValueError(message + (f" ({bounds.reason})" if bounds.reason else ""))


def _format_bound(bound: int | float | None) -> str:
    """Write an end of a range as a user would: integers in full, other numbers in their shortest form."""
    if isinstance(bound, float) and not bound.is_integer():
        return f"{bound:g}"
    return str(int(bound)) if bound is not None else ""


def check_choice(instance: Any, name: str, choices: Collection[str]) -> None:
    """Check that a field of a config instance is one of the names the code knows.

    Parameters
    ----------
    instance : Any
        A dataclass instance; its class name starts the message.
    name : str
        The field to check.
    choices : Collection[str]
        The accepted values, shown in the message as written (a tuple prints as ``('a', 'b')``).

    Returns
    -------
    None

    Raises
    ------
    ValueError
        ``"<Class>.<field>=<value!r> is not one of <choices>"``.

    Notes
    -----
    Checked when the config is built, not where the value is used, so a misspelt name in a YAML file or on
    the command line stops before any model is built or file is read, naming the field and the valid names.
    """
    value = getattr(instance, name)
    if value not in choices:
        raise ValueError(f"{type(instance).__name__}.{name}={value!r} is not one of {choices}")


def _has_type(value: Any, expected: Any) -> bool:
    origin = typing.get_origin(expected)
    if origin in (typing.Union, types.UnionType):
        return any(_has_type(value, option) for option in typing.get_args(expected))
    if expected is type(None):
        return value is None
    if origin in (tuple, list):
        return isinstance(value, origin)
    if expected is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if expected is Any:
        return True
    return isinstance(value, expected)
