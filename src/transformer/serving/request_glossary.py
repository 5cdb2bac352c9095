"""The ``glossary`` field of a translation request, in either API: an object, pairs, or the file's lines."""

from typing import Any

from transformer.decoding.glossary import Glossary, GlossaryError

#: The most glossary entries one request may carry (each is a regular-expression alternative per sentence).
MAX_REQUEST_GLOSSARY_ENTRIES = 1000
#: The most characters of one glossary term in a request.
MAX_REQUEST_TERM_CHARS = 200
#: The most glossary matches one text of a request may have: the constrained search's host work per step grows
#: with a sentence's terms, and it runs between the other clients' decoder steps.
MAX_TERMS_PER_TEXT = 64


def glossary_from_field(value: Any, name: str = "glossary") -> Glossary | None:
    """Read a request's glossary: ``{"source": "target", ...}``, ``[["source", "target"], ...]`` or TSV text.

    Parameters
    ----------
    value : object
        The field's JSON value (or a form field's string); None when the request has none.
    name : str
        The field's name, for messages.

    Returns
    -------
    Glossary or None
        The checked glossary; None for no field (an empty one is an empty glossary).

    Raises
    ------
    GlossaryError
        For a value of another shape, a pair that is not two strings, more than
        :data:`MAX_REQUEST_GLOSSARY_ENTRIES` entries, a term over :data:`MAX_REQUEST_TERM_CHARS`
        characters, or an entry the glossary refuses (naming the entry or line).

    Notes
    -----
    The text form is what ``--glossary FILE`` holds, so a form post (LibreTranslate's clients send forms)
    can carry the same file; the object form is the natural one in JSON.
    """
    if value is None:
        return None
    if isinstance(value, str):
        glossary = Glossary.from_lines(value.splitlines(), name)
    elif isinstance(value, dict):
        glossary = Glossary.from_pairs(_string_pairs(list(value.items()), name), name)
    elif isinstance(value, list):
        glossary = Glossary.from_pairs(_string_pairs(value, name), name)
    else:
        raise GlossaryError(
            f"{name}: give an object of source term: target term, a list of [source, target] pairs, or "
            f"tab-separated lines; got {type(value).__name__}"
        )
    if len(glossary) > MAX_REQUEST_GLOSSARY_ENTRIES:
        raise GlossaryError(
            f"{name}: {len(glossary)} entries; a request may carry {MAX_REQUEST_GLOSSARY_ENTRIES}"
        )
    for entry in glossary.entries:
        if max(len(entry.source), len(entry.target)) > MAX_REQUEST_TERM_CHARS:
            raise GlossaryError(f"{entry.origin}: a term is over {MAX_REQUEST_TERM_CHARS} characters")
    return glossary


def _string_pairs(items: list[Any], name: str) -> list[tuple[str, str]]:
    """Check that every item is a (source, target) pair of strings, naming the first that is not."""
    pairs = []
    for number, item in enumerate(items, start=1):
        if not (isinstance(item, list | tuple) and len(item) == 2 and all(isinstance(t, str) for t in item)):
            raise GlossaryError(
                f"{name} entry {number}: expected a source term and a target term (two strings)"
            )
        pairs.append((item[0], item[1]))
    return pairs


def check_term_counts(glossary: Glossary | None, texts: list[str], name: str = "glossary") -> None:
    """Refuse a request whose text matches more glossary terms than one search should carry.

    Parameters
    ----------
    glossary : Glossary or None
        The request's glossary (None checks nothing).
    texts : list of str
        The request's texts (or the plain text of its HTML), before sentence splitting.
    name : str
        The field's name, for messages.

    Returns
    -------
    None

    Raises
    ------
    GlossaryError
        Naming the first text (``text[i]``) with more than :data:`MAX_TERMS_PER_TEXT` matches.

    Notes
    -----
    Each matched term adds a candidate per beam and a pass over the sentence's terms per candidate at every
    step, on the worker's thread between the running batch's steps: a 5,000-character text of one repeated
    term would carry a thousand constraints and slow every other client's steps for its whole search. Counted
    per text, so the bound holds whatever the sentence splitter makes of it.
    """
    if glossary is None:
        return
    for index, text in enumerate(texts):
        count = len(glossary.matches(text))
        if count > MAX_TERMS_PER_TEXT:
            raise GlossaryError(
                f"{name}: text[{index}] matches {count} glossary terms; a text may use at most {MAX_TERMS_PER_TEXT}"
            )
