"""The docstring convention, checked on every public object of the ``transformer`` package.

Every public function, class, method and property carries a numpy-style docstring with a description,
``Parameters`` (when it takes any, each with a type), ``Returns`` (``Yields`` for generators; not for classes)
and a ``Notes`` section that says something. The exceptions an object raises are listed in a ``Raises``
section (after ``Returns``, before ``Notes``), one type per line with an indented description, never told in
the prose of ``Notes``. The checker parses docstrings itself (a section is a title line followed by a line of
dashes), so the convention costs no extra dependency.

``python tests/test_docstrings.py`` prints every violation grouped by file and exits 1 if there is any.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import importlib
import importlib.util
import inspect
import pkgutil
import re
import sys
import textwrap
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

PACKAGE = "transformer"

# Issue #30: modules that another change is rewriting while their exceptions move into Raises sections; their
# Notes still tell some raises in prose. Only that check ("Notes say it raises ...") is waived for them, every
# other one applies, and test_raises_waiver_is_still_needed fails once a module no longer needs its waiver, so
# the list cannot outlive its reason.
RAISES_NOT_YET_CONVERTED = ("transformer.serving",)

# numpydoc's section titles. Any other title is reported: "Note" or "Return" would otherwise show up only as
# a missing "Notes" or "Returns", with no hint why.
KNOWN_SECTIONS = frozenset(
    {
        "Parameters",
        "Other Parameters",
        "Returns",
        "Yields",
        "Receives",
        "Raises",
        "Warns",
        "Warnings",
        "See Also",
        "Notes",
        "References",
        "Examples",
        "Attributes",
        "Methods",
    }
)

# ==============================================================================================================
# Parsing
# ==============================================================================================================

_DASHES = re.compile(r"-{3,}\s*")


@dataclasses.dataclass(frozen=True)
class ParsedDocstring:
    """A numpy-style docstring split into its description and its sections.

    Parameters
    ----------
    description : str
        The first paragraph, on one line: the text before the first blank line or section header.
    sections : dict[str, str]
        Each section's title and its body, dedented, without surrounding blank lines. A repeated title keeps
        its first body.

    Notes
    -----
    A section header is a line at the docstring's own indentation followed by a line of at least three dashes,
    numpydoc's layout; anything else is body text.
    """

    description: str
    sections: dict[str, str]


@dataclasses.dataclass(frozen=True)
class Entry:
    """One item of a ``Parameters`` or ``Returns`` section: a line at column 0 and the indented lines below.

    Parameters
    ----------
    names : tuple[str, ...]
        The names before the colon, stars and backslashes stripped (``*args`` is ``args``); ``x, y : int``
        names two. Empty for a ``Returns`` item that gives only a type.
    type : str
        The text after the colon (the whole line for a nameless ``Returns`` item); ``""`` when there is none.
    description : str
        The indented lines, joined.

    Notes
    -----
    numpydoc writes ``name : type`` with spaces around the colon; in ``Parameters`` a bare ``name: type`` is
    accepted too, being unambiguous there.
    """

    names: tuple[str, ...]
    type: str
    description: str


def parse_docstring(doc: str) -> ParsedDocstring:
    """Split a docstring into its first paragraph and its sections.

    Parameters
    ----------
    doc : str
        The raw ``__doc__``.

    Returns
    -------
    ParsedDocstring
        The description and the sections.

    Notes
    -----
    ``inspect.cleandoc`` runs first, so headers sit at column 0 whatever the docstring's indentation was.
    """
    lines = inspect.cleandoc(doc).splitlines()
    headers = [
        index
        for index in range(len(lines) - 1)
        if lines[index].strip() and not lines[index][0].isspace() and _DASHES.fullmatch(lines[index + 1])
    ]
    paragraph: list[str] = []
    for line in lines[: headers[0]] if headers else lines:
        if line.strip():
            paragraph.append(line.strip())
        elif paragraph:
            break
    sections: dict[str, str] = {}
    for position, start in enumerate(headers):
        end = headers[position + 1] if position + 1 < len(headers) else len(lines)
        body = textwrap.dedent("\n".join(lines[start + 2 : end])).strip("\n")
        sections.setdefault(lines[start].strip(), body)
    return ParsedDocstring(" ".join(paragraph), sections)


def section_entries(body: str, *, named: bool) -> list[Entry]:
    """Read the items of a ``Parameters``-like (``named``) or ``Returns``-like section.

    Parameters
    ----------
    body : str
        The section's body, dedented: items at column 0, their descriptions indented below them.
    named : bool
        Every item starts with names (``Parameters``); otherwise an item is ``type`` or ``name : type``.

    Returns
    -------
    list[Entry]
        The items in order.

    Notes
    -----
    A prose line at column 0 of a ``Parameters`` section reads as an item, and so as a name absent from the
    signature: which is what it looks like in the rendered documentation too.
    """
    entries: list[Entry] = []
    header: str | None = None
    description: list[str] = []

    def flush() -> None:
        if header is None:
            return
        if named:
            names, _, type_ = header.partition(":")
        elif " : " in header:
            names, _, type_ = header.partition(" : ")
        else:
            names, type_ = "", header
        cleaned = (name.strip().replace("\\", "").lstrip("*").strip() for name in names.split(","))
        entries.append(Entry(tuple(name for name in cleaned if name), type_.strip(), " ".join(description)))

    for line in body.splitlines():
        if line.strip() and not line[0].isspace():
            flush()
            header, description = line, []
        elif line.strip():
            description.append(line.strip())
    flush()
    return entries


# A tensor's shape is written out when its item says "shape", "scalar" or "0-d", or gives a tuple such as
# "(batch, seq_len)" or "(batch,)". Containers of tensors (a state dict) have no one shape to give.
_SHAPE = re.compile(r"\bshape\b|\bscalar\b|\b0-d\b|\(\s*[\w.*+\-/ ]+,[\w.*+\-/ ,]*\)", re.IGNORECASE)
_CONTAINER = re.compile(r"(?:dict|list|tuple|sequence|mapping|iterable|iterator|set)\b", re.IGNORECASE)


def lacks_shape(entry: Entry) -> bool:
    """Whether an item documents a tensor without saying its shape.

    Parameters
    ----------
    entry : Entry
        A ``Parameters`` or ``Returns`` item.

    Returns
    -------
    bool
        True for a (possibly optional) tensor whose type and description give no shape.

    Notes
    -----
    The convention writes shapes out, ``torch.Tensor, shape (batch, seq_len, d_model)``; "Any shape" and
    "same shape as ``x``" count, since they are statements about the shape.
    """
    if "Tensor" not in entry.type or _CONTAINER.match(entry.type):
        return False
    return not _SHAPE.search(f"{entry.type} {entry.description}")


# ==============================================================================================================
# Filler notes
# ==============================================================================================================

MIN_NOTES_WORDS = 6

# A reference and nothing else: "Section 3.1.", "Eq. (2).", "See :func:`x`.", "Section 3.2 of the paper.",
# "Sections 3.2.1 and 3.2.2.", "Figure 2 (right)". Removing every reference must leave only punctuation.
_REFERENCE = re.compile(
    r"""
    (?:see|cf\.?|as\s+in|per|from|after|follows|implements)?\s*
    (?:
        (?:sections?|§|eqs?\.?|equations?|figures?|figs?\.?|tables?|algorithms?|appendix)
            \s*\(?[\w.]+\)?(?:\s*(?:,|and|&|-|–)\s*\(?[\w.]+\)?)*(?:\s*\([^)]*\))?
      | :\w+:`[^`]+`
      | `[^`]+`_?
      | <?https?://\S+>?
    )
    (?:\s+(?:of|in)\s+(?:the\s+)?(?:paper|original\s+paper|vaswani\s+et\s+al\.?(?:,?\s*2017)?|this\s+module))?
    """,
    re.IGNORECASE | re.VERBOSE,
)
_PUNCTUATION = re.compile(r"[\s.,;:()\-–—]*")
# A clause ends at ".", ":", ";", "!" or "?" before a space or the end; the dots in ":func:`a.b`" do not end one.
_CLAUSE = re.compile(r"(?:[^.:;!?]|[.:;!?](?!\s|$))+(?:[.:;!?](?=\s|$)|$)")


def filler_reason(notes: str) -> str | None:
    """Say why a ``Notes`` body is filler, or ``None`` when it says something.

    Parameters
    ----------
    notes : str
        The body of the ``Notes`` section.

    Returns
    -------
    str or None
        ``"empty"``, ``"only a reference"``, ``"only a pointer"`` or ``"only N words"``; ``None`` for a real
        note.

    Notes
    -----
    Three rules, in order. (1) A body made of references only (sections, equations, figures, tables,
    cross-reference roles, links, with "see", "and", "of the paper") says where to look, not what is there or
    why: filler however long. (2) A single clause that starts with "See" or "cf." defers the note to another
    object ("See :meth:`f` for the scores."); a clause after a colon or a full stop ("See :func:`f`: the logits
    do not change.") makes it a note. (3) Fewer than :data:`MIN_NOTES_WORDS` whitespace-separated words cannot
    carry a reason, a pitfall or what a section of the paper says. A role or a literal without spaces counts
    as one word, so "Inverse of :func:`merge_heads`." is three.
    """
    text = " ".join(notes.split())
    if not text:
        return "empty"
    if _PUNCTUATION.fullmatch(_REFERENCE.sub(" ", text)):
        return "only a reference"
    if re.match(r"(?:see|cf\.?)\s", text, re.IGNORECASE) and len(_CLAUSE.findall(text)) <= 1:
        return "only a pointer"
    words = len(text.split())
    if words < MIN_NOTES_WORDS:
        return f"only {words} words"
    return None


# ==============================================================================================================
# Exceptions: a Raises section, not prose in Notes
# ==============================================================================================================

# "Raises ValueError naming ...", "a bad key raises ``ValueError``", "raise :class:`~pkg.CorpusError`",
# "a ValueError is raised": a raise that names the exception type. Case matters for the type (a capitalised
# name ending in Error or Exception), so "raises an error" or "re-raises" without a type are prose, as are
# "Raised by ..." in an exception class's own notes.
_RAISING = re.compile(
    r"""
    \b[Rr]aise[sd]?\s+(?:an?\s+)?(?::\w+:`~?|``)?(?:\w+\.)*(?P<raised>[A-Z]\w*(?:Error|Exception))\b
    | \b(?P<named>[A-Z]\w*(?:Error|Exception))(?:``|`)?\s+(?:is|are)\s+raised\b
    """,
    re.VERBOSE,
)
# A Raises item names one exception type, possibly qualified (``argparse.ArgumentTypeError``).
_EXCEPTION_TYPE = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*")
# numpydoc's order; a section absent from a docstring constrains nothing.
_BEFORE_RAISES = ("Parameters", "Returns", "Yields", "Receives", "Other Parameters")
_AFTER_RAISES = ("Warns", "Warnings", "See Also", "Notes", "References", "Examples")


def exceptions_raised_in_prose(text: str) -> list[str]:
    """Name the exception types a piece of prose says are raised.

    Parameters
    ----------
    text : str
        A section body, e.g. of ``Notes``.

    Returns
    -------
    list[str]
        The unqualified type names in order of first mention, each once; empty when no raise names a type.

    Notes
    -----
    ``:class:`~pkg.mod.CorpusError``` and ````argparse.ArgumentTypeError```` count as ``CorpusError`` and
    ``ArgumentTypeError``, so a Raises item written either way matches them.
    """
    names: list[str] = []
    for match in _RAISING.finditer(" ".join(text.split())):
        name = match.group("raised") or match.group("named")
        if name not in names:
            names.append(name)
    return names


def raises_problems(sections: dict[str, str]) -> list[str]:
    """List what is wrong with how a docstring documents the exceptions it raises.

    Parameters
    ----------
    sections : dict[str, str]
        The docstring's sections, in their order (:attr:`ParsedDocstring.sections`).

    Returns
    -------
    list[str]
        One problem per item: a raise told in ``Notes`` with no ``Raises`` item for its type, a malformed
        ``Raises`` item, an empty ``Raises`` section, or one out of numpydoc's order.

    Notes
    -----
    Issue #30: exceptions go in a numpydoc ``Raises`` section, where a reader (and Sphinx) looks for them, not
    in the prose of ``Notes``. A ``Raises`` item is a type at column 0 with its description indented below;
    prose at column 0 ("Raises ValueError when ...") or a type with no description is reported.
    """
    problems = []
    listed: set[str] = set()
    if "Raises" in sections:
        entries = section_entries(sections["Raises"], named=False)
        if not entries:
            problems.append("empty Raises")
        for entry in entries:
            header = " : ".join(part for part in (", ".join(entry.names), entry.type) if part)
            if entry.names or not _EXCEPTION_TYPE.fullmatch(entry.type):
                problems.append(f"Raises: {header!r} is not an exception type on a line of its own")
            elif not entry.description:
                problems.append(f"Raises: {entry.type} has no indented description")
            else:
                listed.add(entry.type.rpartition(".")[2])
        titles = list(sections)
        position = titles.index("Raises")
        problems.extend(
            f"Raises comes before {title}" for title in _BEFORE_RAISES if title in titles[position + 1 :]
        )
        problems.extend(
            f"Raises comes after {title}" for title in _AFTER_RAISES if title in titles[:position]
        )
    problems.extend(
        f"Notes say it raises {name}, which has no Raises item"
        for name in exceptions_raised_in_prose(sections.get("Notes", ""))
        if name not in listed
    )
    return problems


# ==============================================================================================================
# Checking one docstring
# ==============================================================================================================


def _display(parameter: inspect.Parameter) -> str:
    """A parameter's name as a docstring writes it: ``*args``, ``**kwargs`` or ``name``."""
    stars = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}
    return stars.get(parameter.kind, "") + parameter.name


