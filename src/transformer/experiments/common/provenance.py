"""Where a result comes from: the commit of the code that made it, its uncommitted changes, and the machine.

Every experiment record carries the commit (``+dirty`` when the package's files had uncommitted changes) and
the CPU or GPU it ran on. Issue #29 found committed results made on uncommitted trees, which no commit can
reproduce, so the runner refuses such a tree unless ``--allow-dirty`` is given (:func:`refuse_dirty_tree`).
"""

import subprocess
from dataclasses import dataclass
from pathlib import Path

from transformer.device import describe_cpu


def describe_machine(device: str) -> str:
    """Name the hardware a run trained on, for its results line.

    Parameters
    ----------
    device : str
        The run's ``train.device``.

    Returns
    -------
    str
        The GPU's name when the run used CUDA, else the CPU model with the flags that decide its speed.

    Notes
    -----
    Timings and the precision chosen by ``precision: auto`` depend on it (a CPU with AMX trains in bf16, one
    without in fp32), so every result says where it was measured.
    """
    import torch

    if device.startswith("cuda") or (device == "auto" and torch.cuda.is_available()):
        return str(torch.cuda.get_device_name())
    return describe_cpu()


@dataclass(frozen=True)
class SourceState:
    """The commit of the source tree the package runs from, and its uncommitted changes.

    Parameters
    ----------
    commit : str or None
        ``git rev-parse HEAD``; None outside a git checkout (an installed release).
    modified : tuple of str
        Files of the package (``src/transformer``) with uncommitted changes, new files included.

    Notes
    -----
    A result is traceable only to a commit that holds the code that made it; :attr:`label` is what records
    carry, ``+dirty`` marking a tree with changes.
    """

    commit: str | None
    modified: tuple[str, ...] = ()

    @property
    def label(self) -> str | None:
        """The commit as records carry it.

        Returns
        -------
        str or None
            The commit, with ``+dirty`` when files are modified; None outside a checkout.

        Notes
        -----
        The spelling the committed records have always used, so old and new records read alike.
        """
        if self.commit is None:
            return None
        return self.commit + ("+dirty" if self.modified else "")


def source_state() -> SourceState:
    """Read the commit and the modified files of the package's source tree.

    Returns
    -------
    SourceState
        The commit (None outside a git checkout) and the modified tracked files.

    Notes
    -----
    Asked of the package's own directory, not the working directory: the code that trains is what matters.
    """
    source = Path(__file__).resolve().parent
    try:
        commit = _git(["rev-parse", "HEAD"], source).strip()
        # The package's own files only: the experiment's results.jsonl, which the runs append to, is tracked
        # too, and would otherwise make every run after the first "dirty". New modules count (untracked).
        status = _git(["status", "--porcelain", "--untracked-files=normal", "--", "."], source)
    except (OSError, subprocess.SubprocessError):
        return SourceState(None)
    return SourceState(commit, tuple(line[3:] for line in status.splitlines() if line.strip()))


def _git(arguments: list[str], directory: Path) -> str:
    """Run one git command in ``directory`` and return its standard output."""
    return subprocess.run(
        ["git", *arguments], cwd=directory, capture_output=True, text=True, check=True, timeout=10
    ).stdout


def git_commit() -> str | None:
    """Name the commit of the source tree the package runs from, if it is a git checkout.

    Returns
    -------
    str or None
        ``git rev-parse HEAD`` of the package's directory (with ``+dirty`` when files are modified), None
        outside a git checkout.

    Notes
    -----
    Recorded with every result so a table can be traced to the code that produced it.
    """
    return source_state().label


def refuse_dirty_tree(state: SourceState, allow_dirty: bool) -> None:
    """Refuse to train on a source tree with uncommitted changes, unless asked to.

    Parameters
    ----------
    state : SourceState
        The package's source tree.
    allow_dirty : bool
        ``--allow-dirty``: train anyway; the records then carry ``+dirty`` and ``"dirty": true``.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Naming the first modified files when the tree has uncommitted changes and ``allow_dirty`` is False.

    Notes
    -----
    Issue #29 found committed results made on uncommitted trees, which no commit reproduces. Outside a git
    checkout (an installed release, whose version names the code) nothing is refused.
    """
    if state.modified and not allow_dirty:
        shown = ", ".join(state.modified[:3]) + (", ..." if len(state.modified) > 3 else "")
        raise ValueError(
            f"the source tree has uncommitted changes ({len(state.modified)} file(s): {shown}); commit them "
            "so every result names the code that made it, or pass --allow-dirty to record the runs as dirty"
        )
