"""Export our checkpoints to CTranslate2 (a fast CPU/GPU inference engine) and translate with them.

The model is written through CTranslate2's Python specification API (``ctranslate2.specs.TransformerSpec``)
straight from our weights, so every model this project can load converts: ours (interleaved sinusoids, BOS
start token, PAD id 0) as well as imported Marian ones (concatenated sinusoids, PAD start token). The
sinusoid table is stored explicitly, so CTranslate2 uses our layout, whichever it is. The checkpoint's
tokenizer files and our model config are copied beside the CTranslate2 files, so the directory alone can
translate.
"""

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from transformer.checkpoint.layout import TOKENIZER_FILE
from transformer.checkpoint.model_checkpoint import load_checkpoint_tokenizer
from transformer.data.pipeline.marian_tokenizer import OPTIONAL_FILES, REQUIRED_FILES
from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.data.shortlist import SHORTLIST_FILE, Shortlist, load_shortlist, vocabulary_fingerprint
from transformer.decoding.inference_models import DEFAULT_MAX_INPUT_TOKENS
from transformer.interop.ctranslate2_spec import (
    build_transformer_spec,
    check_ctranslate2_exportable,
    import_ctranslate2,
    position_table_size,
    register_vocabularies,
    vocabulary_pieces,
)
from transformer.interop.ctranslate2_vocabulary_map import VOCABULARY_MAP_FILE, vocabulary_map_text
from transformer.interop.export_checks import load_transformer_checkpoint
from transformer.interop.output_directory import staged_directory
from transformer.model.config import TransformerConfig

MODEL_CONFIG_FILE = "transformer_config.json"
# The tokenizer files copied beside the model: this project's, or an imported Marian model's.
TOKENIZER_FILES = (TOKENIZER_FILE, *REQUIRED_FILES, *OPTIONAL_FILES)
CT2_MODEL_FILE = "model.bin"
QUANTIZATIONS = (
    "int8",
    "int8_float32",
    "int8_float16",
    "int8_bfloat16",
    "int16",
    "float16",
    "bfloat16",
    "float32",
)


def export_ctranslate2(checkpoint_dir: Path, output_dir: Path, quantization: str | None = None) -> Path:
    """Write one of our checkpoints as a CTranslate2 model directory.

    Parameters
    ----------
    checkpoint_dir : Path
        A checkpoint (or run) directory; its model may be ours or an imported Marian one.
    output_dir : Path
        Directory to write; replaced only if it holds an earlier CTranslate2 export and nothing else (its
        ``converted_from.json`` lists the files).
    quantization : str or None
        Weight type CTranslate2 stores (one of :data:`QUANTIZATIONS`); None keeps float32.

    Returns
    -------
    Path
        ``output_dir``: CTranslate2's ``model.bin``, ``config.json`` and vocabularies, plus the checkpoint's
        tokenizer files and ``transformer_config.json`` (our model config) for :class:`CTranslate2Translator`,
        ``vmap.txt`` when the checkpoint has a vocabulary shortlist, and last ``converted_from.json``, the
        record of what the export wrote.

    Raises
    ------
    ValueError
        Naming an unsupported config field (``model.architecture`` for the recurrent baseline) or
        quantization; a shortlist beside the checkpoint that is damaged or of another vocabulary.

    Notes
    -----
    Needs the ``ctranslate2`` package. The directory is filled in a hidden sibling and moved into place, so a
    failed export leaves an earlier one intact. Only known tokenizer file names are copied, so a stray file in
    the checkpoint cannot overwrite one CTranslate2 wrote. A model without positions
    (``positional_encoding="none"``) is stored with an all-zero position table: CTranslate2 always adds one,
    and adding zeros is exactly adding nothing. A checkpoint's shortlist (``transformer shortlist``) is
    exported as CTranslate2's vocabulary map, used by ``translate --engine ctranslate2 --shortlist``.
    """
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ValueError(f"quantization={quantization!r} is not one of {QUANTIZATIONS}")
    checkpoint, config = load_transformer_checkpoint(
        checkpoint_dir, "CTranslate2", "whose translation models are Transformers only"
    )
    check_ctranslate2_exportable(config, str(checkpoint.path))
    tokenizer = load_checkpoint_tokenizer(checkpoint.path)
    spec = build_transformer_spec(checkpoint.weights, config)
    if config.positional_encoding == "none":
        for stack in (spec.encoder, spec.decoder):
            stack.position_encodings.encodings = np.zeros_like(stack.position_encodings.encodings)
    register_vocabularies(spec, tokenizer, config)
    shortlist = _checkpoint_shortlist(checkpoint.path, tokenizer, config)
    spec.validate()
    spec.optimize(quantization=quantization)
    with staged_directory(Path(output_dir), "ctranslate2", checkpoint.path) as staging:
        spec.save(str(staging))
        for name, contents in checkpoint.tokenizer_files().items():
            if name in TOKENIZER_FILES:  # never let a stray file replace one CTranslate2 wrote
                (staging / name).write_bytes(contents)
        (staging / MODEL_CONFIG_FILE).write_text(json.dumps(config.to_dict(), indent=1), encoding="utf-8")
        if shortlist is not None:
            text = vocabulary_map_text(shortlist, *vocabulary_pieces(tokenizer))
            (staging / VOCABULARY_MAP_FILE).write_text(text, encoding="utf-8")
    return Path(output_dir)