def check_docstring(
    doc: str | None, *, parameters: list[inspect.Parameter], needs_returns: bool, yields: bool = False
) -> list[str]:
    """List what a docstring lacks under the convention.

    Parameters
    ----------
    doc : str or None
        The docstring; ``None`` or blank when there is none.
    parameters : list[inspect.Parameter]
        The parameters it must document, ``self``/``cls`` already removed.
    needs_returns : bool
        A ``Returns`` (or ``Yields``) section is required: functions, methods and properties.
    yields : bool
        The object is a generator: a missing section is reported as ``Yields``.

    Returns
    -------
    list[str]
        One problem per item, e.g. ``"missing Notes"``; empty when the docstring complies.

    Notes
    -----
    A missing docstring is one problem rather than four, since the fix is one docstring. ``Other Parameters``
    counts as part of ``Parameters``; either ``Returns`` or ``Yields`` satisfies ``needs_returns``.
    """
    if doc is None or not doc.strip():
        return ["missing docstring"]
    parsed = parse_docstring(doc)
    problems = []
    if not parsed.description:
        problems.append("missing description")
    problems.extend(f"unknown section {title!r}" for title in parsed.sections if title not in KNOWN_SECTIONS)

    titles = [title for title in ("Parameters", "Other Parameters") if title in parsed.sections]
    entries = [entry for title in titles for entry in section_entries(parsed.sections[title], named=True)]
    if parameters and not titles:
        problems.append("missing Parameters")
    elif titles and not parameters:
        problems.append("has a Parameters section but takes no parameters")
    elif parameters:
        documented = {name for entry in entries for name in entry.names}
        expected = {parameter.name for parameter in parameters}
        problems.extend(
            f"parameter {_display(parameter)} not documented"
            for parameter in parameters
            if parameter.name not in documented
        )
        for entry in entries:
            for name in entry.names:
                if name not in expected:
                    problems.append(f"documents {name!r}, which is not a parameter")
                elif not entry.type:
                    problems.append(f"parameter {name} has no type")
                elif lacks_shape(entry):
                    problems.append(f"parameter {name}: tensor without a shape")

    if needs_returns:
        title = next((title for title in ("Returns", "Yields") if title in parsed.sections), None)
        if title is None:
            problems.append("missing Yields" if yields else "missing Returns")
        elif not parsed.sections[title].strip():
            problems.append(f"empty {title}")
        else:
            problems.extend(
                f"{title}: tensor without a shape ({entry.type!r})"
                for entry in section_entries(parsed.sections[title], named=False)
                if lacks_shape(entry)
            )

    if "Notes" not in parsed.sections:
        problems.append("missing Notes")
    else:
        reason = filler_reason(parsed.sections["Notes"])
        if reason is not None:
            problems.append(f"filler Notes ({reason}): {' '.join(parsed.sections['Notes'].split())!r}")
    problems.extend(raises_problems(parsed.sections))
    return problems


