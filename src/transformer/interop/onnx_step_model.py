"""An ONNX export driven by our searches: onnxruntime sessions behind the step-model protocol.

:class:`OnnxModel` loads an export's two graphs (:mod:`~transformer.interop.onnx_graphs`) into onnxruntime
sessions; :class:`OnnxStepModel` answers the protocol every search drives
(:class:`~transformer.decoding.step_model.StepModel`): :meth:`~OnnxStepModel.start` runs the encoder graph,
:meth:`~OnnxStepModel.log_probs` one decoder step, :meth:`~OnnxStepModel.reorder` follows the rows the search
keeps. So greedy search, beam search and sampling run over onnxruntime exactly as over PyTorch, with the same
length limits and penalties: only the arithmetic inside the graphs changes hands.
"""

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from transformer.interop.ctranslate2 import MODEL_CONFIG_FILE
from transformer.interop.onnx_export import (
    ONNX_EXPORT_FILE,
    ONNX_EXPORT_VERSION,
    ONNX_PRECISIONS,
    import_onnx_packages,
)
from transformer.interop.onnx_graphs import cache_names
from transformer.model.config import TransformerConfig
from transformer.model.special_tokens import SpecialTokenIds


class OnnxModel:
    """The encoder and decoder-step sessions of one ONNX export, with its config.

    Parameters
    ----------
    encoder : onnxruntime.InferenceSession
        The encoder graph.
    decoder_step : onnxruntime.InferenceSession
        The decoder-step graph.
    config : TransformerConfig
        The exported model's config (special ids, layers, vocabulary sizes).
    max_positions : int
        Positions the graphs encode (the exported sinusoid table's rows, or the learned table's).
    precision : {"fp32", "int8"}
        Which graphs were loaded.
    description : dict or None
        The export's ``onnx_export.json`` (:func:`read_onnx_export`): its stored search settings and
        languages; None when built by hand.

    Notes
    -----
    Build it with :meth:`from_directory`. Sessions are safe to run from several threads at once, so one
    instance serves every worker of a server.
    """

    def __init__(
        self,
        encoder: Any,
        decoder_step: Any,
        config: TransformerConfig,
        max_positions: int,
        precision: str,
        description: dict[str, Any] | None = None,
    ) -> None:
        self.encoder = encoder
        self.decoder_step = decoder_step
        self.config = config
        self.max_positions = max_positions
        self.precision = precision
        self.description = description or {}
        self.cross_names = cache_names("cross", config.num_decoder_layers)
        self.past_names = cache_names("past", config.num_decoder_layers)

    @classmethod
    def from_directory(
        cls, directory: Path, precision: str = "fp32", threads: int = 0, spin: bool = False
    ) -> "OnnxModel":
        """Load an export written by ``transformer convert --to onnx``.

        Parameters
        ----------
        directory : Path
            The export.
        precision : {"fp32", "int8"}
            The graphs to load; int8 needs an export made with ``--quantization int8``.
        threads : int
            onnxruntime's intra-op threads; 0 takes PyTorch's thread count (``torch.get_num_threads()``), so
            ``OMP_NUM_THREADS`` and ``--threads`` mean the same for both engines.
        spin : bool
            Let onnxruntime's intra-op threads spin-wait between operators (its default). Off here: on the
            2-core AVX-512 EPYC, a Multi30k model's greedy search at 2 threads ran 82.3 sentences/s spinning
            and 292.1 without (BENCHMARKS.md section 1j), the spinning threads competing for the cores;
            without it 2 threads beat 1.

        Returns
        -------
        OnnxModel
            Ready to decode on the CPU.

        Raises
        ------
        ValueError
            Naming the directory when it is not an ONNX export (or one of a newer format), or the precision
            when the export lacks its graphs.
        ImportError
            When the ``onnx`` extra is not installed.

        Notes
        -----
        Graph optimisations are onnxruntime's full set (``ORT_ENABLE_ALL``); sessions run operators one after
        another (``inter_op_num_threads=1``), since a decoder step is a chain with little to overlap.
        """
        directory = Path(directory)
        description = read_onnx_export(directory)
        if precision not in ONNX_PRECISIONS:
            raise ValueError(f"--precision {precision}: ONNX exports hold {', '.join(ONNX_PRECISIONS)}")
        files = description["precisions"].get(precision)
        if files is None:
            raise ValueError(
                f"--precision {precision}: {directory} holds no {precision} graphs; export them with "
                f"'transformer convert --to onnx CHECKPOINT {directory} --quantization {precision}'"
            )
        _, onnxruntime = import_onnx_packages()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or torch.get_num_threads()
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        providers = ["CPUExecutionProvider"]
        encoder, decoder_step = (
            onnxruntime.InferenceSession(str(directory / name), options, providers=providers)
            for name in files
        )
        config = TransformerConfig.from_dict(
            json.loads((directory / MODEL_CONFIG_FILE).read_text(encoding="utf-8"))
        )
        return cls(encoder, decoder_step, config, int(description["max_positions"]), precision, description)


