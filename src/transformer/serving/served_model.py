"""A model the server offers: what decodes (PyTorch, CTranslate2 or onnxruntime), its tokenizer, settings, languages."""

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from transformer.architectures import SequenceModel
from transformer.checkpoint.layout import STATE_FILE, resolve_checkpoint
from transformer.config.data import DataConfig
from transformer.config.decode import DecodeConfig
from transformer.data.pipeline.batch import pad_sequences
from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.decoding.inference_models import DEFAULT_MAX_INPUT_TOKENS
from transformer.decoding.search import Hypothesis
from transformer.decoding.translator import Translator
from transformer.interop.ctranslate2 import CTranslate2Translator
from transformer.interop.onnx_translation import OnnxTranslator
from transformer.serving.ctranslate2_engine import ctranslate2_search
from transformer.serving.padded_cache import model_device

#: The language code of a model whose checkpoint does not record its languages (ISO 639-2 "undetermined").
UNKNOWN_LANGUAGE = "und"
#: CTranslate2 compute type for each ``--precision``.
CTRANSLATE2_COMPUTE_TYPES = {"fp32": "float32", "bf16": "bfloat16", "int8": "int8"}
#: The tokenizer settings file of a checkpoint converted from HuggingFace Marian.
MARIAN_TOKENIZER_CONFIG = "tokenizer_config.json"


@dataclass(frozen=True)
class ServedModel:
    """One model behind the server, with what the API needs to describe and use it.

    Parameters
    ----------
    name : str
        The name clients choose it by (``"model"`` in ``/v1/translate``).
    engine_model : SequenceModel, CTranslate2Translator or OnnxTranslator
        What decodes: the PyTorch model (on the serving device and precision), a CTranslate2 export, or an
        ONNX export with our searches.
    tokenizer : TextTokenizer
        Its tokenizer.
    decode_config : DecodeConfig
        Default search settings (the checkpoint's run's; for CTranslate2 the paper's alpha with the power
        penalty, the only one CTranslate2 has).
    precision : {"fp32", "bf16", "int8"}
        Arithmetic of the model.
    max_input_tokens : int
        Longer inputs are cut to this many tokens, EOS included, as ``transformer translate`` cuts them.
    source_lang, target_lang : str
        Language codes (ISO 639-1 where known), ``"und"`` when the checkpoint does not say.
    checkpoint : Path
        The directory it was loaded from (the first member's, for an ensemble).
    translator : Translator or None
        The PyTorch engine's translator, holding every model of an ensemble: what runs the searches that
        step-level batching does not (sampling, MBR, prefixes, n-gram blocking, ensembles) and the word
        alignments; None for CTranslate2 and onnxruntime.

    Notes
    -----
    The server encodes and decodes text here and searches with the worker, not with
    ``Translator.translate``, so that sentences of all requests share batches.
    """

    name: str
    engine_model: SequenceModel | CTranslate2Translator | OnnxTranslator
    tokenizer: TextTokenizer
    decode_config: DecodeConfig
    precision: str
    max_input_tokens: int
    source_lang: str
    target_lang: str
    checkpoint: Path
    translator: Translator | None = None

    @property
    def is_ensemble(self) -> bool:
        """Whether several models decode together (an ensemble).

        Returns
        -------
        bool
            True when the translator holds more than one model.

        Notes
        -----
        An ensemble's sentences take the worker's request-batching path: step-level batching runs one model.
        """
        return self.translator is not None and len(self.translator.models) > 1

    @property
    def engine_name(self) -> str:
        """Name the engine that decodes, as error messages say it.

        Returns
        -------
        str
            "CTranslate2", "onnxruntime" or "PyTorch".

        Notes
        -----
        Read from ``engine_model``'s type, so it cannot disagree with what actually decodes.
        """
        if isinstance(self.engine_model, CTranslate2Translator):
            return "CTranslate2"
        return "onnxruntime" if isinstance(self.engine_model, OnnxTranslator) else "PyTorch"

    def encode_prefix(self, prefix: str) -> list[int]:
        """Encode a target prefix as ``transformer translate --prefix-file`` does.

        Parameters
        ----------
        prefix : str
            Target text the translation must start with; blank for none.

        Returns
        -------
        list of int
            Target token ids, no EOS; empty for a blank prefix.

        Notes
        -----
        Encoded on its own, so end a prefix at a word boundary (a cut word may split into other subwords).
        """
        return self.tokenizer.encode_target(prefix) if prefix.strip() else []

    def encode(self, sentence: str) -> list[int]:
        """Encode a source sentence as the translator does: BPE ids, cut to the input limit, then EOS.

        Parameters
        ----------
        sentence : str
            One non-empty source sentence.

        Returns
        -------
        list of int
            Token ids ending with EOS, at most ``max_input_tokens`` long.

        Notes
        -----
        The same ids as ``Translator.translate``'s (and ``CTranslate2Translator.encode``'s), so a sentence
        decodes to the same translation as with ``transformer translate``; longer inputs are cut as there.
        """
        ids = self.tokenizer.encode(sentence.strip())[: self.max_input_tokens - 1]
        return [*ids, self.engine_model.config.eos_id]

    def decode(self, tokens: list[int]) -> str:
        """Turn output token ids into text, as ``Translator.translate`` does.

        Parameters
        ----------
        tokens : list of int
            A hypothesis's tokens.

        Returns
        -------
        str
            Detokenised text without surrounding whitespace.

        Notes
        -----
        Special tokens are skipped by the tokenizer.
        """
        return self.tokenizer.decode(tokens).strip()

    def search_to_the_end(
        self,
        src_ids: list[list[int]],
        prefix_ids: list[list[int]],
        config: DecodeConfig,
        between_steps: Callable[[], None] | None = None,
        term_ids: list[list[list[int]]] | None = None,
    ) -> list[list[Hypothesis]]:
        """Decode a padded batch to its end: the translator's search (any kind), CTranslate2's, or ours on onnxruntime.

        Parameters
        ----------
        src_ids : list of list of int
            Source token ids per sentence, each ending with EOS.
        prefix_ids : list of list of int
            A forced target prefix per sentence (empty for none).
        config : DecodeConfig
            The search.
        between_steps : callable or None
            Called before each step of the translator's search (``Translator.search_tokens``); None never.
        term_ids : list of list of list of int or None
            Per sentence, the glossary's target phrases its translation must contain (the constrained
            search, PyTorch only); None or empty lists for none.

        Returns
        -------
        list of list of Hypothesis
            Per sentence, ``config.nbest`` hypotheses, best first.

        Notes
        -----
        The model worker's path for the searches step-level batching does not run, and for request batching;
        CTranslate2 runs its whole search in C++, so it never pauses.
        """
        model = self.engine_model
        if isinstance(model, CTranslate2Translator):
            return ctranslate2_search(model, src_ids, config)
        if isinstance(model, OnnxTranslator):
            return model.search_tokens(
                pad_sequences(src_ids, model.config.pad_id), None, config, between_steps
            )
        assert self.translator is not None
        src_tokens = pad_sequences(src_ids, model.config.pad_id).to(model_device(model))
        prefixes = prefix_ids if any(prefix_ids) else None
        terms = term_ids if term_ids and any(term_ids) else None
        return self.translator.search_tokens(src_tokens, prefixes, config, between_steps, terms)


