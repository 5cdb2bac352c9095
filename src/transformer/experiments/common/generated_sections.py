"""``transformer experiment report NAME``: regenerate an experiment's section of EXPERIMENTS.md from its records.

A generated section sits between two marker lines naming the experiment directory it is built from::

    <!-- begin generated: table2-cpu -->
    ...
    <!-- end generated: table2-cpu -->

Everything between them is the experiment module's ``render_verdicts(plan, records, experiment_dir)``, a pure
function of the committed records, so no figure is typed by hand and a CI test can check that the committed
text still equals what the records give (:func:`check_document`).
"""

from dataclasses import dataclass
from pathlib import Path

from transformer.atomic_files import write_text_atomically
from transformer.experiments.common.results import RESULTS_FILE, read_results
from transformer.experiments.common.runner import TABLE_FILE, rebuild_reports
from transformer.experiments.registry import EXPERIMENTS, build_plan, experiment_part


def section_markers(section: str) -> tuple[str, str]:
    """Give the begin and end marker lines of a generated section.

    Parameters
    ----------
    section : str
        The section's name: the experiment directory's name, e.g. ``table2-cpu``.

    Returns
    -------
    tuple of str
        ``("<!-- begin generated: SECTION -->", "<!-- end generated: SECTION -->")``.

    Notes
    -----
    HTML comments, so the markers are invisible in rendered Markdown.
    """
    return f"<!-- begin generated: {section} -->", f"<!-- end generated: {section} -->"


def render_section(name: str, experiment_dir: Path) -> str:
    """Render an experiment's generated section from the records in its directory.

    Parameters
    ----------
    name : str
        The experiment, e.g. ``table2``.
    experiment_dir : Path
        The directory holding its ``results.jsonl`` and stored sentences.

    Returns
    -------
    str
        The section's Markdown.

    Raises
    ------
    ValueError
        When the experiment has no generated report yet, when the directory holds no records, records of
        another experiment, records of several scales, or a record without a key the report reads.

    Notes
    -----
    The plan is rebuilt at the records' scale (every record names it).
    """
    render = getattr(experiment_part(name, "verdicts"), "render_verdicts", None)
    if render is None:
        raise ValueError(f"{name} has no generated report yet (its module defines no render_verdicts)")
    records = read_results(experiment_dir / RESULTS_FILE)
    if not records:
        raise ValueError(f"--output-dir {experiment_dir}: no records in {experiment_dir / RESULTS_FILE}")
    others = sorted({str(record.get("experiment")) for record in records} - {name})
    if others:
        raise ValueError(f"{experiment_dir / RESULTS_FILE}: records of {', '.join(others)}, not of {name}")
    scales = sorted({str(record["scale"]) for record in records})
    if len(scales) != 1:
        raise ValueError(f"{experiment_dir / RESULTS_FILE}: records of several scales ({', '.join(scales)})")
    try:
        text: str = render(build_plan(name, scales[0]), records, experiment_dir)
    except KeyError as missing:
        raise _missing_key(experiment_dir / RESULTS_FILE, name, missing) from None
    return text


def _missing_key(results: Path, name: str, missing: KeyError) -> ValueError:
    """Name the results file and the key a report needed that one of its records lacks."""
    return ValueError(
        f"{results}: a record lacks {missing.args[0]!r}, which the {name} report reads "
        "(a damaged line, or a record from an older version of the experiment)"
    )


def replace_section(document: str, section: str, body: str, source: str) -> str:
    """Put ``body`` between a section's markers in a document's text.

    Parameters
    ----------
    document : str
        The document's text.
    section : str
        The section's name.
    body : str
        The new text between the markers (ending with a newline).
    source : str
        The document's name, for messages.

    Returns
    -------
    str
        The document with the section replaced; the rest unchanged byte for byte.

    Raises
    ------
    ValueError
        Naming the document and the marker when a marker is missing, repeated or out of order.

    Notes
    -----
    A missing, repeated or misordered marker is an error: the command never guesses where a table goes.
    """
    begin, end = section_markers(section)
    lines = document.splitlines(keepends=True)
    starts = [index for index, line in enumerate(lines) if line.rstrip("\n") == begin]
    stops = [index for index, line in enumerate(lines) if line.rstrip("\n") == end]
    if len(starts) != 1 or len(stops) != 1 or stops[0] < starts[0]:
        raise ValueError(
            f"{source}: expected one line '{begin}' and, after it, one line '{end}' "
            f"(found {len(starts)} and {len(stops)})"
        )
    return "".join(lines[: starts[0] + 1]) + body + "".join(lines[stops[0] :])


