"""Write files and directories so that no reader ever sees them half-written: a hidden sibling, then a rename.

Every writer in the package goes through this module: checkpoints, vocabularies, corpora, translations,
figures, caches. A crash (even SIGKILL) at any instant leaves either the old version or the complete new one.
What is not a regular file is never replaced: a symbolic link is followed and its target written, and a device,
a FIFO or a process's open file (``/dev/null``, ``/dev/stdout``) is written straight (:func:`write_destination`).
"""

import errno
import json
import os
import shutil
import stat
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

#: Permission bits of a new file before the umask, as ``open`` uses.
_DEFAULT_FILE_MODE = 0o666
#: Most symbolic links followed from one path, as Linux's own limit (``ELOOP`` beyond).
_MAX_SYMLINKS = 40


def _current_umask() -> int:
    """Read the process umask (setting it back at once: there is no read-only call)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def temporary_sibling(path: Path, kind: str = "tmp") -> Path:
    """Name a hidden, unique path beside ``path`` that keeps its suffix.

    Parameters
    ----------
    path : pathlib.Path
        The destination the temporary path stands in for.
    kind : str
        A word in the name saying what the sibling is for (``"tmp"`` while writing, ``"old"`` for a replaced
        directory on its way out).

    Returns
    -------
    pathlib.Path
        ``.{stem}.{kind}-{random hex}{suffix}`` in the same directory.

    Notes
    -----
    The same directory keeps ``os.replace`` on one file system, where it is atomic. The suffix is kept because
    some writers (matplotlib) pick the format from it; the leading dot hides the file from listings and from
    the globs that read corpora and checkpoints.
    """
    return path.with_name(f".{path.stem}.{kind}-{uuid.uuid4().hex[:12]}{path.suffix}")


def write_destination(path: Path) -> tuple[Path, bool]:
    """Say where writing ``path`` goes, and whether straight to it rather than by a sibling and a rename.

    Parameters
    ----------
    path : pathlib.Path
        The file a command was asked to write.

    Returns
    -------
    tuple of (pathlib.Path, bool)
        ``(path, True)`` for what must be written in place: a device, a FIFO, a socket, or a process's open
        file reached through ``/proc`` (``/dev/stdout``, ``/dev/fd/1``, ``/proc/self/fd/1``); otherwise the
        path after following every symbolic link (itself when it is none, the target when the link dangles)
        and False.

    Raises
    ------
    OSError
        With ``ELOOP``, naming ``path``, for links that lead back to themselves or more than 40 deep.

    Notes
    -----
    Renaming a new file over ``path`` replaces whatever the name was: a symbolic link became a regular file
    (the target kept its old text), and as root ``/dev/null`` or ``/dev/stdout`` became one for every
    process. A device or a pipe cannot be replaced by a rename and has no half-written state to protect, and a
    ``/proc`` link names the open file itself: renaming beside it is impossible, and replacing the file it
    points to would drop what the shell appended to it before.
    """
    path = Path(path)
    try:
        kind = os.stat(path).st_mode  # follows links
    except OSError:
        kind = None  # missing, dangling or a loop: nothing to write in place
    chain = _symlink_chain(path)
    through_proc = any(_is_process_file_link(link) for link in chain[:-1])
    if kind is not None and (through_proc or not (stat.S_ISREG(kind) or stat.S_ISDIR(kind))):
        return path, True
    return chain[-1], False


def _symlink_chain(path: Path) -> list[Path]:
    """List ``path``, each symbolic link on from it, and last the first name that is no link."""
    chain = [path]
    while chain[-1].is_symlink():
        if len(chain) > _MAX_SYMLINKS:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(path))
        chain.append(chain[-1].parent / os.readlink(chain[-1]))  # an absolute target replaces the parent
    return chain


def _is_process_file_link(link: Path) -> bool:
    """Whether a symbolic link lives under ``/proc`` (``/proc/PID/fd/N``): it names an open file, not a path."""
    return Path(os.path.realpath(link.parent)).is_relative_to("/proc")


@contextmanager
def atomic_write(path: Path, mode: str = "wb", encoding: str | None = None) -> Iterator[IO[Any]]:
    """Open a temporary sibling of ``path`` for writing; rename it over ``path`` when the block succeeds.

    Parameters
    ----------
    path : pathlib.Path
        Destination; its parent directory is created if missing.
    mode : str
        ``"wb"`` (bytes) or ``"w"`` (text).
    encoding : str or None
        Text encoding for ``mode="w"`` (UTF-8 when None); must be None for bytes.

    Returns
    -------
    Iterator[IO]
        A context manager yielding the open temporary file.

    Notes
    -----
    On leaving the block the file is flushed and fsynced, given the mode a plain ``open`` would (0666 less
    the umask: ``tempfile.mkstemp`` would leave 0600, which outlives the rename and hides a vocabulary or a
    checkpoint from other users), then renamed over ``path``. If the block raises (a failed checksum, a full
    disk, Ctrl-C), the temporary file is removed and ``path`` is left exactly as it was. An OSError of the
    writing itself (an unwritable folder, a full disk) names ``path``, the file asked for, not the hidden
    temporary one, which the user never named and which no longer exists (:func:`name_destination`). A
    symbolic link is followed and its target replaced; a device, FIFO or process's open file is opened for
    appending and written straight (:func:`write_destination`), the link or node itself left as it was.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_write: mode must be 'wb' or 'w', got {mode!r}")
    text_encoding = (encoding or "utf-8") if mode == "w" else None
    newline = "" if mode == "w" else None
    requested = Path(path)
    with name_destination(requested):
        path, in_place = write_destination(requested)
    if in_place:  # a device, a FIFO, a process's open file: appended to, never replaced nor synced
        with name_destination(requested):
            stream = open(path, mode.replace("w", "a"), encoding=text_encoding, newline=newline)  # noqa: SIM115 (closed by the with below; only the opening names the destination)
        with stream:
            yield stream
        return
    with name_destination(path):
        path.parent.mkdir(parents=True, exist_ok=True)
    temporary = temporary_sibling(path)
    try:
        handle: IO[Any]
        with name_destination(path, temporary):
            handle = open(temporary, mode.replace("w", "x"), encoding=text_encoding, newline=newline)  # noqa: SIM115 (closed by the with below; only the opening names the destination)
        with handle:
            yield handle
            with name_destination(path, temporary):
                handle.flush()
                os.fsync(handle.fileno())
        with name_destination(path, temporary):
            os.chmod(temporary, _DEFAULT_FILE_MODE & ~_current_umask())
            os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