def load_served_model(
    name: str,
    checkpoints: Sequence[Path],
    engine: str,
    device: str,
    precision: str,
    fp32_kernels: str = "auto",
    shortlist: bool = False,
) -> ServedModel:
    """Load a checkpoint (or an ensemble, or a CTranslate2 export) for serving.

    Parameters
    ----------
    name : str
        Name to serve it under.
    checkpoints : sequence of Path
        Checkpoint or run directories (a run serves its best checkpoint); several make an ensemble that
        averages probabilities. With ``engine="ctranslate2"`` one directory written by ``transformer convert
        --to ctranslate2``.
    engine : {"pytorch", "ctranslate2", "onnxruntime"}
        What decodes; the last two take one directory written by ``transformer convert --to ctranslate2``
        or ``--to onnx``.
    device : str
        "auto", "cpu", "cuda" or "cuda:N" ("cuda:N" is PyTorch only).
    precision : {"fp32", "bf16", "int8"}
        As ``transformer translate --precision``; for CTranslate2 its compute type.
    shortlist : bool
        Decode with the checkpoint's vocabulary shortlist (with CTranslate2, the export's vocabulary map).
    fp32_kernels : {"auto", "mkl", "onednn"}
        As ``transformer translate --fp32-kernels`` (PyTorch engine only).

    Returns
    -------
    ServedModel
        Ready to translate, with the search settings the checkpoint's run used.

    Raises
    ------
    ValueError
        The same one-line errors as ``transformer translate`` for a missing or damaged checkpoint, an
        unsupported precision and ensemble members whose vocabularies differ; for an ensemble with
        CTranslate2.

    Notes
    -----
    An ensemble is served under one name with the first member's search settings and languages.
    """
    if engine in ("ctranslate2", "onnxruntime"):
        if len(checkpoints) != 1:
            raise ValueError(
                f"--checkpoint {name}=...: --engine {engine} decodes one model; ensembles need --engine pytorch"
            )
        if engine == "onnxruntime":
            return _load_onnx(name, Path(checkpoints[0]), device, precision, shortlist, fp32_kernels)
        return _load_ctranslate2(name, Path(checkpoints[0]), device, precision, shortlist)
    translator = Translator.from_checkpoints(
        [Path(path) for path in checkpoints],
        None,
        device,
        precision,
        fp32_kernels=fp32_kernels,
        shortlist=shortlist,
    )
    directory = resolve_checkpoint(Path(checkpoints[0]))
    source_lang, target_lang = checkpoint_languages(directory)
    return ServedModel(
        name,
        translator.model,
        translator.tokenizer,
        translator.decode_config,
        precision,
        translator.max_input_tokens,
        source_lang,
        target_lang,
        directory,
        translator,
    )


