"""The request edge's first look at a body: JSON that parses to an object, and strings that are text.

Both APIs read their bodies here before any field is interpreted, so a broken body gets one line naming what
is wrong (the body, or the field and the character) instead of a traceback from deep inside the tokenizer,
the key check or the JSON encoder of the reply.
"""

import json
import re
import unicodedata
from typing import Any

from transformer.command_checks import refuse_control_characters

#: Line breaks a text field may hold (a paragraph keeps its lines); every other control character is refused.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")

#: JSON's names for the Python values :func:`json.loads` gives, for messages about a body's type.
_JSON_TYPES = {str: "a string", int: "a number", float: "a number", bool: "a boolean", list: "an array"}


def parse_json_body(raw: bytes) -> Any:
    """Parse a request body as JSON, whatever its content type says.

    Parameters
    ----------
    raw : bytes
        The body as received.

    Returns
    -------
    object
        The parsed value (not yet known to be an object: see :func:`describe_json_type`).

    Raises
    ------
    ValueError
        One line starting ``invalid JSON:``: an empty body, bytes that are not UTF-8, JSON's own syntax error
        (with line and column), or arrays and objects nested deeper than the parser's recursion limit.

    Notes
    -----
    ``curl -d '{...}'`` sends ``application/x-www-form-urlencoded`` and many clients send ``text/plain``: the
    bytes decide, not the header. Python's parser recurses once per nesting level, so 10,000 nested ``[`` raise
    RecursionError, which is a client's mistake (400) rather than a server failure (500).
    """
    if not raw.strip():
        raise ValueError("invalid JSON: the body is empty")
    try:
        return json.loads(raw)
    except UnicodeDecodeError as error:
        raise ValueError(
            f"invalid JSON: the body is not UTF-8 text (byte 0x{raw[error.start]:02x} at position {error.start})"
        ) from None
    except json.JSONDecodeError as error:
        raise ValueError(f"invalid JSON: {error}") from None
    except RecursionError:
        raise ValueError("invalid JSON: arrays or objects nested too deeply for the parser") from None


def describe_json_type(value: Any) -> str:
    """Name the JSON type of a parsed value, for "expected an object, got ..." messages.

    Parameters
    ----------
    value : object
        A value from :func:`parse_json_body`.

    Returns
    -------
    str
        "null", "a string", "a number", "a boolean", "an array" or "an object".

    Notes
    -----
    ``bool`` is looked up before ``int`` would match it (exact type, not isinstance).
    """
    if value is None:
        return "null"
    return _JSON_TYPES.get(type(value), "an object")


def refuse_non_text(value: str, field: str, line_breaks: bool) -> None:
    """Refuse a string field holding control characters or unpaired surrogates.

    Parameters
    ----------
    value : str
        The field's value (or one item of a list field).
    field : str
        Its name for the message, e.g. ``"text"`` or ``"text[2]"``.
    line_breaks : bool
        Whether the field may hold line breaks (a text to translate) or must be one line (a key, a language).

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Such as "text[2] line 1: control character U+001B at character 5 (only tab is allowed; is this a
        binary file?)", "api_key: unpaired surrogate U+D800 at character 3 (not Unicode text)" or "source:
        control character U+000A at character 3 (a one-line field)".

    Notes
    -----
    In a text the rule and the words are the command line's
    (:func:`~transformer.command_checks.refuse_control_characters`): ``transformer translate`` and the server
    refuse the same inputs alike. A JSON escape of a lone surrogate (U+D800 to U+DFFF unpaired) gives a string
    that no UTF-8 encoder accepts (the tokenizer, ``hmac`` and the reply's encoder all raised), so it is refused
    here, once.
    """
    if line_breaks:
        lines = _LINE_BREAK.split(value)
        refuse_control_characters(lines, field)
        places = [(f"{field} line {number}", line) for number, line in enumerate(lines, start=1)]
    else:
        places = [(field, value)]
    for place, line in places:
        for position, character in enumerate(line, start=1):
            if "\ud800" <= character <= "\udfff":
                raise ValueError(
                    f"{place}: unpaired surrogate U+{ord(character):04X} at character {position} (not Unicode text)"
                )
            if not line_breaks and character != "\t" and unicodedata.category(character) == "Cc":
                raise ValueError(
                    f"{place}: control character U+{ord(character):04X} at character {position} (a one-line field)"
                )


def refuse_non_text_fields(values: dict[str, Any], text_fields: frozenset[str]) -> None:
    """Check every string of a parsed body: each field name, each string value and each string in a list.

    Parameters
    ----------
    values : dict
        The body's fields.
    text_fields : frozenset of str
        Fields that hold text to translate, where line breaks are allowed; in the others they are refused.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        From :func:`refuse_non_text`, naming the field (``text[3]`` for a list's fourth item).

    Notes
    -----
    Deeper values are left to the field checks, which refuse any nesting without quoting the input. A field
    name is checked too, as an unknown name is quoted in the reply.
    """
    for name, value in values.items():
        refuse_non_text(name, "field name", line_breaks=False)
        if isinstance(value, str):
            refuse_non_text(value, name, name in text_fields)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, str):
                    refuse_non_text(item, f"{name}[{index}]", name in text_fields)