# ==============================================================================================================
# What to check: the public objects a module defines
# ==============================================================================================================


def _signature_parameters(obj: Any) -> list[inspect.Parameter]:
    """The parameters of a callable; none for a builtin without a signature."""
    try:
        return list(inspect.signature(obj).parameters.values())
    except (TypeError, ValueError):
        return []


def constructor_parameters(cls: type) -> list[inspect.Parameter]:
    """The parameters a class's docstring documents: its constructor's, or its dataclass fields.

    Parameters
    ----------
    cls : type
        The class.

    Returns
    -------
    list[inspect.Parameter]
        The parameters of ``cls(...)``; empty for enums and protocols, and when the constructor is inherited
        from outside the class's own package.

    Notes
    -----
    ``nn.Module``'s ``*args, **kwargs`` or ``Exception``'s message are not the subclass's to document; a
    constructor inherited from a class of the same package is, since the subclass is built with it.
    ``inspect.signature(cls)`` already gives the dataclass fields that ``__init__`` takes, and a
    ``NamedTuple``'s fields through its ``__new__``.
    """
    if issubclass(cls, enum.Enum) or getattr(cls, "_is_protocol", False):
        return []
    if not dataclasses.is_dataclass(cls):
        owner = next(
            (klass for klass in cls.__mro__ if "__init__" in vars(klass) or "__new__" in vars(klass)), object
        )
        if owner is not cls and owner.__module__.split(".")[0] != cls.__module__.split(".")[0]:
            return []
    return _signature_parameters(cls)


