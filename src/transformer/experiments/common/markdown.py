"""Markdown tables, the form of every experiment's ``table.md`` and generated EXPERIMENTS.md section."""

from collections.abc import Iterable, Sequence


def markdown_row(cells: Sequence[object]) -> str:
    """Write one row of a Markdown table.

    Parameters
    ----------
    cells : sequence of object
        The cells, each written with ``str``.

    Returns
    -------
    str
        ``| a | b | c |``.

    Notes
    -----
    No escaping: the experiments' cells are numbers, names and short phrases without ``|``.
    """
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


def markdown_table(headings: Sequence[object], rows: Iterable[Sequence[object]]) -> list[str]:
    """Write a Markdown table: its heading row, the rule under it and one line per row.

    Parameters
    ----------
    headings : sequence of object
        The column headings.
    rows : iterable of sequence of object
        The rows, each with as many cells as there are headings.

    Returns
    -------
    list of str
        The table's lines, without a trailing blank line.

    Raises
    ------
    ValueError
        For a row whose number of cells differs from the headings'.

    Notes
    -----
    Every column is left-aligned (``---``), as in every table the experiments have written, so tables built
    before this helper existed re-render byte for byte.
    """
    lines = [markdown_row(headings), "|" + "---|" * len(headings)]
    for row in rows:
        if len(row) != len(headings):
            raise ValueError(f"a table row has {len(row)} cells for {len(headings)} headings: {list(row)}")
        lines.append(markdown_row(row))
    return lines