def read_onnx_export(directory: Path) -> dict[str, Any]:
    """Read and check an export's :data:`~transformer.interop.onnx_export.ONNX_EXPORT_FILE`.

    Parameters
    ----------
    directory : Path
        The directory given as the export.

    Returns
    -------
    dict
        The description: ``version``, ``opset``, ``max_positions``, ``precisions`` (graph files by
        precision), ``decode`` (the checkpoint's search settings, or None) and ``languages`` (the run's
        source and target, or None).

    Raises
    ------
    ValueError
        Naming the directory when it is missing, not an ONNX export (a checkpoint passed by mistake: the
        message says how to export it), unreadable, of a newer format, or missing a graph file it lists.

    Notes
    -----
    Checked before onnxruntime loads anything, so a wrong path costs no session and gives one line.
    """
    path = Path(directory) / ONNX_EXPORT_FILE
    if not path.is_file():
        raise ValueError(
            f"{directory}: no {ONNX_EXPORT_FILE}, so not an ONNX export; make one with "
            "'transformer convert --to onnx CHECKPOINT OUTPUT_DIR'"
        )
    try:
        description = json.loads(path.read_text(encoding="utf-8"))
        version, precisions = description["version"], description["precisions"]
        int(description["max_positions"])
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: not a readable ONNX export description ({error})") from None
    if version != ONNX_EXPORT_VERSION:
        raise ValueError(
            f"{path}: export format {version!r}, this version reads {ONNX_EXPORT_VERSION}; export it again"
        )
    for files in precisions.values():
        for name in files:
            if not (Path(directory) / name).is_file() or os.path.basename(name) != name:
                raise ValueError(f"{path}: lists {name!r}, which the directory lacks; export it again")
    return dict(description)


@dataclass
class OnnxSearchState:
    """Per-row state of an :class:`OnnxStepModel`: the caches the graphs pass back and forth.

    Parameters
    ----------
    source_cross : list of numpy.ndarray
        Per layer, cross-attention keys then values, one row per *source sentence*: (sentences, num_heads,
        src_len, d_k).
    source_mask : numpy.ndarray, shape (sentences, src_len), bool
        True on real source tokens.
    row_sources : numpy.ndarray, shape (rows,), int64
        The source sentence of each decoder row.
    cross : list of numpy.ndarray
        ``source_cross`` laid out per row, (rows, num_heads, src_len, d_k): what the step graph reads.
    row_mask : numpy.ndarray, shape (rows, src_len), bool
        ``source_mask`` per row.
    past : list of numpy.ndarray
        Per layer, self-attention keys then values of the positions fed so far, (rows, num_heads, fed, d_k).

    Notes
    -----
    Beam search permutes a sentence's beams at every step but keeps them on their sentence, so ``cross`` is
    copied from ``source_cross`` only when a row changes sentence (the first duplication into beams, a
    finished sentence dropped), not at every step.
    """

    source_cross: list[np.ndarray]
    source_mask: np.ndarray
    row_sources: np.ndarray
    cross: list[np.ndarray]
    row_mask: np.ndarray
    past: list[np.ndarray]