def _is_generator(func: Callable[..., Any]) -> bool:
    """Whether a function yields: a generator, an async generator, or one a decorator wraps."""
    inner = inspect.unwrap(func)
    return inspect.isgeneratorfunction(inner) or inspect.isasyncgenfunction(inner)


def _check_routine(func: Callable[..., Any], *, bound: bool) -> list[str]:
    """Check a function or method; ``bound`` drops its first parameter (``self`` or ``cls``)."""
    parameters = _signature_parameters(func)
    if bound and parameters and parameters[0].kind is not inspect.Parameter.VAR_POSITIONAL:
        parameters = parameters[1:]
    return check_docstring(
        func.__doc__, parameters=parameters, needs_returns=True, yields=_is_generator(func)
    )


def _class_doc(cls: type) -> str | None:
    """A class's own docstring, ``None`` when ``dataclasses`` or ``namedtuple`` wrote it."""
    doc = cls.__dict__.get("__doc__")
    generated = dataclasses.is_dataclass(cls) or hasattr(cls, "_fields")
    if doc is not None and generated and doc.startswith(f"{cls.__name__}("):
        return None
    return doc


def _members(cls: type) -> Iterator[tuple[str, str, Any]]:
    """The public members a class defines itself, as ``(name, kind, object)`` in definition order."""
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(member, property):
            if member.fget is not None:
                yield name, "property", member.fget
        elif isinstance(member, functools.cached_property):
            yield name, "property", member.func
        elif isinstance(member, staticmethod):
            yield name, "staticmethod", member.__func__
        elif isinstance(member, classmethod):
            yield name, "classmethod", member.__func__
        elif inspect.isclass(member):
            yield name, "class", member
        elif callable(member) and inspect.isroutine(inspect.unwrap(member)):
            yield name, "method", member


def class_checks(cls: type, qualname: str) -> Iterator[tuple[str, list[str]]]:
    """Check a class's docstring and those of the public members it defines itself.

    Parameters
    ----------
    cls : type
        The class.
    qualname : str
        How violations name it, e.g. ``transformer.model.encoder.Encoder``.

    Yields
    ------
    tuple[str, list[str]]
        The qualified name of the class or of one member, and its problems (empty when it complies).

    Notes
    -----
    Inherited members are checked where they are defined; the methods ``dataclasses`` generates are dunders,
    so private; an alias (``g = f`` in the class body) or a member assigned from another module is checked
    under its own name, where it is defined.
    """
    yield (
        qualname,
        check_docstring(_class_doc(cls), parameters=constructor_parameters(cls), needs_returns=False),
    )
    for name, kind, member in _members(cls):
        if getattr(member, "__module__", None) != cls.__module__:
            continue
        if getattr(member, "__qualname__", None) != f"{cls.__qualname__}.{name}":
            continue
        if kind == "class":
            yield from class_checks(member, f"{qualname}.{name}")
        elif kind == "property":
            yield f"{qualname}.{name}", check_docstring(member.__doc__, parameters=[], needs_returns=True)
        else:
            yield f"{qualname}.{name}", _check_routine(member, bound=kind in ("method", "classmethod"))


