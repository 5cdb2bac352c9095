"""Translate raw text with a trained checkpoint: BPE-encode, search, decode, keep the input order."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from transformer.architectures import SequenceModel, architecture_of
from transformer.checkpoint import MODEL_FILE, load_checkpoint, load_checkpoint_tokenizer
from transformer.config import DecodeConfig
from transformer.data.batching import inference_batches, pad_sequences
from transformer.data.text_tokenizer import TextTokenizer
from transformer.decoding.beam_search import search
from transformer.decoding.search import NonFiniteScoresError
from transformer.device import bf16_unsupported_reason, resolve_device
from transformer.model.config import TransformerConfig
from transformer.model.quantization import quantize_for_inference
from transformer.model.transformer import Transformer

DEFAULT_MAX_INPUT_TOKENS = 1024
#: The ``precision`` values of :class:`Translator` (and of ``transformer translate --precision``).
TRANSLATION_PRECISIONS = ("fp32", "bf16", "int8")


@dataclass(frozen=True)
class Candidate:
    """One translation of one input sentence.

    Parameters
    ----------
    text : str
        Detokenised translation, without leading or trailing whitespace.
    score : float
        Length-normalised log-probability used for ranking (higher is better).
    log_prob : float
        Total log-probability of the output tokens.
    tokens : list of int
        Output token ids (no BOS/EOS).

    Notes
    -----
    ``Translator.translate_nbest`` returns these, best first by ``score``. ``score`` and ``log_prob`` count
    the final EOS (unless the length limit stopped the search), which ``tokens`` and ``text`` leave out.
    """

    text: str
    score: float
    log_prob: float
    tokens: list[int]


class Translator:
    """Turn sentences into translations with a model, its tokenizer and search settings.

    Parameters
    ----------
    model : Transformer or RNNEncoderDecoder
        A trained model (moved to ``device`` and put in eval mode).
    tokenizer : TextTokenizer
        Its tokenizer (this project's joint BPE, or a converted Marian vocabulary).
    decode_config : DecodeConfig or None
        Search settings; the paper's (beam 4, alpha 0.6, input length + 50) by default.
    device : str
        "auto", "cpu", "cuda" or "cuda:N".
    precision : {"fp32", "bf16", "int8"}
        "fp32"; "bf16" (weights cast to bf16: faster on CPUs with AMX and on GPUs, slower on CPUs with
        AVX-512 BF16 alone, refused on CPUs without native bf16, where it is only emulated);
        or "int8" (CPU only: linear layers, the output projection included, with int8 weights and
        activations, see :func:`transformer.model.quantization.quantize_for_inference`; Transformers only).
    max_tokens : int
        Source-token budget per batch (times the beam size in rows decoded together).
    max_input_tokens : int or None
        Longer inputs are truncated to this many BPE tokens (EOS included); defaults to the learned position
        table's size, or 1,024 with sinusoidal encodings. ``truncated_count`` tells how many were cut.

    Notes
    -----
    Inputs are sorted by length for batching and the outputs put back in input order. An empty or
    whitespace-only line translates to an empty line without running the model. ``model`` itself is cast
    (bf16) or has its linear layers replaced (int8); pass a copy to keep the original. Raises ValueError for
    an unknown precision, "bf16" where the device has no native bf16, or "int8" on a GPU or for a model
    other than a Transformer (the recurrent baseline's LSTMs have no int8 kernels here).
    """

    def __init__(
        self,
        model: SequenceModel,
        tokenizer: TextTokenizer,
        decode_config: DecodeConfig | None = None,
        device: str = "auto",
        precision: str = "fp32",
        max_tokens: int = 4096,
        max_input_tokens: int | None = None,
    ) -> None:
        if precision not in TRANSLATION_PRECISIONS:
            raise ValueError(f"precision={precision!r} is not one of {TRANSLATION_PRECISIONS}")
        if tokenizer.vocab_size != model.config.tgt_vocab_size:
            raise ValueError(
                f"tokenizer has {tokenizer.vocab_size} pieces, the model {model.config.tgt_vocab_size} outputs"
            )
        self.device = resolve_device(device, option="device")
        if precision == "int8" and self.device.type != "cpu":
            raise ValueError(
                f"precision='int8' runs on the CPU only (PyTorch's int8 linear kernels, FBGEMM and oneDNN, have "
                f"no {self.device.type} implementation); on {self.device} use precision='bf16'"
            )
        if precision == "int8" and not isinstance(model, Transformer):
            raise ValueError(
                f"precision='int8' quantizes Transformer models only; this model's architecture is "
                f"{architecture_of(model.config)!r} (use precision='fp32' or 'bf16')"
            )
        if precision == "bf16":
            reason = bf16_unsupported_reason(self.device)
            if reason is not None:
                raise ValueError(f"precision='bf16': {reason}; use precision='fp32' or 'int8'")
        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        self.model: SequenceModel = model.to(device=self.device, dtype=dtype).eval()
        if isinstance(self.model, Transformer) and precision == "int8":
            self.model = quantize_for_inference(self.model)
        self.precision = precision
        self.tokenizer = tokenizer
        self.decode_config = decode_config or DecodeConfig()
        self.max_tokens = max_tokens
        config, learned_limit = model.config, None
        if isinstance(config, TransformerConfig) and config.positional_encoding == "learned":
            learned_limit = config.max_positions
        self.max_input_tokens = max_input_tokens or learned_limit or DEFAULT_MAX_INPUT_TOKENS
        self.truncated_count = 0
        #: The weights file the model came from, named when its scores turn out NaN (set by from_checkpoint).
        self.weights_file: Path | None = None

    @classmethod
    def from_checkpoint(
        cls,
        path: str | Path,
        decode_config: DecodeConfig | None = None,
        device: str = "auto",
        precision: str = "fp32",
    ) -> "Translator":
        """Load a translator from a checkpoint directory or a run directory (its best checkpoint).

        Parameters
        ----------
        path : str or Path
            Checkpoint or run directory.
        decode_config : DecodeConfig or None
            Search settings; None takes the checkpoint's (its run's ``decode`` section), else the paper's.
        device : str
            Device setting.
        precision : {"fp32", "bf16", "int8"}
            See :class:`Translator`; "int8" quantises the loaded float32 weights.

        Returns
        -------
        Translator
            Ready to translate.

        Notes
        -----
        Uses the tokenizer stored in the checkpoint, so ids always match the weights. Damaged weights are
        refused when loaded (:func:`~transformer.checkpoint.load_checkpoint`); a model that still computes NaN
        scores stops translating with an error naming its weights file.
        """
        checkpoint = load_checkpoint(Path(path))
        tokenizer = load_checkpoint_tokenizer(checkpoint.path)
        decode_config = decode_config or checkpoint.decode_config
        translator = cls(checkpoint.build_model(), tokenizer, decode_config, device, precision)
        translator.weights_file = checkpoint.path / MODEL_FILE
        return translator

    def translate(self, sentences: Sequence[str], progress: Callable[[int], None] | None = None) -> list[str]:
        """Translate sentences, returning the best translation of each in input order.

        Parameters
        ----------
        sentences : sequence of str
            Raw (untokenised) source sentences.
        progress : callable or None
            Called with the number of sentences each finished batch held (see :meth:`translate_nbest`).

        Returns
        -------
        list of str
            Detokenised translations; empty for empty inputs.

        Notes
        -----
        An empty string also stands for a sentence the search found no finite-probability translation for;
        :meth:`translate_nbest` tells the two apart (an empty candidate list) and gives scores.
        """
        return [
            candidates[0].text if candidates else ""
            for candidates in self.translate_nbest(sentences, progress)
        ]

    def translate_nbest(
        self, sentences: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> list[list[Candidate]]:
        """Translate sentences, returning ``decode_config.nbest`` candidates each, best first.

        Parameters
        ----------
        sentences : sequence of str
            Raw source sentences.
        progress : callable or None
            Called after each batch with the number of sentences it held (empty lines, which need no search,
            are counted before the first), so a caller can show progress; the library itself never prints.

        Returns
        -------
        list of list of Candidate
            Per input sentence in input order; an empty list for an empty input.

        Notes
        -----
        Batches hold sentences of similar length, at most ``max_tokens`` source tokens (padded) each, so a
        long input does not pad a batch of short ones. Inputs longer than ``max_input_tokens`` are cut
        silently; ``truncated_count`` adds them up over every call on this translator. A model whose scores
        are NaN (damaged or overflowing weights) raises ValueError naming its weights file, instead of
        returning empty translations.
        """
        encoded = [self._encode(sentence) for sentence in sentences]
        results: list[list[Candidate]] = [[] for _ in sentences]
        lengths = [len(ids) for ids in encoded]
        batches = inference_batches(lengths, self.max_tokens)
        if progress is not None:
            progress(len(sentences) - sum(len(batch) for batch in batches))  # empty lines: nothing to search
        for batch_indices in batches:
            src_tokens = pad_sequences([encoded[index] for index in batch_indices], self.model.config.pad_id)
            src_tokens = src_tokens.to(self.device)
            try:
                hypotheses = search(self.model, src_tokens, self.decode_config)
            except NonFiniteScoresError as error:
                raise ValueError(f"{self.weights_file or 'the model'}: {error}") from None
            for index, sentence_hypotheses in zip(batch_indices, hypotheses, strict=True):
                results[index] = [
                    Candidate(
                        self.tokenizer.decode(item.tokens).strip(), item.score, item.log_prob, item.tokens
                    )
                    for item in sentence_hypotheses
                ]
            if progress is not None:
                progress(len(batch_indices))
        return results

    def _encode(self, sentence: str) -> list[int]:
        if not sentence.strip():
            return []
        ids = self.tokenizer.encode(sentence.strip())
        if len(ids) + 1 > self.max_input_tokens:
            ids = ids[: self.max_input_tokens - 1]
            self.truncated_count += 1
        return [*ids, self.model.config.eos_id]