def _load_ctranslate2(name: str, directory: Path, device: str, precision: str, use_vmap: bool) -> ServedModel:
    """Load a CTranslate2 export; its compute type follows ``precision``, ``use_vmap`` its vocabulary map."""
    if device.startswith("cuda:"):
        raise ValueError(f"--device {device}: with --engine ctranslate2 use --device cuda (or auto, cpu)")
    compute_type = CTRANSLATE2_COMPUTE_TYPES[precision]
    translator = CTranslate2Translator.from_directory(directory, device, compute_type, use_vmap=use_vmap)
    source_lang, target_lang = checkpoint_languages(directory)
    return ServedModel(
        name,
        translator,
        translator.tokenizer,
        DecodeConfig(length_penalty_form="power"),
        precision,
        min(DEFAULT_MAX_INPUT_TOKENS, translator.max_positions),
        source_lang,
        target_lang,
        directory,
    )


def _load_onnx(
    name: str, directory: Path, device: str, precision: str, shortlist: bool, fp32_kernels: str
) -> ServedModel:
    """Load an ONNX export with its checkpoint's search settings, refusing what only PyTorch does."""
    refused = {
        f"--device {device}": device not in ("auto", "cpu"),
        "--precision bf16": precision == "bf16",
        "--shortlist": shortlist,
        f"--fp32-kernels {fp32_kernels}": fp32_kernels != "auto",
    }
    given = [option for option, used in refused.items() if used]
    if given:
        raise ValueError(
            f"--engine onnxruntime runs fp32 or int8 graphs on the CPU: it does not take {', '.join(given)}"
        )
    translator = OnnxTranslator.from_directory(directory, precision)
    stored = translator.model.description.get("languages")
    source_lang, target_lang = stored if stored else checkpoint_languages(directory)
    return ServedModel(
        name,
        translator,
        translator.tokenizer,
        translator.decode_config,
        precision,
        translator.max_input_tokens,
        source_lang,
        target_lang,
        directory,
    )


def checkpoint_languages(directory: Path) -> tuple[str, str]:
    """Read a checkpoint's source and target languages from what it stores.

    Parameters
    ----------
    directory : Path
        A checkpoint directory.

    Returns
    -------
    tuple of str
        (source, target): from the training run's data settings (``trainer_state.json``), else from a
        converted Marian model's ``tokenizer_config.json``, else ``("und", "und")``.

    Notes
    -----
    The languages name the model in ``GET /languages`` and pick the sentence splitter's rules; an unknown
    language gets the splitter's generic rules and matches any language a LibreTranslate client names.
    """
    state_file = directory / STATE_FILE
    if state_file.is_file():
        data = json.loads(state_file.read_text(encoding="utf-8")).get("experiment", {}).get("data")
        if isinstance(data, dict):
            defaults = DataConfig()
            return (
                str(data.get("source_lang", defaults.source_lang)),
                str(data.get("target_lang", defaults.target_lang)),
            )
    marian_file = directory / MARIAN_TOKENIZER_CONFIG
    if marian_file.is_file():
        settings = json.loads(marian_file.read_text(encoding="utf-8"))
        source, target = settings.get("source_lang"), settings.get("target_lang")
        if isinstance(source, str) and isinstance(target, str):
            return source, target
    return UNKNOWN_LANGUAGE, UNKNOWN_LANGUAGE
