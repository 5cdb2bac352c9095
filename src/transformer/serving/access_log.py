"""uvicorn's logging, with API keys kept out of the access log.

``GET /v1/attention`` takes its key as ``?api_key=`` (a page opened from a link can send no header), and
uvicorn's access log writes every request's path with its query string: each key sent that way landed in the
log in clear. :class:`RedactKeysFilter` rewrites the logged path before it is formatted.
"""

import copy
import logging
import re
from typing import Any
from urllib.parse import unquote_plus

from uvicorn.config import LOGGING_CONFIG

#: Query field names (lower case, ``-`` read as ``_``) whose values are never logged: any name holding one
#: of these words (``api_key``, ``key``, ``access_token``, ``client_secret``, ``password``, ...).
SECRET_FIELD_WORDS = ("key", "token", "secret", "password", "passwd", "auth", "signature", "credential")
#: What a redacted value is logged as.
REDACTED = "[redacted]"
_QUERY_FIELD = re.compile(r"(?P<name>[^&=?]*)(?P<value>=[^&]*)?")


def redact_query(path: str) -> str:
    """Replace the values of key-like query fields in a logged path.

    Parameters
    ----------
    path : str
        A path with an optional query string, as uvicorn logs it (``/v1/attention?api_key=...&text=...``).

    Returns
    -------
    str
        The same path, each key-like field's value replaced by ``[redacted]``; other fields unchanged.

    Notes
    -----
    Field names are percent-decoded before they are compared (``api%5Fkey`` is ``api_key``), so an encoded
    name cannot slip a key through. A field without ``=`` has no value to hide.
    """
    route, separator, query = path.partition("?")
    if not separator:
        return path

    def redact(match: re.Match[str]) -> str:
        name = unquote_plus(match.group("name")).lower().replace("-", "_")
        if match.group("value") and any(word in name for word in SECRET_FIELD_WORDS):
            return f"{match.group('name')}={REDACTED}"
        return match.group(0)

    return f"{route}?{_QUERY_FIELD.sub(redact, query)}"


class RedactKeysFilter(logging.Filter):
    """Redact key-like query fields in uvicorn's access log records.

    Notes
    -----
    uvicorn logs ``'%s - "%s %s HTTP/%s" %d'`` with the client, method, path (query included), HTTP version
    and status as the record's arguments; the path (the third) is rewritten with :func:`redact_query`.
    Records of another shape pass unchanged.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record's path argument; keep every record.

        Parameters
        ----------
        record : logging.LogRecord
            An access log record.

        Returns
        -------
        bool
            Always True: nothing is dropped, only redacted.

        Notes
        -----
        Runs before formatting, so no handler ever sees the key.
        """
        arguments = record.args
        if isinstance(arguments, tuple) and len(arguments) == 5 and isinstance(arguments[2], str):
            record.args = (*arguments[:2], redact_query(arguments[2]), *arguments[3:])
        return True


def logging_config() -> dict[str, Any]:
    """Build uvicorn's default logging configuration with :class:`RedactKeysFilter` on the access log.

    Returns
    -------
    dict
        A :func:`logging.config.dictConfig` dictionary for ``uvicorn.Config(log_config=...)``.

    Notes
    -----
    A copy: uvicorn's own dictionary is left as it is. The filter sits on the access handler, so it applies
    to every record that handler writes.
    """
    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["redact_keys"] = {"()": RedactKeysFilter}
    config["handlers"]["access"]["filters"] = ["redact_keys"]
    return config
