"""Write safetensors files whose bytes depend only on their tensors and metadata.

``safetensors.torch.save_file`` keeps the metadata in a Rust ``HashMap``, whose iteration order is seeded per
process: the same weights and the same metadata came out as files with the keys of their JSON header in another
order, so two identical trainings gave checkpoints with different SHA-256 sums (seen on 2026-11-26 with
safetensors 0.8.0). :func:`save_safetensors_file` writes the file with the library and then rewrites its header
with the metadata keys sorted, which makes the file a function of its contents.
"""

import json
import struct
from pathlib import Path
from typing import Any

from safetensors.torch import save_file
from torch import Tensor

#: The header's key that holds the free-form string metadata.
METADATA_KEY = "__metadata__"
#: Bytes of the little-endian header length that starts every safetensors file.
LENGTH_BYTES = 8


def save_safetensors_file(tensors: dict[str, Tensor], path: Path, metadata: dict[str, str]) -> None:
    """Save tensors and string metadata as a safetensors file with a canonical header.

    Parameters
    ----------
    tensors : dict of str to torch.Tensor
        Contiguous tensors, none sharing storage (as ``safetensors.torch.save_file`` requires).
    path : Path
        The file to write (callers write into a staging directory, renamed into place when complete).
    metadata : dict of str to str
        The file's metadata.

    Returns
    -------
    None

    Notes
    -----
    The header is rewritten in place with the same length: reordering keys changes no byte count, and the
    library pads the header with spaces, which are kept. The tensor entries keep the library's order (by
    data offset, which it derives from dtype and name, not from a hash), so only the metadata needed sorting.
    Readers accept any key order, so files written before this change load as before.
    """
    save_file(tensors, str(path), metadata=metadata)
    with path.open("r+b") as file:
        (header_length,) = struct.unpack("<Q", file.read(LENGTH_BYTES))
        header_bytes = file.read(header_length)
        header: dict[str, Any] = json.loads(header_bytes)
        if METADATA_KEY in header:
            header[METADATA_KEY] = dict(sorted(header[METADATA_KEY].items()))
        canonical = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        if len(canonical) > header_length:  # cannot happen for a library-written header; keep it valid
            return
        file.seek(LENGTH_BYTES)
        file.write(canonical.ljust(header_length, b" "))
