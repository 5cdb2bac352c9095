"""Devices: turn a ``device`` setting into a ``torch.device``, and describe what the device can run.

The machines this project runs on differ (CPUs with AMX, with AVX-512 BF16 only, with AVX2 and FMA only), so
what a device can do is probed here, never assumed: the training and translation commands refuse a bf16
request the CPU would only emulate, and the tests skip what the machine lacks with the probed reason.
"""

import os
import platform
import re
from pathlib import Path

import torch

#: CPU flags that change which kernels PyTorch runs (oneDNN bf16/int8 paths, AMX tiles, vector width).
RELEVANT_CPU_FLAG_PREFIXES = ("amx", "avx512", "avx2", "avx_vnni", "fma", "f16c")
#: The flags that decide matrix-product speed most, named in one-line descriptions of a CPU.
HEADLINE_CPU_FLAGS = (
    "amx_bf16",
    "amx_int8",
    "amx_tile",
    "avx512f",
    "avx512_bf16",
    "avx512_vnni",
    "avx_vnni",
    "avx2",
    "fma",
)


def resolve_device(requested: str, local_rank: int = 0, option: str = "train.device") -> torch.device:
    """Turn a device setting into a device.

    Parameters
    ----------
    requested : str
        "auto" (CUDA when available, else CPU), "cpu", "cuda" or "cuda:N".
    local_rank : int
        Picks the GPU for "auto"/"cuda" when several processes share a machine.
    option : str
        The setting's name in error messages: ``train.device`` for training, ``device`` for a
        :class:`~transformer.decoding.translator.Translator`, or a command-line flag such as ``--device``
        (a flag is written ``--device cuda``, a setting ``train.device='cuda'``).

    Returns
    -------
    torch.device
        The device.

    Raises
    ------
    ValueError
        Naming ``option`` and the value: for a setting other than auto, cpu, cuda and cuda:N; when CUDA is
        requested but unavailable; for a "cuda:N" beyond the machine's GPUs; and when "auto"/"cuda" would give
        this process (local rank ``local_rank``) a GPU the machine does not have.

    Notes
    -----
    With ``torchrun --nproc_per_node=2`` on a machine with one GPU, "auto" and "cuda" are refused: without the
    check both processes would silently share GPU 0. Every refusal happens here, before a model is built, so
    a wrong device costs one line instead of a CUDA traceback from the first tensor moved to it.
    """
    flag = option.startswith("-")
    setting = f"{option} {requested}" if flag else f"{option}={requested!r}"
    use_cpu = f"{option} cpu" if flag else f"{option}=cpu"
    if not re.fullmatch(r"auto|cpu|cuda(:[0-9]+)?", requested):
        raise ValueError(f"{setting}: expected auto, cpu, cuda or cuda:N")
    if requested == "cpu" or (requested == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ValueError(f"{setting}: CUDA is not available on this machine; use {use_cpu}")
    gpus = torch.cuda.device_count()
    if ":" in requested:
        if int(requested.partition(":")[2]) >= gpus:
            raise ValueError(f"{setting}: this machine has {gpus} GPU(s)")
        return torch.device(requested)
    if local_rank >= gpus:
        raise ValueError(
            f"{setting}: process of local rank {local_rank} has no GPU of its own ({gpus} visible); start at "
            f"most {gpus} processes per machine or set {use_cpu}"
        )
    return torch.device(f"cuda:{local_rank}")


def cpu_model_and_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> tuple[str, list[str]]:
    """Read the CPU's model name and the instruction-set flags that matter for matrix products.

    Parameters
    ----------
    cpuinfo : Path
        Linux's CPU description (``/proc/cpuinfo``).

    Returns
    -------
    model : str
        The first "model name" line (``platform.processor()`` where the file is missing).
    flags : list of str
        Sorted flags starting with one of :data:`RELEVANT_CPU_FLAG_PREFIXES` (empty without the file).

    Notes
    -----
    Two machines with the same model string can differ in flags (a hypervisor may hide AMX), so both are
    part of every machine fingerprint.
    """
    model: str | None = None
    flags: set[str] = set()
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and model is None:
            model = value.strip()
        elif key.strip() == "flags":
            flags.update(flag for flag in value.split() if flag.startswith(RELEVANT_CPU_FLAG_PREFIXES))
    return model or platform.processor() or platform.machine(), sorted(flags)


def describe_cpu() -> str:
    """Name the CPU and its matrix-relevant flags in one line, for logs, errors and benchmark reports.

    Returns
    -------
    str
        E.g. "AMD EPYC 7B13 (avx2 fma, no AVX-512, no AMX)" or "Intel(R) Xeon(R) Processor (amx_bf16 ...
        avx512f fma)"; with ``ONEDNN_MAX_CPU_ISA`` set, the cap is named too.

    Notes
    -----
    Every speed figure this project records is labelled with this line: the machines it runs on differ. A
    oneDNN ISA cap (``ONEDNN_MAX_CPU_ISA=AVX2``) makes a larger CPU run the kernels of a smaller one, which
    is how the AVX2-only behaviour is reproduced on an AVX-512 machine; the label says so.
    """
    model, flags = cpu_model_and_flags()
    headline = [flag for flag in HEADLINE_CPU_FLAGS if flag in flags]
    missing = [
        label
        for label, prefix in (("AVX-512", "avx512f"), ("AMX", "amx"))
        if not any(flag.startswith(prefix) for flag in flags)
    ]
    text = f"{model} ({' '.join(headline) or 'no AVX2/AVX-512'}"
    text += "".join(f", no {label}" for label in missing) + ")"
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA")
    if cap:
        text += f" with oneDNN capped at ONEDNN_MAX_CPU_ISA={cap}"
    return text


def cpu_has_native_bf16() -> bool:
    """Tell whether oneDNN runs bf16 products natively on this CPU (AVX-512 BF16, AVX-NE-CONVERT or AMX).

    Returns
    -------
    bool
        True when bf16 products need no emulation.

    Notes
    -----
    Asks oneDNN itself rather than reading flags, so an ISA cap (``ONEDNN_MAX_CPU_ISA``) and a hypervisor
    that hides a flag are both respected. Native is not fast: with AVX-512 BF16 but no AMX a bf16 product
    measured 0.55x fp32, with AMX about 7x; without native support (AVX2 + FMA only) about 1/40 of fp32.
    """
    checker = getattr(torch.backends.mkldnn, "is_available", None)
    if checker is None or not checker():
        return False
    native = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    return bool(native()) if native is not None else False


def bf16_unsupported_reason(device: torch.device) -> str | None:
    """Say why bf16 cannot be used on a device, or None where it runs natively.

    Parameters
    ----------
    device : torch.device
        A CPU or CUDA device.

    Returns
    -------
    str or None
        None when bf16 runs natively; else one line naming the device and what it lacks, for errors and
        test skips.

    Notes
    -----
    On a CPU without native bf16 (AVX2 + FMA only, the commonest kind), oneDNN emulates bf16 matrix products
    about 40x slower than fp32 and refuses bf16 LSTM primitives outright ("could not create a primitive
    descriptor"), so a bf16 request there is refused rather than run: neither a 40x slower run nor a
    54-line oneDNN traceback is what anyone asking for bf16 wants.
    """
    if device.type == "cuda":
        if torch.cuda.is_bf16_supported():
            return None
        return f"the GPU {torch.cuda.get_device_name(device)} has no bf16 support"
    if device.type == "cpu" and not cpu_has_native_bf16():
        return (
            f"this CPU has no native bf16 ({describe_cpu()}): oneDNN emulates bf16 products about 40x "
            "slower than fp32 and has no bf16 LSTM"
        )
    return None
