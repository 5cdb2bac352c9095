"""The settings of ``transformer serve``, checked when created."""

import math
from dataclasses import dataclass, field
from pathlib import Path

from transformer.autotune.linear_probe import FP32_KERNEL_CHOICES
from transformer.config.search_limits import MIN_SENTENCE_CHARS
from transformer.decoding.inference_models import TRANSLATION_PRECISIONS
from transformer.serving.model_worker import BATCHING_MODES
from transformer.typed_fields import check_choice

#: The values of ``--engine``.
SERVE_ENGINES = ("pytorch", "ctranslate2", "onnxruntime")
#: The most hypotheses per sentence a client may ask for: a beam of thousands would hold the batch's memory.
MAX_BEAM_SIZE = 16
#: Most MBR candidates a request may ask for: N candidates cost N rows, as a beam of N does, so they are capped
#: as the beam is (64 candidates searched 64-wide beams while ``beam`` stopped at 16).
MAX_MBR_CANDIDATES = MAX_BEAM_SIZE


@dataclass(frozen=True)
class ServeConfig:
    """What ``transformer serve`` serves and how.

    Parameters
    ----------
    checkpoints : dict of str to tuple of Path
        Model name to checkpoint (or run) directories: one, or several for an ensemble that averages their
        probabilities; the first name is the default model. A bare Path is taken as a one-model tuple.
    host : str
        Address to listen on; 127.0.0.1 keeps the server local.
    port : int
        TCP port (0: any free port).
    engine : {"pytorch", "ctranslate2", "onnxruntime"}
        Inference engine; "ctranslate2" serves directories from ``transformer convert --to ctranslate2``
        and batches per request (CTranslate2 exposes no decoder step); "onnxruntime" serves directories from
        ``transformer convert --to onnx`` with our searches, batched per request.
    device : str
        "auto", "cpu", "cuda" or "cuda:N".
    precision : {"fp32", "bf16", "int8"}
        Weights and arithmetic, as ``transformer translate --precision``.
    fp32_kernels : {"auto", "mkl", "onednn"}
        At fp32 on the CPU, MKL's or oneDNN's linear kernel per layer shape, as ``transformer translate
        --fp32-kernels`` (PyTorch engine only).
    shortlist : bool
        Decode each model with its checkpoint's vocabulary shortlist (``transformer serve --shortlist``);
        with CTranslate2, the export's vocabulary map.
    batching : {"continuous", "request"} or ""
        Step-level batching, or the request-level baseline; "" (the default) is continuous for the PyTorch
        engine and request for the others, which have no step to batch at (as ``serve --batching`` defaults).
    max_batch_tokens : int
        Source tokens times beam size over the running sentences; bounds the work (and memory) of a step.
    max_queue : int
        Sentences waiting to join the batch; beyond it requests get 503 with ``Retry-After``, and a request
        with more sentences than it holds gets 413 (it could never be queued).
    admit_every : int
        Continuous batching: while sentences decode, waiting ones join every this many decoder steps (or as
        soon as :data:`~transformer.serving.model_worker.ADMISSION_GROUP` wait); with nothing decoding they
        join at once.
    max_chars : int
        The work budget of a request, in characters: its texts and prefixes, each sentence counting at least
        :data:`~transformer.config.search_limits.MIN_SENTENCE_CHARS` (so at least that many); beyond it 413
        (400 on LibreTranslate's endpoint). See :func:`~transformer.serving.work_budget.request_work`.
    api_keys : frozenset of str
        Keys a client must send; empty: no key needed.
    warmup_text : str
        Sentence each model translates before ``/ready`` says yes.
    keep_alive_timeout : float
        Seconds an idle kept-alive connection stays open after a response (uvicorn's ``timeout_keep_alive``).
    read_timeout : float
        Seconds a client has to send a request's line and headers, and again its body; a slower one gets
        408 and its connection is closed (a byte-a-second sender holds no connection for long).
    cache_size : int
        Sentences the translation cache holds (:mod:`~transformer.serving.translation_cache`); 0 (the
        default) turns it off.
    cache_bytes : int
        The cache's estimated size at most, in bytes.
    retry_omissions : bool
        Retry a sentence whose translation is flagged as an omission in two pieces, keeping the retry when it
        leaves fewer source words unread (:mod:`~transformer.serving.omission_retry`; PyTorch engine).

    Notes
    -----
    A larger ``max_batch_tokens`` raises throughput until a step's matrix products saturate the cores, then
    only raises latency; ``max_queue`` bounds how long an accepted request can wait.
    """

    checkpoints: dict[str, tuple[Path, ...]]
    host: str = "127.0.0.1"
    port: int = 8000
    engine: str = "pytorch"
    device: str = "auto"
    precision: str = "fp32"
    fp32_kernels: str = "auto"
    shortlist: bool = False
    batching: str = ""
    max_batch_tokens: int = 4096
    max_queue: int = 1024
    admit_every: int = 2
    max_chars: int = 5000
    api_keys: frozenset[str] = field(default_factory=frozenset)
    warmup_text: str = "Hello."
    keep_alive_timeout: float = 5.0
    read_timeout: float = 10.0
    retry_omissions: bool = False
    cache_size: int = 0
    cache_bytes: int = 64 * 1024 * 1024

    def __post_init__(self) -> None:
        if not self.checkpoints:
            raise ValueError("ServeConfig.checkpoints: serve at least one model")
        members = {
            name: (paths,) if isinstance(paths, (str, Path)) else tuple(paths)
            for name, paths in self.checkpoints.items()
        }
        object.__setattr__(
            self, "checkpoints", {name: tuple(map(Path, paths)) for name, paths in members.items()}
        )
        for name, paths in self.checkpoints.items():
            if not paths:
                raise ValueError(f"ServeConfig.checkpoints[{name!r}]: no checkpoint")
        check_choice(self, "engine", SERVE_ENGINES)
        check_choice(self, "precision", TRANSLATION_PRECISIONS)
        check_choice(self, "fp32_kernels", FP32_KERNEL_CHOICES)
        if self.batching == "":
            object.__setattr__(self, "batching", "continuous" if self.engine == "pytorch" else "request")
        check_choice(self, "batching", BATCHING_MODES)
        if self.engine != "pytorch" and self.batching == "continuous":
            raise ValueError(
                f"--engine {self.engine} --batching continuous: step-level batching places each row at its own "
                "position in the PyTorch model; use --batching request (the default with this engine)"
            )
        if self.engine != "pytorch" and self.retry_omissions:
            raise ValueError(
                f"--engine {self.engine} --retry-omissions: omissions are found in the PyTorch model's "
                "attention; use --engine pytorch"
            )
        if not 0 <= self.port <= 65535:
            raise ValueError(f"ServeConfig.port={self.port} is not a TCP port (0 to 65535)")
        for name in ("max_batch_tokens", "max_queue", "max_chars", "admit_every"):
            value = getattr(self, name)
            if not (isinstance(value, int) and 0 < value < math.inf):
                raise ValueError(f"ServeConfig.{name}={value} must be a positive integer")
        if self.max_chars < MIN_SENTENCE_CHARS:
            raise ValueError(
                f"ServeConfig.max_chars={self.max_chars} must be at least {MIN_SENTENCE_CHARS}, the least one "
                "sentence costs (no request would fit)"
            )
        if not (isinstance(self.cache_size, int) and 0 <= self.cache_size <= 10**9):
            raise ValueError(f"ServeConfig.cache_size={self.cache_size} must be 0 (off) to 1e9 sentences")
        if not (isinstance(self.cache_bytes, int) and 0 < self.cache_bytes <= 2**40):
            raise ValueError(f"ServeConfig.cache_bytes={self.cache_bytes} must be a positive number of bytes")
        for name in ("keep_alive_timeout", "read_timeout"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and 0 < value < math.inf):
                raise ValueError(f"ServeConfig.{name}={value} must be a positive number of seconds")