def _checkpoint_shortlist(
    directory: Path, tokenizer: TextTokenizer, config: TransformerConfig
) -> Shortlist | None:
    """Read the checkpoint's shortlist, refusing one of another vocabulary; None when it has none."""
    path = directory / SHORTLIST_FILE
    if not path.exists():
        return None
    return load_shortlist(path, vocabulary_fingerprint(tokenizer, config.src_vocab_size))


class CTranslate2Translator:
    """Translate raw text with a model exported by :func:`export_ctranslate2`.

    Parameters
    ----------
    translator : ctranslate2.Translator
        The loaded CTranslate2 model.
    tokenizer : TextTokenizer
        The tokenizer stored beside it.
    config : TransformerConfig
        Our config of the exported model (special ids, position limit).
    use_vmap : bool
        Restrict each batch's output to the export's vocabulary map (``vmap.txt``, our shortlist).

    Notes
    -----
    Length penalty: CTranslate2 divides a hypothesis's log-probability by ``|Y|^alpha``; we ask it to count
    the EOS in ``|Y|`` (``return_end_token``), so this is exactly our ``length_penalty_form="power"``, not
    the "gnmt" form ``((5 + |Y|) / 6)^alpha`` our own translator uses by default. Its beam search also stops
    a sentence once ``beam_size`` hypotheses have finished, as ours does; with ``length_penalty=0`` it stops
    as soon as the best beam finishes. Greedy search (``beam_size=1``) gives our greedy tokens. PAD (and
    BOS, unless it is EOS) are never generated, as in our search.
    """

    def __init__(
        self, translator: Any, tokenizer: TextTokenizer, config: TransformerConfig, use_vmap: bool = False
    ) -> None:
        self.translator = translator
        self.use_vmap = use_vmap
        self.tokenizer = tokenizer
        self.config = config
        self.source_pieces, target_pieces = vocabulary_pieces(tokenizer)
        self.target_ids = {piece: token_id for token_id, piece in enumerate(target_pieces)}
        self.eos_piece = target_pieces[config.eos_id]
        suppressed = {config.pad_id} | ({config.bos_id} if config.bos_id != config.eos_id else set())
        self.suppressed = [[target_pieces[token_id]] for token_id in sorted(suppressed)]
        self.max_positions = position_table_size(config)

    @classmethod
    def from_directory(
        cls,
        ct2_dir: Path,
        device: str = "cpu",
        compute_type: str = "default",
        threads: int = 0,
        use_vmap: bool = False,
        inter_threads: int = 1,
    ) -> "CTranslate2Translator":
        """Load an exported CTranslate2 model and the tokenizer beside it.

        Parameters
        ----------
        ct2_dir : Path
            A directory written by :func:`export_ctranslate2`.
        device : str
            "cpu", "cuda" or "auto".
        compute_type : str
            CTranslate2's computation type, e.g. "default" (the stored weight type), "int8" or "float16".
        threads : int
            CPU threads per translation (CTranslate2's ``intra_threads``); 0 lets CTranslate2 choose.
        use_vmap : bool
            Decode with the export's vocabulary map (the checkpoint's shortlist).
        inter_threads : int
            Batches CTranslate2 may translate at once (its ``inter_threads``), each on ``threads`` threads, when
            called from that many threads: what ``Translator.workers`` is to ours.

        Returns
        -------
        CTranslate2Translator
            Ready to translate.

        Raises
        ------
        ValueError
            Naming the directory when it lacks the files :func:`export_ctranslate2` writes, or the missing
            ``vmap.txt`` with ``use_vmap``.
        ImportError
            When ``ctranslate2`` is not installed.

        Notes
        -----
        The model config is read from the export, not from ``ctranslate2``, so special ids and vocabulary
        sizes are those the checkpoint was trained with.
        """
        ct2_dir = Path(ct2_dir)
        if not (ct2_dir / MODEL_CONFIG_FILE).exists():
            raise ValueError(
                f"{ct2_dir}: no {MODEL_CONFIG_FILE}, so not a CTranslate2 export; make one with "
                "'transformer convert --to ctranslate2 CHECKPOINT OUTPUT_DIR' (or export_ctranslate2)"
            )
        if use_vmap and not (ct2_dir / VOCABULARY_MAP_FILE).is_file():
            raise ValueError(
                f"{ct2_dir / VOCABULARY_MAP_FILE}: no vocabulary map in this export; build the checkpoint's "
                "shortlist with 'transformer shortlist' and convert it again"
            )
        config = TransformerConfig.from_dict(
            json.loads((ct2_dir / MODEL_CONFIG_FILE).read_text(encoding="utf-8"))
        )
        translator = import_ctranslate2().Translator(
            str(ct2_dir), device=device, compute_type=compute_type, intra_threads=threads,
            inter_threads=inter_threads,
        )  # fmt: skip
        return cls(translator, load_checkpoint_tokenizer(ct2_dir), config, use_vmap)

    def translate(
        self,
        sentences: Sequence[str],
        beam_size: int = 4,
        length_penalty: float = 0.6,
        max_length_offset: int = 50,
        max_length: int | None = None,
        max_batch_size: int = 64,
    ) -> list[str]:
        """Translate sentences, returning the best translation of each in input order.

        Parameters
        ----------
        sentences : sequence of str
            Raw source sentences.
        beam_size : int
            Beam size; 1 is greedy search.
        length_penalty : float
            alpha of CTranslate2's ``|Y|^alpha`` penalty (our "power" form; see the class notes).
        max_length_offset : int
            Longest output = source length (its EOS included) + this, as in our ``DecodeConfig``.
        max_length : int or None
            Absolute cap on output tokens.
        max_batch_size : int
            Sentences CTranslate2 decodes together.

        Returns
        -------
        list of str
            Detokenised translations; empty for empty inputs.

        Notes
        -----
        Blank sentences are not sent to CTranslate2 and come back as ``""``, as our translator returns them,
        so the output stays aligned with the input. The defaults match our ``DecodeConfig``
        except for the length-penalty form (see the class notes).
        """
        encoded = [self.encode(sentence) for sentence in sentences]
        outputs = self.translate_ids(
            [ids for ids in encoded if ids],
            beam_size,
            length_penalty,
            max_length_offset,
            max_length,
            max_batch_size,
        )
        results = iter(outputs)
        return [self.tokenizer.decode(next(results)).strip() if ids else "" for ids in encoded]

    def encode(self, sentence: str) -> list[int]:
        """Encode one sentence as the model's source ids, EOS appended.

        Parameters
        ----------
        sentence : str
            Raw source sentence.

        Returns
        -------
        list of int
            Source ids ending with EOS, truncated to fit the position table; empty for a blank sentence.

        Notes
        -----
        Same ids as our translator feeds our model, truncation included (at most ``DEFAULT_MAX_INPUT_TOKENS``
        tokens, EOS counted, and never more than the exported position table), so both engines translate the
        same input.
        """
        if not sentence.strip():
            return []
        ids = self.tokenizer.encode(sentence.strip())[: min(DEFAULT_MAX_INPUT_TOKENS, self.max_positions) - 1]
        return [*ids, self.config.eos_id]

    def translate_ids(
        self,
        src_ids: Sequence[Sequence[int]],
        beam_size: int = 4,
        length_penalty: float = 0.6,
        max_length_offset: int = 50,
        max_length: int | None = None,
        max_batch_size: int = 64,
    ) -> list[list[int]]:
        """Translate source id sequences into target ids.

        Parameters
        ----------
        src_ids : sequence of sequence of int
            Source ids, each ending with EOS (as :meth:`encode` returns them).
        beam_size : int
            Beam size; 1 is greedy search.
        length_penalty : float
            alpha of CTranslate2's ``|Y|^alpha`` penalty, EOS counted in ``|Y|``.
        max_length_offset : int
            Longest output = source length (its EOS included) + this.
        max_length : int or None
            Absolute cap on output tokens.
        max_batch_size : int
            Sentences CTranslate2 decodes together.

        Returns
        -------
        list of list of int
            The best hypothesis of each input, without EOS, in input order.

        Notes
        -----
        CTranslate2's length limit applies to a whole call, so inputs are grouped by their limit
        (``min(len(src) + max_length_offset, max_length)``, also kept below the exported position table) to
        keep our per-sentence rule exactly. A final EOS piece is cut, as our translator cuts it.
        """
        groups: dict[int, list[int]] = defaultdict(list)
        for index, ids in enumerate(src_ids):
            limit = len(ids) + max_length_offset
            groups[min(limit, max_length or limit, self.max_positions - 1)].append(index)
        outputs: list[list[int]] = [[] for _ in src_ids]
        for limit, indices in sorted(groups.items()):
            results = self.translator.translate_batch(
                [[self.source_pieces[token_id] for token_id in src_ids[index]] for index in indices],
                beam_size=beam_size,
                length_penalty=length_penalty,
                max_decoding_length=limit,
                min_decoding_length=0,
                max_input_length=0,
                return_end_token=True,
                suppress_sequences=self.suppressed,
                max_batch_size=max_batch_size,
                use_vmap=self.use_vmap,
            )
            for index, result in zip(indices, results, strict=True):
                pieces = result.hypotheses[0]
                if pieces and pieces[-1] == self.eos_piece:
                    pieces = pieces[:-1]
                outputs[index] = [self.target_ids[piece] for piece in pieces]
        return outputs