@contextmanager
def name_destination(destination: Path, temporary: Path | None = None) -> Iterator[None]:
    """Re-raise an OSError of writing ``destination`` as one that names it, not its temporary sibling.

    Parameters
    ----------
    destination : pathlib.Path
        The file or directory the caller asked for.
    temporary : pathlib.Path or None
        Its hidden temporary sibling, if one is being written.

    Returns
    -------
    Iterator[None]
        A context manager around one step of the writing.

    Notes
    -----
    The new error keeps the errno and its class (PermissionError, OSError with ENOSPC, ...), so callers that
    catch OSError still do; its text reads "cannot write DESTINATION: Permission denied". The temporary
    file's name is a detail of the writing, gone once it fails, and naming it sent users looking for a file
    they never asked for.
    """
    try:
        yield
    except OSError as error:
        reason = error.strerror or str(error)
        blocking_file = next((folder for folder in destination.parents if folder.is_file()), None)
        if blocking_file is not None:
            reason = f"{blocking_file} is a file, not a folder"
        message = f"cannot write {destination}: {reason}"
        try:
            named = type(error)(message)
        except TypeError:  # a subclass with a constructor of its own
            named = OSError(message)
        named.errno = error.errno  # strerror stays unset: it would replace the message in str(named)
        raise named from None