def module_checks(module: types.ModuleType) -> Iterator[tuple[str, list[str]]]:
    """Check every public function and class a module defines, and the classes' own public members.

    Parameters
    ----------
    module : types.ModuleType
        The imported module.

    Yields
    ------
    tuple[str, list[str]]
        ``<module>.<qualname>`` of each object checked, and its problems (empty when it complies).

    Notes
    -----
    Only objects whose ``__module__`` is this module count, so a re-export (``from x import f``) is checked
    once, in ``x``. Module-level constants need no docstring and are not looked at.
    """
    for name, obj in vars(module).items():
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        qualname = f"{module.__name__}.{name}"
        if inspect.isclass(obj):
            yield from class_checks(obj, qualname)
        elif callable(obj) and inspect.isroutine(inspect.unwrap(obj)):
            yield qualname, _check_routine(obj, bound=False)


def check_module(module: types.ModuleType) -> list[str]:
    """List every violation in a module, one ``<module>.<qualname>: <problem>`` line each.

    Parameters
    ----------
    module : types.ModuleType
        The imported module.

    Returns
    -------
    list[str]
        The violations, sorted; empty when the module complies.

    Notes
    -----
    Sorted, so an object's problems sit together and the list reads the same from run to run.
    """
    return sorted(f"{name}: {problem}" for name, problems in module_checks(module) for problem in problems)


# ==============================================================================================================
# The package
# ==============================================================================================================


def package_modules() -> list[str]:
    """Name every module of the package, the package itself first.

    Returns
    -------
    list[str]
        Dotted module names. A subpackage that fails to import is listed (its check then fails with the
        error) though the modules inside it cannot be found.

    Notes
    -----
    ``pkgutil.walk_packages`` imports each subpackage to find its modules; the ``onerror`` hook keeps such a
    failure from stopping the walk, and the failing package is in the list, so nothing vanishes silently.
    """
    package = importlib.import_module(PACKAGE)
    found = [
        info.name for info in pkgutil.walk_packages(package.__path__, f"{PACKAGE}.", onerror=lambda _: None)
    ]
    return [PACKAGE, *sorted(set(found))]


class OptionalDependencyMissingError(Exception):
    """A module needs a third-party package that is not installed.

    Parameters
    ----------
    *args : object
        The name of the missing package, as ``ModuleNotFoundError.name`` gives it.

    Notes
    -----
    Its own type, so that only this reason to skip a module is ever taken for one.
    """


def import_module(name: str) -> types.ModuleType:
    """Import a module of the package, telling a missing optional dependency from a broken module.

    Parameters
    ----------
    name : str
        The dotted module name.

    Returns
    -------
    types.ModuleType
        The module.

    Notes
    -----
    Only a ``ModuleNotFoundError`` for a module outside the package is an optional dependency; any other
    error (one of our own modules missing, a ``NameError`` at import) propagates, so a broken module is never
    skipped.
    """
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name and error.name.split(".")[0] != PACKAGE:
            raise OptionalDependencyMissingError(error.name) from error
        raise


def source_file(module_name: str) -> str:
    """The file a module is read from, relative to the repository when it lies inside it."""
    spec = importlib.util.find_spec(module_name)
    if spec is None or not spec.origin:
        return module_name
    try:
        return str(Path(spec.origin).resolve().relative_to(Path(__file__).resolve().parents[1]))
    except ValueError:
        return spec.origin


# ==============================================================================================================
# The package's tests
# ==============================================================================================================


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # A hook rather than @pytest.mark.parametrize(..., package_modules()): importing this file as a script must
    # not import the package before the script has put its own checkout first on sys.path.
    if "module_name" in metafunc.fixturenames:
        names = package_modules()
        metafunc.parametrize("module_name", names, ids=names)


def raises_waived(module_name: str) -> bool:
    """Whether a module is exempt from the raises-in-Notes check (:data:`RAISES_NOT_YET_CONVERTED`)."""
    return any(module_name == name or module_name.startswith(f"{name}.") for name in RAISES_NOT_YET_CONVERTED)


def is_raise_in_notes(violation: str) -> bool:
    """Whether a violation is a raise told in Notes, the one kind :data:`RAISES_NOT_YET_CONVERTED` waives."""
    return ": Notes say it raises " in violation


def test_module_docstrings(module_name: str) -> None:
    try:
        module = import_module(module_name)
    except OptionalDependencyMissingError as missing:
        pytest.skip(f"{module_name} needs {missing}, which is not installed")
    violations = check_module(module)
    if raises_waived(module_name):
        violations = [violation for violation in violations if not is_raise_in_notes(violation)]
    assert not violations, f"{len(violations)} docstring violations in {module_name}:\n" + "\n".join(
        violations
    )


def test_every_module_is_found() -> None:
    names = package_modules()
    assert names[0] == PACKAGE
    assert len(names) == len(set(names)) > 1
    assert all(name.startswith(f"{PACKAGE}.") for name in names[1:])


@pytest.mark.parametrize("waived", RAISES_NOT_YET_CONVERTED)
def test_raises_waiver_is_still_needed(waived: str) -> None:
    names = [
        name for name in package_modules() if raises_waived(name) and (name + ".").startswith(waived + ".")
    ]
    if not names:
        pytest.skip(f"{waived} is not in this checkout")
    found = []
    for name in names:
        try:
            found.extend(filter(is_raise_in_notes, check_module(import_module(name))))
        except OptionalDependencyMissingError as missing:
            pytest.skip(f"{name} needs {missing}, which is not installed")
    assert found, f"{waived} tells no raise in Notes any more: remove it from RAISES_NOT_YET_CONVERTED"