class OnnxStepModel(SpecialTokenIds):
    """The step-model protocol over an :class:`OnnxModel`, so our searches decode with onnxruntime.

    Parameters
    ----------
    model : OnnxModel
        The loaded export.

    Notes
    -----
    Tensors cross between PyTorch and numpy without copies (``torch.from_numpy``, ``Tensor.numpy``); the
    search's tensors live on the CPU. Log-probabilities come out of the graph in float32, as
    :class:`~transformer.decoding.step_model.TransformerStepModel` returns them.
    """

    model: OnnxModel

    def __init__(self, model: OnnxModel) -> None:
        self.model = model

    @property
    def max_output_length(self) -> int:
        """The most tokens a hypothesis may have: the exported position table's rows.

        Returns
        -------
        int
            ``model.max_positions``.

        Notes
        -----
        Generating token k feeds the decoder positions 0 .. k - 1, so a table of M rows allows M tokens; the
        searches cap their limits with it (:func:`~transformer.decoding.search.output_length_limits`). A
        sinusoidal model, unbounded in PyTorch, is bounded here by the table the export stored.
        """
        return self.model.max_positions

    def start(self, src_tokens: Tensor) -> OnnxSearchState:
        """Run the encoder graph.

        Parameters
        ----------
        src_tokens : torch.Tensor, shape (batch, src_len), int64
            Source ids, right-padded with ``pad_id``.

        Returns
        -------
        OnnxSearchState
            One row per sentence, nothing decoded yet.

        Notes
        -----
        The self-attention caches start with zero positions; the step graph concatenates onto them.
        """
        sources = src_tokens.cpu().numpy()
        cross = self.model.encoder.run(self.model.cross_names, {"src_tokens": sources})
        mask = sources != self.pad_id
        past = [np.zeros((*tensor.shape[:2], 0, tensor.shape[3]), dtype=np.float32) for tensor in cross]
        return OnnxSearchState(cross, mask, np.arange(len(sources)), cross, mask, past)

    def log_probs(self, state: OnnxSearchState, last_tokens: Tensor) -> Tensor:
        """Run one decoder step and keep its grown caches.

        Parameters
        ----------
        state : OnnxSearchState
            The rows' state; its ``past`` grows by one position.
        last_tokens : torch.Tensor, shape (rows,), int64
            Newest token of every row.

        Returns
        -------
        torch.Tensor, shape (rows, tgt_vocab_size), float32
            Next-token log-probabilities.

        Notes
        -----
        Inputs are fed by name (:func:`~transformer.interop.onnx_graphs.cache_names`).
        """
        feeds: dict[str, np.ndarray] = {
            "last_tokens": last_tokens.cpu().numpy(),
            "source_mask": state.row_mask,
        }
        feeds.update(zip(self.model.cross_names, state.cross, strict=True))
        feeds.update(zip(self.model.past_names, state.past, strict=True))
        log_probs, *state.past = self.model.decoder_step.run(None, feeds)
        return torch.from_numpy(log_probs)

    def reorder(self, state: OnnxSearchState, row_indices: Tensor) -> None:
        """Keep, duplicate or permute rows.

        Parameters
        ----------
        state : OnnxSearchState
            The rows' state, changed in place.
        row_indices : torch.Tensor, shape (new_rows,), int64
            For each new row, the old row it continues.

        Returns
        -------
        None

        Notes
        -----
        The cross-attention rows are rebuilt from the per-sentence copy only when the rows' sentences change
        (see :class:`OnnxSearchState`).
        """
        indices = row_indices.cpu().numpy()
        state.past = [tensor[indices] for tensor in state.past]
        row_sources = state.row_sources[indices]
        if not np.array_equal(row_sources, state.row_sources):
            state.row_sources = row_sources
            state.cross = [tensor[row_sources] for tensor in state.source_cross]
            state.row_mask = state.source_mask[row_sources]
