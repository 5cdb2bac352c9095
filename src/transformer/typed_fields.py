"""Dataclasses built from YAML values: unknown keys refused, every field's annotated type checked.

The run configuration (:mod:`transformer.config`) and the model configuration (:mod:`transformer.model.config`)
both go through here, so a typo or a wrongly typed value in a YAML file stops with a message naming the class
and the field. The checks that config classes share in their ``__post_init__`` (a field that must be positive,
a field that must be one of a few names) are here too, so every class words them the same way.
"""

import dataclasses
import math
import types
import typing
from collections.abc import Collection, Iterable
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


def check_positive(instance: Any, names: Iterable[str], *, none_allowed: bool = False) -> None:
    """Check that each named field of a config instance is above zero.

    Parameters
    ----------
    instance : Any
        A dataclass instance; its class name starts the message.
    names : Iterable[str]
        The fields to check, in the order their errors should be reported.
    none_allowed : bool, optional
        Whether None stands for "not set" and passes (default False).

    Returns
    -------
    None

    Raises
    ------
    ValueError
        ``"<Class>.<field>=<value> must be positive"`` for the first field at or below zero, with
        ``" or None"`` added when ``none_allowed``.

    Notes
    -----
    Call it after :func:`check_field_types`: it compares with ``>``, so a wrongly typed value (a string, say)
    would fail inside the comparison instead of with the message naming the field. The test is ``not value > 0`` rather than
    ``value <= 0`` so that a NaN, should one ever get past the type check, is refused and not let through.
    """
    for name in names:
        value = getattr(instance, name)
        if value is None and none_allowed:
            continue
        if not value > 0:
            suffix = " or None" if none_allowed else ""
            raise ValueError(f"{type(instance).__name__}.{name}={value} must be positive{suffix}")


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