def test_only_a_missing_third_party_package_skips_a_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "needs_optional.py").write_text("import surely_not_an_installed_package\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(OptionalDependencyMissingError, match="surely_not_an_installed_package"):
        import_module("needs_optional")
    with pytest.raises(ModuleNotFoundError):  # one of our own modules missing: a failure, not a skip
        import_module(f"{PACKAGE}.surely_not_a_module")


# ==============================================================================================================
# The checker's own tests: synthetic modules with known violations
# ==============================================================================================================


def violations_in(source: str) -> list[str]:
    """Run the checker on a module made from ``source``, named ``fake``."""
    module = types.ModuleType("fake")
    sys.modules["fake"] = module
    try:
        exec(textwrap.dedent(source), module.__dict__)
        return check_module(module)
    finally:
        del sys.modules["fake"]


GOOD_FUNCTION = '''
def scale(hidden, factor=2.0):
    """Multiply a tensor by a factor.

    Parameters
    ----------
    hidden : torch.Tensor, shape (batch, seq_len, d_model)
        Input.
    factor : float
        The factor.

    Returns
    -------
    torch.Tensor, shape (batch, seq_len, d_model)
        ``hidden * factor``.

    Notes
    -----
    Section 3.4: the embeddings are multiplied by sqrt(d_model) so they are not drowned by the encodings.
    """
    return hidden * factor
'''


def test_a_compliant_function_has_no_violations() -> None:
    assert violations_in(GOOD_FUNCTION) == []


def test_missing_sections_are_each_reported() -> None:
    source = '''
    def scale(hidden, factor):
        """Multiply a tensor by a factor."""
    '''
    assert violations_in(source) == [
        "fake.scale: missing Notes",
        "fake.scale: missing Parameters",
        "fake.scale: missing Returns",
    ]


def test_missing_docstring_and_description() -> None:
    source = '''
    def bare():
        pass

    def headless():
        """
        Returns
        -------
        None
            Nothing.

        Notes
        -----
        Exists so that the checker has a docstring with sections but no description.
        """
    '''
    assert violations_in(source) == ["fake.bare: missing docstring", "fake.headless: missing description"]


def test_undocumented_absent_and_untyped_parameters() -> None:
    source = GOOD_FUNCTION.replace(
        "def scale(hidden, factor=2.0)", "def scale(hidden, scale, *args, **overrides)"
    )
    source = source.replace("hidden : torch.Tensor, shape (batch, seq_len, d_model)", "hidden")
    assert violations_in(source) == [
        "fake.scale: documents 'factor', which is not a parameter",
        "fake.scale: parameter **overrides not documented",
        "fake.scale: parameter *args not documented",
        "fake.scale: parameter hidden has no type",
        "fake.scale: parameter scale not documented",
    ]


def test_star_parameters_and_grouped_names_are_recognised() -> None:
    source = GOOD_FUNCTION.replace(
        "def scale(hidden, factor=2.0)", "def scale(hidden, factor, low, high, *args, **overrides)"
    )
    source = source.replace(
        "    factor : float\n",
        "    factor : float\n        The factor.\n    low, high : float\n        Bounds.\n"
        "    *args : int\n        More.\n    \\\\*\\\\*overrides : object\n",
    )
    assert violations_in(source) == []


def test_tensor_without_a_shape() -> None:
    source = GOOD_FUNCTION.replace(", shape (batch, seq_len, d_model)", "")
    assert violations_in(source) == [
        "fake.scale: Returns: tensor without a shape ('torch.Tensor')",
        "fake.scale: parameter hidden: tensor without a shape",
    ]


@pytest.mark.parametrize(
    ("notes", "reason"),
    [
        ("Section 3.1.", "only a reference"),
        ("See :func:`dropout`.", "only a reference"),
        ("Section 3.2 of the paper.", "only a reference"),
        ("Sections 3.2.1 and 3.2.2 of Vaswani et al., 2017.", "only a reference"),
        ("Eq. (3).", "only a reference"),
        ("See :meth:`translate_nbest` for scores and alternatives.", "only a pointer"),
        ("Used by ``--resume``.", "only 3 words"),
        ("Inverse of :func:`merge_heads`.", "only 3 words"),
        ("", "empty"),
    ],
)
def test_filler_notes_are_rejected(notes: str, reason: str) -> None:
    assert filler_reason(notes) == reason


@pytest.mark.parametrize(
    "notes",
    [
        'Section 5.4: dropout is applied "to the sums of the embeddings and the positional encodings".',
        "Paper section 3.2.3: masking future positions keeps the decoder auto-regressive.",
        "See :func:`permute_residual_basis`: the logits do not change.",
        "Eq. (3) of the paper. The peak, at ``step == warmup_steps``, is 7.0e-4 for the base model.",
        "Reads 1 MiB at a time, so memory stays flat for large corpora.",
        "``sinusoidal_table(n, d, 'interleaved')[:, order] == sinusoidal_table(n, d, 'concatenated')``.",
    ],
)
def test_real_notes_are_accepted(notes: str) -> None:
    assert filler_reason(notes) is None


def test_filler_notes_are_reported_with_their_text() -> None:
    source = GOOD_FUNCTION.replace(
        "Section 3.4: the embeddings are multiplied by sqrt(d_model) so they are not drowned by the encodings.",
        "Section 3.4.",
    )
    assert violations_in(source) == ["fake.scale: filler Notes (only a reference): 'Section 3.4.'"]


def test_unknown_section_is_named() -> None:
    source = GOOD_FUNCTION.replace("Notes\n    -----", "Note\n    ----")
    assert violations_in(source) == ["fake.scale: missing Notes", "fake.scale: unknown section 'Note'"]


#: A class hierarchy with each kind of member: an inherited method, a constructor with parameters, a private
#: method, properties, a static method and a class method; the test below names what each gets wrong.
CLASS_MEMBERS_SOURCE = '''
    class Base:
        """A base class.

        Notes
        -----
        Takes no parameters, so it needs no Parameters section, and inherits object's constructor.
        """

        def inherited(self, x):
            """Not documented properly, reported under Base only."""


    class Child(Base):
        """A class whose constructor takes parameters.

        Parameters
        ----------
        size : int
            The size.

        Notes
        -----
        Exercises properties, static methods and class methods in one place.
        """

        def __init__(self, size):
            self.size = size

        def _private(self):
            pass

        @property
        def area(self):
            """The area.

            Notes
            -----
            A property documents what it returns like any other method does.
            """
            return self.size**2

        @property
        def side(self):
            """The side.

            Parameters
            ----------
            side : int
                There is none.

            Returns
            -------
            int
                The side.

            Notes
            -----
            A property takes no parameters, so a Parameters section is wrong here.
            """
            return self.size

        @staticmethod
        def make(size):
            """Make one.

            Returns
            -------
            Child
                The new object.

            Notes
            -----
            A static method has no self, so its first parameter must be documented.
            """
            return Child(size)

        @classmethod
        def unit(cls):
            """Make the unit one.

            Returns
            -------
            Child
                Of size 1.

            Notes
            -----
            A class method's cls is not a parameter to document, like self.
            """
            return cls(1)
    '''


def test_class_members_properties_and_inheritance() -> None:
    source = CLASS_MEMBERS_SOURCE
    assert violations_in(source) == [
        "fake.Base.inherited: missing Notes",
        "fake.Base.inherited: missing Parameters",
        "fake.Base.inherited: missing Returns",
        "fake.Child.area: missing Returns",
        "fake.Child.make: missing Parameters",
        "fake.Child.side: has a Parameters section but takes no parameters",
    ]


def test_dataclass_fields_are_its_parameters() -> None:
    source = '''
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Point:
        """A point.

        Parameters
        ----------
        x : float
            Abscissa.
        z : float
            Not a field.

        Notes
        -----
        The generated __init__, __repr__ and __eq__ are not checked: they are dunders.
        """

        x: float
        y: float
        cache: dict = dataclasses.field(default_factory=dict, init=False)


    @dataclasses.dataclass
    class Undocumented:
        size: int
    '''
    assert violations_in(source) == [
        "fake.Point: documents 'z', which is not a parameter",
        "fake.Point: parameter y not documented",
        "fake.Undocumented: missing docstring",
    ]


def test_generators_need_yields_and_imports_are_not_checked() -> None:
    source = '''
    from collections import OrderedDict
    from os.path import join

    def count(limit):
        """Count up.

        Parameters
        ----------
        limit : int
            Where to stop.

        Notes
        -----
        A generator yields its values, so its section is Yields, not Returns.
        """
        yield from range(limit)

    def _helper():
        pass

    CONSTANT = 3
    '''
    assert violations_in(source) == ["fake.count: missing Yields"]


def test_exceptions_and_protocols_document_no_inherited_constructor() -> None:
    source = '''
    from typing import Protocol

    class BadInput(ValueError):
        """Raised for bad input.

        Notes
        -----
        The constructor is ValueError's, so there is no Parameters section to write.
        """

    class Reporter(Protocol):
        """Receives progress.

        Notes
        -----
        A protocol is never built, so it has no parameters either.
        """

        def close(self):
            """Finish."""
    '''
    assert violations_in(source) == [
        "fake.Reporter.close: missing Notes",
        "fake.Reporter.close: missing Returns",
    ]


def with_notes(notes: str, raises: str = "") -> str:
    """GOOD_FUNCTION with its Notes replaced and, when given, a Raises section (body lines) before them."""
    source = GOOD_FUNCTION.replace(
        "Section 3.4: the embeddings are multiplied by sqrt(d_model) so they are not drowned by the encodings.",
        notes,
    )
    if raises:
        body = "".join(
            f"    {line}\n" if line else "\n" for line in textwrap.dedent(raises).strip("\n").split("\n")
        )
        source = source.replace("    Notes\n", f"    Raises\n    ------\n{body}\n    Notes\n")
    return source


def test_a_raise_told_in_notes_needs_a_raises_section() -> None:
    source = with_notes("Scaling keeps the embeddings in range. Raises ValueError for a negative factor.")
    assert violations_in(source) == ["fake.scale: Notes say it raises ValueError, which has no Raises item"]


def test_a_raises_section_before_notes_complies() -> None:
    source = with_notes(
        "Scaling keeps the embeddings in range, whatever the factor's sign.",
        raises="""
        ValueError
            For a negative factor.
        argparse.ArgumentTypeError
            For a factor that is not a number.
        """,
    )
    assert violations_in(source) == []


def test_notes_may_name_a_raise_the_raises_section_lists() -> None:
    source = with_notes(
        "Text raises ``ArgumentTypeError`` at parsing; a negative factor raises ValueError later.",
        raises="""
        argparse.ArgumentTypeError
            For a factor that is not a number.
        """,
    )
    assert violations_in(source) == ["fake.scale: Notes say it raises ValueError, which has no Raises item"]


@pytest.mark.parametrize(
    ("notes", "names"),
    [
        ("Raises ValueError naming the file.", ["ValueError"]),
        ("An unknown key raises ``argparse.ArgumentTypeError`` quoting it.", ["ArgumentTypeError"]),
        (
            "Raises :class:`~transformer.data.corpora.CorpusError` when a side\n    is missing.",
            ["CorpusError"],
        ),
        ("Without one a ValueError is raised before anything is created.", ["ValueError"]),
        (
            "Ids outside the vocabulary raise a KeyError; so does a negative one: raises KeyError.",
            ["KeyError"],
        ),
        (
            "Raises OSError for an unreadable file and raised TokenStoreError otherwise.",
            ["OSError", "TokenStoreError"],
        ),
        ("Never raises, since it runs while an error may be on its way out.", []),
        ("If the block raises (a full disk, Ctrl-C), the temporary file is removed.", []),
        ("Raised by :func:`load_lexicon` in place of the ``KeyError`` a bad entry would cause.", []),
        ("On Ctrl-C the workers are stopped and the runner re-raises; it raises an error too.", []),
        ("Dividing by a larger penalty raises their score.", []),
    ],
)
def test_raises_told_in_prose_are_found(notes: str, names: list[str]) -> None:
    assert exceptions_raised_in_prose(notes) == names


def test_malformed_raises_items_are_reported() -> None:
    source = with_notes(
        "Scaling keeps the embeddings in range, whatever the factor's sign.",
        raises="""
        Raises ValueError for a negative factor.
        TypeError
        KeyError : when the factor is missing
            It is looked up by name.
        """,
    )
    assert violations_in(source) == [
        "fake.scale: Raises: 'KeyError : when the factor is missing' is not an exception type on a line of its own",
        "fake.scale: Raises: 'Raises ValueError for a negative factor.' is not an exception type on a line of its own",
        "fake.scale: Raises: TypeError has no indented description",
    ]


def test_an_empty_raises_section_is_reported() -> None:
    source = with_notes("Scaling keeps the embeddings in range, whatever the factor's sign.")
    source = source.replace("    Notes\n", "    Raises\n    ------\n\n    Notes\n")
    assert violations_in(source) == ["fake.scale: empty Raises"]


def test_raises_section_out_of_order_is_reported() -> None:
    raises = "    Raises\n    ------\n    ValueError\n        For a negative factor.\n\n"
    after_notes = GOOD_FUNCTION.replace('    """\n    return', f'\n{raises}    """\n    return')
    before_returns = GOOD_FUNCTION.replace("    Returns\n", f"{raises}    Returns\n")
    assert violations_in(after_notes) == ["fake.scale: Raises comes after Notes"]
    assert violations_in(before_returns) == ["fake.scale: Raises comes before Returns"]


# ==============================================================================================================
# Script: the whole backlog, grouped by file
# ==============================================================================================================


def collect_violations() -> tuple[dict[str, list[str]], list[str], int, int]:
    """Check every module of the package.

    Returns
    -------
    tuple[dict[str, list[str]], list[str], int, int]
        The violations by source file (files that have some), one line per module skipped for a missing
        optional dependency and per violation waived by :data:`RAISES_NOT_YET_CONVERTED`, the number of
        objects checked, and how many of them comply.

    Notes
    -----
    A module that fails to import for another reason is one violation, ``<module>: cannot import: ...``.
    """
    by_file: dict[str, list[str]] = {}
    skipped: list[str] = []
    checked = compliant = 0
    for name in package_modules():
        try:
            results = list(module_checks(import_module(name)))
        except OptionalDependencyMissingError as missing:
            skipped.append(f"{name}: skipped, needs {missing}")
            continue
        except Exception as error:
            results = [(name, [f"cannot import: {type(error).__name__}: {error}"])]
        checked += len(results)
        compliant += sum(not problems for _, problems in results)
        violations = sorted(
            f"{qualname}: {problem}" for qualname, problems in results for problem in problems
        )
        if raises_waived(name):
            skipped.extend(
                f"{violation} (waived, issue #30)" for violation in violations if is_raise_in_notes(violation)
            )
            violations = [violation for violation in violations if not is_raise_in_notes(violation)]
        if violations:
            by_file.setdefault(source_file(name), []).extend(violations)
    return by_file, skipped, checked, compliant


def main() -> int:
    """Print every violation, grouped by file, with a count per file and in all.

    Returns
    -------
    int
        The exit status: 1 when there is any violation, 2 when the package cannot be imported, else 0.

    Notes
    -----
    The repository's ``src`` goes first on ``sys.path`` (below), so the checkout this script lives in is the
    one checked, not whichever copy of the package is installed.
    """
    try:
        by_file, skipped, checked, compliant = collect_violations()
    except ImportError as error:  # the package itself: nothing can be checked, which is not a pass
        print(f"cannot import {PACKAGE}: {type(error).__name__}: {error}", file=sys.stderr)
        return 2
    total = sum(len(violations) for violations in by_file.values())
    for file in sorted(by_file):
        print(f"{file} ({len(by_file[file])})")
        for violation in by_file[file]:
            print(f"  {violation}")
    for line in skipped:
        print(line)
    print(
        f"{total} docstring violations in {len(by_file)} files; "
        f"{compliant} of {checked} public objects comply"
    )
    return 1 if total else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    sys.exit(main())
