"""YAML experiment files: reading them, ``--set`` overrides, the shipped configs, and which flag broke one."""

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from transformer.config.experiment import ExperimentConfig, experiment_from_dict


class _ConfigLoader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2 floats: ``1e-3`` is 0.001, not the string "1e-3"."""


_ConfigLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^[-+]?(?:[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?|\.[0-9_]+(?:[eE][-+]?[0-9]+)?"
        r"|[0-9][0-9_]*[eE][-+]?[0-9]+|\.(?:inf|Inf|INF)|[-+]\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)


def _parse_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_ConfigLoader)  # a SafeLoader subclass: no arbitrary objects


def describe_yaml_error(path: Path, error: yaml.YAMLError) -> str:
    """Say where and why a YAML file does not parse, in one line.

    Parameters
    ----------
    path : Path
        The file.
    error : yaml.YAMLError
        PyYAML's error.

    Returns
    -------
    str
        ``FILE:LINE:COLUMN: not valid YAML: PROBLEM (CONTEXT at line L, column C)``, counted from 1 as editors
        do; ``FILE: not valid YAML: ...`` when PyYAML gives no position.

    Notes
    -----
    PyYAML's own text spans several lines and starts with the context ("while parsing a flow sequence"), so
    its first line alone said neither what is wrong nor where. The problem's mark is where the parser
    gave up; the context's mark is where the construct it was reading began (often the real mistake: an
    unclosed bracket).
    """
    if not isinstance(error, yaml.MarkedYAMLError) or error.problem_mark is None:
        return f"{path}: not valid YAML: {' '.join(str(error).split())}"
    mark = error.problem_mark
    message = f"{path}:{mark.line + 1}:{mark.column + 1}: not valid YAML: {error.problem}"
    if error.context:
        context = error.context
        if error.context_mark is not None:
            context += f" at line {error.context_mark.line + 1}, column {error.context_mark.column + 1}"
        message += f" ({context})"
    return message


def load_config(path: str | Path, overrides: Sequence[str] = ()) -> ExperimentConfig:
    """Read a YAML experiment file and apply ``section.key=value`` overrides.

    Parameters
    ----------
    path : str or Path
        A YAML file with the sections of :class:`ExperimentConfig`.
    overrides : sequence of str
        Items like ``"train.max_steps=2000"`` or ``"model.dropout=0.3"``; the value is parsed as YAML
        (so ``null``, ``true``, ``1e-3`` and ``[1, 2]`` work).

    Returns
    -------
    ExperimentConfig
        The validated configuration.

    Notes
    -----
    Errors name the file (or the override) and the key at fault, in one line.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ValueError(f"cannot read config {path}: {error.strerror}") from None
    try:
        values = _parse_yaml(text) or {}
    except yaml.YAMLError as error:
        raise ValueError(describe_yaml_error(path, error)) from None
    if not isinstance(values, dict):
        raise ValueError(f"{path}: expected a mapping of sections at the top level")
    for override in overrides:
        apply_override(values, override)
    return experiment_from_dict(values, source=str(path))


def apply_override(values: dict[str, Any], override: str) -> None:
    """Set one ``section.key=value`` item in nested config values, in place.

    Parameters
    ----------
    values : dict of str to Any
        Nested sections, as read from YAML.
    override : str
        ``"section.key=value"``; the value is parsed as YAML.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Quoting the item when it is malformed.

    Notes
    -----
    The key is not checked here: an unknown section or key is reported later by :func:`experiment_from_dict`,
    like one in the file.
    """
    key_path, separator, raw_value = override.partition("=")
    section, dot, key = key_path.strip().partition(".")
    if not separator or not dot or not section or not key:
        raise ValueError(f"--set {override!r}: expected section.key=value, e.g. train.max_steps=2000")
    try:
        parsed = _parse_yaml(raw_value)
    except yaml.YAMLError:
        raise ValueError(f"--set {override!r}: the value is not valid YAML") from None
    section_values = values.setdefault(section, {})
    if not isinstance(section_values, dict):
        raise ValueError(f"--set {override!r}: section '{section}' is not a mapping")
    section_values[key] = parsed


#: The repository's ``configs/`` folder (present in a source checkout, not in an installed wheel).
REPO_CONFIGS = Path(__file__).resolve().parents[3] / "configs"


def resolve_config_path(name: str) -> Path:
    """Accept a YAML path or the bare name of a file in the repository's ``configs/``.

    Parameters
    ----------
    name : str
        ``configs/multi30k.yaml``, ``multi30k.yaml`` or ``multi30k``.

    Returns
    -------
    Path
        An existing file.

    Raises
    ------
    ValueError
        Naming ``--config`` and listing the shipped configs, when nothing matches.

    Notes
    -----
    A path that exists wins over a shipped config of the same name, so a local ``multi30k.yaml`` is read
    rather than the repository's.
    """
    path = Path(name)
    if path.exists():
        return path
    for candidate in (REPO_CONFIGS / name, REPO_CONFIGS / f"{name}.yaml"):
        if candidate.exists():
            return candidate
    shipped = sorted(item.stem for item in REPO_CONFIGS.glob("*.yaml")) if REPO_CONFIGS.exists() else []
    raise ValueError(f"--config {name}: no such file (shipped configs: {', '.join(shipped) or 'none'})")


def blame_override(path: Path, flagged_overrides: Sequence[tuple[str, str]], error: ValueError) -> ValueError:
    """Name the flag whose override made a config invalid, instead of the config file.

    Parameters
    ----------
    path : Path
        The config file.
    flagged_overrides : sequence of (str, str)
        Each override with the command-line flag that gave it, e.g. ``("--set train.max_steps=x",
        "train.max_steps=x")``, in the order applied.
    error : ValueError
        The error of loading ``path`` with every override.

    Returns
    -------
    ValueError
        The error of the first prefix of overrides that fails, its message starting with the flag of the
        last override in that prefix; ``error`` itself when the file alone fails or no prefix does.

    Notes
    -----
    :func:`load_config` names the file in every validation error, since it cannot tell the file's values
    from the overrides'. Loading again with more and more overrides finds the one that breaks the config;
    that happens only on the way to an error message, so the extra loads cost nothing in a good run.
    """
    for count in range(len(flagged_overrides) + 1):
        try:
            load_config(path, [override for _, override in flagged_overrides[:count]])
        except ValueError as prefix_error:
            if count == 0:
                return error
            message = str(prefix_error)
            if message.startswith("--set "):  # a malformed override, already named by load_config
                return prefix_error
            flag = flagged_overrides[count - 1][0]
            return ValueError(f"{flag}: {message.removeprefix(f'{path}: ')}")
    return error
