"""Building the native kernels' C++ extension with PyTorch's extension builder, once per machine and process.

The source (``decoder_step.cpp``, package data beside this module) is compiled on first use by
``torch.utils.cpp_extension.load``, which caches the library under ``TORCH_EXTENSIONS_DIR`` (by default
``~/.cache/torch_extensions``) keyed on the source and the flags, and serialises concurrent first builds with a
lock file. Anything that stops the build (opted out, no compiler, no ninja, a compiler error) is reported as one
line, and decoding keeps its Python path.
"""

import hashlib
import os
import shutil
import sys
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType

from torch.utils import cpp_extension

#: Set to "off" (or "0", "no", "false") to decode with the Python step even where the native one builds.
NATIVE_STEP_VARIABLE = "TRANSFORMER_NATIVE_STEP"
#: The C++ source, shipped as package data beside this module.
SOURCE_FILE = Path(__file__).with_name("decoder_step.cpp")
#: The extension's name, before the suffix of :func:`extension_name`.
EXTENSION_NAME = "transformer_decoder_step"
#: A build lock older than this is a killed build's: PyTorch's builder would wait for it forever.
STALE_LOCK_SECONDS = 600.0


@dataclass(frozen=True)
class NativeBuild:
    """The outcome of building (or loading) the extension.

    Parameters
    ----------
    module : ModuleType or None
        The compiled extension; None when it could not be built.
    note : str
        One line: how long the build or load took, or why there is no extension.

    Notes
    -----
    Kept per process by :func:`build_native_extension`, so a failed build is not retried on every search.
    """

    module: ModuleType | None
    note: str


@cache
def build_native_extension() -> NativeBuild:
    """Compile the C++ step once per machine (PyTorch caches the build) and load it once per process.

    Returns
    -------
    NativeBuild
        The module, or None with the reason: opted out, no compiler, no ninja, or the compiler's failure.

    Notes
    -----
    The first build compiles against PyTorch's headers, about 30-40 s on 2 cores; later processes load the
    cached library in about a second. The result is memoised per process (``functools.cache``): one build or
    one failure message, whoever asks. The compiler's output stays in the exception, reduced here to its last
    line, because a search must not fail for want of a faster path.
    """
    setting = os.environ.get(NATIVE_STEP_VARIABLE, "").strip().lower()
    if setting in ("off", "0", "no", "false"):
        return NativeBuild(None, f"native decoder step: off ({NATIVE_STEP_VARIABLE}={setting})")
    if setting not in ("", "on", "1", "yes", "true"):  # a typo must not silently mean "on"
        return NativeBuild(
            None, f"native decoder step: off ({NATIVE_STEP_VARIABLE}={setting!r} is not on or off)"
        )
    compiler = os.environ.get("CXX", "c++")
    if shutil.which(compiler) is None:
        return NativeBuild(None, f"native decoder step: no C++ compiler ({compiler!r} not on PATH)")
    _put_ninja_on_path()
    if not cpp_extension.is_ninja_available():
        return NativeBuild(None, "native decoder step: ninja is not on PATH (pip install ninja)")
    name = extension_name()
    _remove_stale_lock(name)
    started = time.perf_counter()
    try:
        module = cpp_extension.load(
            name=name, sources=[str(SOURCE_FILE)], extra_cflags=["-O2"], verbose=False
        )
    except (RuntimeError, OSError, ImportError) as error:
        last_line = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
        return NativeBuild(None, f"native decoder step: build failed ({last_line})")
    seconds = time.perf_counter() - started
    return NativeBuild(module, f"native decoder step: C++ (built or loaded in {seconds:.1f} s)")


def _put_ninja_on_path() -> None:
    """Put this interpreter's scripts directory on PATH when ninja is there but PATH lacks it.

    PyTorch's builder runs ``ninja`` by name; ``pip install ninja`` puts it beside ``python`` in a virtual
    environment, which is not on PATH when the environment's python is run without activating it (a service,
    ``/venv/bin/python``).
    """
    scripts = Path(sys.executable).parent
    if shutil.which("ninja") is None and (scripts / "ninja").exists():
        os.environ["PATH"] = os.pathsep.join([str(scripts), os.environ.get("PATH", "")])


def extension_name() -> str:
    """Name the extension after the source file's location, so each installation keeps its own build.

    Returns
    -------
    str
        ``transformer_decoder_step_`` and 8 hex digits of the source path's SHA-256.

    Notes
    -----
    PyTorch's builder keys its cache directory on the name and writes the source's path into its build file,
    so two installations sharing one name (two virtual environments, a checkout and a worktree) would rebuild
    each other's library, 30-40 s each time, at every switch.
    """
    digest = hashlib.sha256(str(SOURCE_FILE.resolve()).encode()).hexdigest()[:8]
    return f"{EXTENSION_NAME}_{digest}"


def _remove_stale_lock(name: str) -> None:
    """Delete a build lock left by a killed build (older than :data:`STALE_LOCK_SECONDS`).

    PyTorch's builder serialises concurrent first builds with a lock file in the build directory and waits
    while it exists; a build killed mid-way (a timeout, SIGKILL) leaves it behind, and every later process
    would then hang in its translator's constructor.
    """
    try:
        lock = Path(cpp_extension._get_build_directory(name, False)) / "lock"
        if lock.exists() and time.time() - lock.stat().st_mtime > STALE_LOCK_SECONDS:
            lock.unlink(missing_ok=True)
    except (OSError, AttributeError):  # no such private helper in another PyTorch, or an unreadable directory
        return