def write_bytes_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one step.

    Parameters
    ----------
    path : pathlib.Path
        Destination; its parent directory is created if missing.
    data : bytes
        The complete file content.

    Returns
    -------
    None

    Notes
    -----
    See :func:`atomic_write`: after a crash the file holds either the old content or the new, never a prefix.
    """
    with atomic_write(path, "wb") as handle:
        handle.write(data)


def write_text_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with UTF-8 ``text`` in one step.

    Parameters
    ----------
    path : pathlib.Path
        Destination; its parent directory is created if missing.
    text : str
        The complete file content; line endings are written as given (newlines are not translated).

    Returns
    -------
    None

    Raises
    ------
    UnicodeEncodeError
        For text that cannot be encoded as UTF-8 (a lone surrogate); ``path`` is left untouched.

    Notes
    -----
    Encoded here, before the file is opened, so text that cannot be encoded fails without touching ``path``.
    """
    write_bytes_atomically(path, text.encode("utf-8"))


def write_json_atomically(path: Path, values: Any) -> None:
    """Replace ``path`` with ``values`` as indented JSON in one step.

    Parameters
    ----------
    path : pathlib.Path
        Destination; its parent directory is created if missing.
    values : Any
        JSON-serialisable data.

    Returns
    -------
    None

    Raises
    ------
    TypeError
        From ``json.dumps``, for a value that is not JSON-serialisable; ``path`` is left untouched.
    ValueError
        From ``json.dumps``, for a circular reference; ``path`` is left untouched.

    Notes
    -----
    The JSON is serialised before the file is opened, so a value that cannot be serialised fails without
    touching ``path``.
    """
    write_text_atomically(path, json.dumps(values, indent=1))


def replace_directory(source: Path, destination: Path) -> None:
    """Move a completely written directory into place, replacing an existing one.

    Parameters
    ----------
    source : pathlib.Path
        The finished directory (a sibling of ``destination``).
    destination : pathlib.Path
        Where it belongs.

    Returns
    -------
    None

    Notes
    -----
    POSIX cannot rename a directory over a non-empty one, so an existing destination is first renamed aside:
    at every instant a complete version exists under one of the two names, and the old one is deleted last.
    Between the two renames ``destination`` itself is absent; a crash exactly there leaves the old version
    under its hidden ``.{name}.old-*`` sibling, to be renamed back by hand.
    """
    if destination.exists():
        trash = temporary_sibling(destination, "old")
        os.replace(destination, trash)
        os.replace(source, destination)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.replace(source, destination)


def _prepare_files_for_publishing(directory: Path) -> None:
    """Flush every file under ``directory`` to disk and give it a plain file's mode, before the rename.

    Some writers create owner-only files (safetensors' ``save_file`` leaves 0600), which would hide a
    checkpoint from the other users of a shared machine; a file written here gets what ``open`` would give.
    """
    mode = _DEFAULT_FILE_MODE & ~_current_umask()
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
            os.chmod(path, mode)


@contextmanager
def staged_directory(destination: Path) -> Iterator[Path]:
    """Give a hidden temporary sibling directory to fill; move it to ``destination`` when the block succeeds.

    Parameters
    ----------
    destination : pathlib.Path
        The final directory; an existing one is replaced (callers check first that it may be).

    Returns
    -------
    Iterator[pathlib.Path]
        A context manager yielding the empty temporary directory.

    Notes
    -----
    On success every file is fsynced and given a plain file's mode (0666 less the umask), then
    :func:`replace_directory` publishes the directory; readers see either the old directory or the complete
    new one (checkpoints, converted models). On an exception the temporary directory is removed and
    ``destination`` is left as it was. A symbolic link is followed, so its target is replaced and the link
    kept; anything there that is not a directory (a file, a FIFO, a device) is refused with an OSError naming
    ``destination``, where renaming it aside used to hide it under a ``.old-*`` name.
    """
    requested = Path(destination)
    with name_destination(requested):
        destination = _symlink_chain(requested)[-1]
        if destination.exists() and not destination.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(destination))
    temporary = temporary_sibling(destination)
    with name_destination(destination, temporary):
        destination.parent.mkdir(parents=True, exist_ok=True)
        temporary.mkdir()
    try:
        yield temporary
        with name_destination(destination, temporary):
            _prepare_files_for_publishing(temporary)
            replace_directory(temporary, destination)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