@dataclass(frozen=True)
class ReportOutcome:
    """What a report command found or did.

    Parameters
    ----------
    section : str
        The section's name.
    changed : bool
        True when the document's section differed from the records' (and, unless checking, was rewritten).
    name : str
        The experiment reported.
    experiment_dir : Path
        Its records' directory.
    document : Path
        The Markdown file holding the section.
    check : bool
        Whether the document was only compared, not written.
    table_changed : bool
        True when the directory's ``table.md`` differed from what the records give (and, unless checking, was
        rebuilt with the plots).

    Notes
    -----
    ``transformer experiment report --check`` exits with :attr:`status` 1 when ``changed`` or
    ``table_changed``.
    """

    section: str
    changed: bool
    name: str
    experiment_dir: Path
    document: Path
    check: bool
    table_changed: bool = False

    @property
    def status(self) -> int:
        """The command's exit status.

        Returns
        -------
        int
            1 when checking found the section or ``table.md`` stale, else 0.

        Notes
        -----
        Without ``--check`` a stale section or table is rewritten, which is success.
        """
        return 1 if self.check and (self.changed or self.table_changed) else 0

    def message(self) -> str:
        """Say in one line what the report found or did.

        Returns
        -------
        str
            That the section differs (with the command that regenerates it) when :attr:`status` is 1; else
            that it was rewritten or is already current.

        Notes
        -----
        The command prints it on standard error when :attr:`status` is 1, on standard output otherwise.
        """
        if self.status:
            stale = [f"{self.document}: section {self.section}"] if self.changed else []
            stale += [str(self.experiment_dir / TABLE_FILE)] if self.table_changed else []
            return (
                f"{' and '.join(stale)} differ{'s' if len(stale) == 1 else ''} from {self.experiment_dir}'s "
                f"records; run transformer experiment report {self.name} --output-dir {self.experiment_dir}"
            )
        table = f"; {self.experiment_dir / TABLE_FILE} rebuilt" if self.table_changed else ""
        return f"{self.document}: section {self.section} {'rewritten' if self.changed else 'already current'}{table}"


def update_document(name: str, experiment_dir: Path, document: Path, check: bool) -> ReportOutcome:
    """Regenerate an experiment's section of a document, or check that it is current.

    Parameters
    ----------
    name : str
        The experiment.
    experiment_dir : Path
        Its records' directory; the directory's name is the section's.
    document : Path
        The Markdown file holding the section's markers (EXPERIMENTS.md).
    check : bool
        Only compare; write nothing.

    Returns
    -------
    ReportOutcome
        Whether the section changed.

    Raises
    ------
    ValueError
        For a missing document, missing markers or records that cannot be reported (:func:`render_section`).

    Notes
    -----
    The document is rewritten atomically and only when the section differs, so an unchanged report leaves the
    file (and its modification time) alone. The directory's ``table.md`` is compared too (a plan that gained
    a row, a renderer that changed) and reported when it differs. Unless checking, the table and the plots
    are rebuilt every time, as a run would: a change to a plot has no text to compare, so a report is what
    carries it to the committed pictures.
    """
    section = experiment_dir.resolve().name
    if not document.is_file():
        raise ValueError(f"--document {document}: no such file")
    current = document.read_text(encoding="utf-8")
    updated = replace_section(current, section, render_section(name, experiment_dir), str(document))
    records = read_results(experiment_dir / RESULTS_FILE)  # one experiment, one scale: render_section checked
    plan = build_plan(name, str(records[0]["scale"]))
    tables = experiment_part(name, "report")
    if tables is None:
        raise ValueError(f"{name} has no report module to render its table")
    try:  # before anything is written: records the table cannot read leave the document as it was
        table = tables.render_table(plan, records)
    except KeyError as missing:
        raise _missing_key(experiment_dir / RESULTS_FILE, name, missing) from None
    changed = updated != current
    if changed and not check:
        write_text_atomically(document, updated)
    table_path = experiment_dir / TABLE_FILE
    table_changed = not table_path.is_file() or table_path.read_text(encoding="utf-8") != table
    if not check:
        rebuild_reports(plan, experiment_dir)
    return ReportOutcome(section, changed, name, experiment_dir, document, check, table_changed)


def experiment_of_section(section: str) -> str:
    """Name the experiment a section's directory belongs to, from the directory's name.

    Parameters
    ----------
    section : str
        An experiment directory's name, e.g. ``table2-cpu`` or ``attention-scoring-cpu-3seeds``.

    Returns
    -------
    str
        The longest registered experiment name the section starts with, followed by ``-``.

    Raises
    ------
    ValueError
        When no experiment matches.

    Notes
    -----
    The longest match, so ``attention-scoring-...`` is never read as a shorter name.
    """
    matches = [name for name in EXPERIMENTS if section.startswith(f"{name}-")]
    if not matches:
        raise ValueError(f"generated section {section!r}: its name starts with no experiment's name")
    return max(matches, key=len)


def check_document(document: Path, experiments_root: Path) -> list[str]:
    """Name every generated section of a document that no longer equals what its records give.

    Parameters
    ----------
    document : Path
        The Markdown file (EXPERIMENTS.md).
    experiments_root : Path
        The folder holding the experiment directories the sections are named after (``experiments/``).

    Returns
    -------
    list of str
        The stale sections' names; empty when every section is current.

    Notes
    -----
    A section is rendered from ``experiments_root/SECTION`` by the experiment its name starts with
    (:func:`experiment_of_section`). Used by the CI test, so a record committed without its regenerated
    table fails the build.
    """
    text = document.read_text(encoding="utf-8")
    prefix = "<!-- begin generated: "
    stale = []
    for line in text.splitlines():
        if line.startswith(prefix) and line.endswith(" -->"):
            section = line[len(prefix) : -len(" -->")]
            name = experiment_of_section(section)
            body = render_section(name, experiments_root / section)
            if replace_section(text, section, body, str(document)) != text:
                stale.append(section)
    return stale
