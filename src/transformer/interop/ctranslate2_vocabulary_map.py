"""A vocabulary shortlist as CTranslate2's vocabulary map (``vmap.txt``), so both engines use the same one.

CTranslate2 reads ``vmap.txt`` from a model directory when a translation asks for ``use_vmap=True``: each line
is a source piece, a tab, and the target pieces it allows, separated by spaces; the line whose source side is
empty lists the pieces every batch may use. :func:`vocabulary_map_text` writes our
:class:`~transformer.data.shortlist.Shortlist` in that form: one line per source piece with candidates, and
the frequent and special pieces on the empty key's line.

CTranslate2 restricts a whole batch to the union of its sentences' candidates, where this project restricts
each sentence to its own; the two agree sentence by sentence only when each is translated alone (batch 1).
"""

from transformer.data.shortlist import Shortlist

#: The file CTranslate2 reads its vocabulary map from, in the model directory.
VOCABULARY_MAP_FILE = "vmap.txt"


def vocabulary_map_text(shortlist: Shortlist, source_pieces: list[str], target_pieces: list[str]) -> str:
    """Write a shortlist as the text of CTranslate2's ``vmap.txt``.

    Parameters
    ----------
    shortlist : Shortlist
        The table (built for the vocabularies whose pieces are given).
    source_pieces, target_pieces : list of str
        ``pieces[i]`` is the piece of id ``i`` on each side (:func:`~transformer.interop.ctranslate2_spec.vocabulary_pieces`).

    Returns
    -------
    str
        Lines ``SOURCE<TAB>TARGET TARGET ...``, first the always-allowed line with an empty source.

    Raises
    ------
    ValueError
        For a piece with a space, tab or newline, which the format cannot hold.

    Notes
    -----
    CTranslate2 splits the source side on spaces too (an n-gram key), so a single-piece key must not hold
    one; SentencePiece writes spaces as "▁" and Marian's vocabularies do the same.
    """
    for piece in (*source_pieces, *target_pieces):
        if any(character in piece for character in " \t\n\r"):
            raise ValueError(
                f"piece {piece!r} holds whitespace, which CTranslate2's vocabulary map cannot hold"
            )
    lines = ["\t" + " ".join(target_pieces[token_id] for token_id in shortlist.always.tolist())]
    offsets = shortlist.offsets.tolist()
    candidates = shortlist.candidates.tolist()
    for source_id in range(min(shortlist.src_vocab_size, len(source_pieces))):
        targets = candidates[offsets[source_id] : offsets[source_id + 1]]
        if targets:
            lines.append(
                source_pieces[source_id] + "\t" + " ".join(target_pieces[token_id] for token_id in targets)
            )
    return "\n".join(lines) + "\n"