def parse_checkpoint_options(values: list[str]) -> dict[str, tuple[Path, ...]]:
    """Turn ``--checkpoint DIR`` / ``--checkpoint NAME=DIR`` options into a name-to-directories mapping.

    Parameters
    ----------
    values : list of str
        The options in order; a bare ``DIR`` is named after the directory (``"default"`` for the first
        when it is the only one). ``NAME=DIR`` given again with the same name and another directory adds
        that model to an ensemble served as ``NAME``.

    Returns
    -------
    dict of str to tuple of Path
        Names in option order (the first is the default model), each with its model(s).

    Raises
    ------
    ValueError
        Naming ``--checkpoint`` for an empty name or directory, a bare directory named like another model,
        and a directory listed twice for one name.

    Notes
    -----
    A name may hold letters, digits, ``.``, ``_`` and ``-``, so it can travel in URLs and JSON untouched.
    Only explicit names form ensembles: two bare directories that end alike are a mistake, not an ensemble.
    """
    checkpoints: dict[str, tuple[Path, ...]] = {}
    for value in values:
        name, separator, directory = value.partition("=")
        if not separator:
            name, directory = ("default" if len(values) == 1 else Path(value).name), value
        if not directory:
            raise ValueError(f"--checkpoint {value!r}: no directory after '='")
        if not name or not all(character.isalnum() or character in "._-" for character in name):
            raise ValueError(
                f"--checkpoint {value!r}: the model name must be letters, digits, '.', '_' or '-'"
            )
        members = checkpoints.get(name, ())
        if members and not separator:
            raise ValueError(
                f"--checkpoint {value!r}: model name {name!r} is given twice (name each model NAME=DIR; "
                "one name given several directories serves them as an ensemble)"
            )
        if Path(directory) in members:
            raise ValueError(f"--checkpoint {value!r}: model {name!r} lists {directory!r} twice")
        checkpoints[name] = (*members, Path(directory))
    return checkpoints


def read_api_keys(path: Path) -> frozenset[str]:
    """Read the API keys file: one key per line; blank lines and lines starting with ``#`` are skipped.

    Parameters
    ----------
    path : Path
        The ``--api-keys`` file.

    Returns
    -------
    frozenset of str
        The keys.

    Notes
    -----
    Raises ValueError naming the file (and the line) when it cannot be read, holds no key, or a key holds
    whitespace (a pasted key with a space would never match).
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"--api-keys {path}: cannot read it ({error})") from None
    keys = set()
    for number, line in enumerate(lines, start=1):
        key = line.strip()
        if not key or key.startswith("#"):
            continue
        if any(character.isspace() for character in key):
            raise ValueError(f"--api-keys {path}:{number}: a key may not contain whitespace")
        keys.add(key)
    if not keys:
        raise ValueError(f"--api-keys {path}: no key in the file (one key per line)")
    return frozenset(keys)
