"""Translation throughput: our search against HF ``MarianMTModel.generate()`` and CTranslate2 on one model.

Every system translates the same batches of random source ids (the base shape, random weights) and is made
to produce exactly the same number of tokens (minimum = maximum output length), so the figures compare the
same work: greedy and beam search, with and without our key/value cache, fp32, bf16 and int8. HF and CTranslate2
run the very weights of our model, exported by ``transformer.interop``; where that module or the toolkit is
missing, the comparison is skipped with the reason recorded. CTranslate2 runs in a worker process of its own
(``bench_ctranslate2``): in the same process its OpenMP runtime slows PyTorch down.
"""

import contextlib
import copy
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from benchmarks.bench_common import Section, describe_import_failure, time_interleaved
from benchmarks.bench_ctranslate2 import CTranslate2Worker
from benchmarks.bench_data import random_ids, train_synthetic_tokenizer
from benchmarks.bench_flops import ModelShape, decoding_flops_per_sentence
from benchmarks.bench_settings import Settings, model_config
from transformer.checkpoint.layout import TOKENIZER_FILE
from transformer.checkpoint.model_checkpoint import save_checkpoint
from transformer.config.decode import DecodeConfig
from transformer.data.pipeline.special_tokens import EOS_ID
from transformer.data.pipeline.tokenizer import Tokenizer
from transformer.decoding.beam_search import search
from transformer.model.quantization import quantize_for_inference
from transformer.model.transformer import Transformer

METHOD = (
    "{sentences} random source sentences of {source_length} tokens (EOS included), batches of {batch_size}, "
    "{model} shape with random weights; every system is forced to emit exactly {output_length} tokens per "
    "sentence (minimum = maximum output length), and the tokens actually produced are counted. Ours: "
    "`transformer.decoding.beam_search.search(model, src_tokens, DecodeConfig(beam_size, min_length, "
    "max_length, use_cache))`, bf16 = weights cast to bf16 as `Translator(precision='bf16')` does, int8 = "
    "`transformer.model.quantization.quantize_for_inference` (per-channel int8 weights of every linear layer "
    "and of the output projection, int8 activations quantised per call) as `Translator(precision='int8')` "
    "does; rows without the key/value cache translate the first {uncached_sentences} sentences. HF: "
    "`MarianMTModel.generate("
    "num_beams, min_new_tokens, max_new_tokens)` on our weights exported by "
    "`transformer.interop.marian.export_marian`. CTranslate2: `Translator.translate_batch(beam_size, "
    "min_decoding_length, max_decoding_length)` on the export of `transformer.interop.ctranslate2`, in a worker "
    "process of its own (`bench_ctranslate2.py`: a CTranslate2 translator in the same process slows PyTorch's "
    "decoding about 1.8x through its second OpenMP runtime). After an "
    "untimed pass over the first batch ({warmup_length} output tokens), all systems run in interleaved rounds; "
    "the figure is the median over {repeats} rounds. Ratios compare ours with the same beam, cache on, in the "
    "matching precision (fp32 with fp32, bf16 with bf16, int8 with int8)."
)
HF_NAME = "HF MarianMTModel.generate()"
CT2_NAME = "CTranslate2"
#: CTranslate2 compute type -> our precision it is compared with.
CT2_COMPUTE_TYPES = {"float32": "fp32", "bfloat16": "bf16", "int8": "int8"}


@dataclass
class TranslationSystem:
    """One row of the translation table: a system with its settings and a function translating a batch.

    Parameters
    ----------
    system : str
        "ours", HF or CTranslate2.
    precision : str
        "fp32", "bf16", "int8" or a CTranslate2 compute type.
    beam_size : int
        1 for greedy.
    use_cache : bool
        Our key/value cache (always True for the others, which always cache).
    batches : list of torch.Tensor, each shape (batch, src_len), int64
        The source batches of one timed pass.
    translate : callable
        ``translate(batch, output_length)`` translates one batch, forcing the output length, and returns
        the number of output tokens produced.
    compared_precision : str
        Which of our precisions its ratio uses.

    Notes
    -----
    ``output_tokens`` is filled by the timed passes.
    """

    system: str
    precision: str
    beam_size: int
    use_cache: bool
    batches: list[Tensor]
    translate: Callable[[Tensor, int], int]
    compared_precision: str
    output_tokens: int = 0

    @property
    def label(self) -> str:
        cache = "" if self.use_cache else ", no cache"
        search_name = "greedy" if self.beam_size == 1 else f"beam {self.beam_size}"
        return f"{self.system} {self.precision} {search_name}{cache}"

    def run_pass(self, output_length: int) -> None:
        self.output_tokens = sum(self.translate(batch, output_length) for batch in self.batches)


def measure_translation(
    section: Section, settings: Settings, threads: int, peaks: dict[str, float] | None = None
) -> None:
    """Time every translation system on the same batches; add one row per system to ``section``.

    Parameters
    ----------
    section : Section
        Receives rows (tokens/s, sentences/s, ratios) and the skipped comparisons.
    settings : Settings
        Model shape, sentence counts, lengths, beams and repeats.
    threads : int
        Intra-op threads for CTranslate2 (PyTorch's are set by the caller).
    peaks : dict of str to float or None
        Peak matmul GFLOP/s per precision (the matmul section's), for each row's share of the peak.

    Returns
    -------
    None

    Notes
    -----
    A row whose produced token count differs from sentences x output length is flagged
    (``forced_length_ok`` False): its work differs from the others'. Each row carries the matmul GFLOP/s
    the search achieved (:func:`benchmarks.bench_flops.decoding_flops_per_sentence`; the uncached rows
    count the same useful work) and its share of the peak of its precision.
    """
    section.method = METHOD.format(
        sentences=settings.translation_sentences,
        source_length=settings.translation_source_length,
        batch_size=settings.translation_batch_size,
        model=settings.translation_model,
        output_length=settings.translation_output_length,
        uncached_sentences=settings.translation_uncached_sentences,
        warmup_length=settings.translation_warmup_length,
        repeats=settings.translation_repeats,
    )
    config = model_config(settings.translation_model)
    torch.manual_seed(0)
    model = Transformer(config).eval()
    generator = torch.Generator().manual_seed(0)
    sources = random_ids(
        generator, settings.translation_sentences, settings.translation_source_length - 1, config.vocab_size
    )
    sources = torch.cat([sources, torch.full((len(sources), 1), EOS_ID)], dim=1)  # (sentences, src_len)
    batches = list(sources.split(settings.translation_batch_size))
    uncached_batches = list(
        sources[: settings.translation_uncached_sentences].split(settings.translation_batch_size)
    )
    if not settings.translation_uncached and settings.mode != "smoke":
        section.notes.append(
            f"Not measured in {settings.mode} mode (full mode measures it): ours without the key/value cache."
        )
    with (
        tempfile.TemporaryDirectory(prefix="transformer-bench-translate-") as scratch,
        contextlib.ExitStack() as stack,
    ):
        systems = _our_systems(section, model, settings, batches, uncached_batches)
        exported = _export_checkpoint(model, Path(scratch))
        systems += _hf_systems(section, settings, exported, batches)
        systems += _ct2_systems(section, settings, exported, batches, threads, stack)
        flops_per_sentence = {
            beam: decoding_flops_per_sentence(
                ModelShape.from_config(config),
                settings.translation_source_length,
                settings.translation_output_length,
                beam,
            )
            for beam in {system.beam_size for system in systems}
        }
        _time_systems(section, settings, systems, flops_per_sentence, peaks or {})


def _our_systems(
    section: Section,
    model: Transformer,
    settings: Settings,
    batches: list[Tensor],
    uncached_batches: list[Tensor],
) -> list[TranslationSystem]:
    models = {"fp32": model}
    if "bf16" in settings.precisions:
        models["bf16"] = copy.deepcopy(model).to(torch.bfloat16)
    else:
        section.skip("ours bf16", str(settings.bf16_skipped))
    try:
        models["int8"] = quantize_for_inference(copy.deepcopy(model))
    except RuntimeError as error:  # no quantized engine in this torch build or on this CPU
        section.skip("ours int8", f"quantisation failed: {type(error).__name__}: {error}")
    systems = []
    variants = [(precision, beam, True) for precision in models for beam in settings.translation_beams]
    variants += [(precision, beam, False) for precision, beam in settings.translation_uncached]
    for precision, beam_size, use_cache in variants:

        def translate(
            batch: Tensor,
            output_length: int,
            model: Transformer = models[precision],
            beam_size: int = beam_size,
            use_cache: bool = use_cache,
        ) -> int:
            config = DecodeConfig(
                beam_size=beam_size, min_length=output_length, max_length=output_length, use_cache=use_cache
            )
            return sum(len(hypotheses[0].tokens) for hypotheses in search(model, batch, config))

        systems.append(
            TranslationSystem(
                system="ours",
                precision=precision,
                beam_size=beam_size,
                use_cache=use_cache,
                batches=batches if use_cache else uncached_batches,
                translate=translate,
                compared_precision=precision,
            )
        )
    return systems


def _export_checkpoint(model: Transformer, scratch: Path) -> Path:
    """Save the model as our checkpoint (with a real tokenizer of its vocabulary size) for the exporters."""
    tokenizer = train_synthetic_tokenizer(model.config.vocab_size, scratch / TOKENIZER_FILE)
    directory = scratch / "checkpoint"
    save_checkpoint(directory, model, model.config, {TOKENIZER_FILE: tokenizer.serialized()})
    return directory


def _hf_systems(
    section: Section, settings: Settings, checkpoint: Path, batches: list[Tensor]
) -> list[TranslationSystem]:
    failure = describe_import_failure("transformers") or describe_import_failure("transformer.interop.marian")
    if failure:
        section.skip(HF_NAME, failure)
        return []
    import transformers

    from transformer.interop.marian import export_marian

    transformers.utils.logging.set_verbosity_error()  # keep the suite's output to its progress lines
    transformers.utils.logging.disable_progress_bar()
    output_dir = checkpoint.parent / "marian"
    try:
        export_marian(checkpoint, output_dir)
        hf_model = transformers.MarianMTModel.from_pretrained(output_dir).eval()
    except Exception as error:
        section.skip(HF_NAME, f"export or load failed: {type(error).__name__}: {error}")
        return []
    models = {"fp32": hf_model}
    if "bf16" in settings.precisions:
        models["bf16"] = copy.deepcopy(hf_model).to(torch.bfloat16)
    systems = []
    for precision, beam_size in [
        (precision, beam) for precision in models for beam in settings.translation_beams
    ]:

        def translate(
            batch: Tensor, output_length: int, model: Any = models[precision], beam_size: int = beam_size
        ) -> int:
            with torch.inference_mode():
                output = model.generate(
                    input_ids=batch,
                    attention_mask=torch.ones_like(batch),
                    num_beams=beam_size,
                    min_new_tokens=output_length,
                    max_new_tokens=output_length,
                    do_sample=False,
                )  # (batch, 1 + new tokens): the decoder start token first
            return output.size(0) * (output.size(1) - 1)

        systems.append(TranslationSystem(HF_NAME, precision, beam_size, True, batches, translate, precision))
    return systems


def _ct2_systems(
    section: Section,
    settings: Settings,
    checkpoint: Path,
    batches: list[Tensor],
    threads: int,
    stack: contextlib.ExitStack,
) -> list[TranslationSystem]:
    failure = describe_import_failure("ctranslate2") or describe_import_failure(
        "transformer.interop.ctranslate2"
    )
    if failure:
        section.skip(CT2_NAME, failure)
        return []
    import ctranslate2  # importing alone does not disturb PyTorch; a Translator does (bench_ctranslate2)

    from transformer.interop.ctranslate2 import export_ctranslate2, vocabulary_pieces

    output_dir = checkpoint.parent / "ctranslate2"
    try:
        export_ctranslate2(checkpoint, output_dir, None)  # float32 weights; other types convert on load
        source_pieces = vocabulary_pieces(Tokenizer.load(checkpoint / TOKENIZER_FILE))[0]
        config = json.loads((output_dir / "config.json").read_text(encoding="utf-8"))
    except Exception as error:
        section.skip(CT2_NAME, f"export failed: {type(error).__name__}: {error}")
        return []
    # CTranslate2 takes pieces, not ids; it appends the source EOS itself only if its config says so.
    keep = None if config.get("add_source_eos", False) else batches[0].size(1)
    piece_batches = [
        [[source_pieces[token] for token in row[:keep]] for row in batch.tolist()] for batch in batches
    ]
    batch_indices = {id(batch): index for index, batch in enumerate(batches)}
    supported = ctranslate2.get_supported_compute_types("cpu")
    compute_types = []
    for compute_type in CT2_COMPUTE_TYPES:
        if CT2_COMPUTE_TYPES[compute_type] not in (*settings.precisions, "int8"):
            section.skip(f"{CT2_NAME} {compute_type}", str(settings.bf16_skipped))
        elif compute_type in supported:
            compute_types.append(compute_type)
        else:
            section.skip(
                f"{CT2_NAME} {compute_type}", f"not supported by this build on this CPU ({sorted(supported)})"
            )
    if not compute_types:
        return []
    try:
        worker = stack.enter_context(
            CTranslate2Worker(output_dir, piece_batches, compute_types, threads, checkpoint.parent)
        )
    except RuntimeError as error:  # the worker could not load the model: the other systems still run
        section.skip(CT2_NAME, f"worker failed: {' '.join(str(error).split())[-500:]}")
        return []
    systems = []
    for compute_type in compute_types:
        for beam_size in settings.translation_beams:

            def translate(
                batch: Tensor,
                output_length: int,
                compute_type: str = compute_type,
                beam_size: int = beam_size,
            ) -> int:
                return worker.translate(compute_type, beam_size, batch_indices[id(batch)], output_length)

            systems.append(
                TranslationSystem(
                    CT2_NAME,
                    compute_type,
                    beam_size,
                    True,
                    batches,
                    translate,
                    CT2_COMPUTE_TYPES[compute_type],
                )
            )
    return systems


def _time_systems(
    section: Section,
    settings: Settings,
    systems: list[TranslationSystem],
    flops_per_sentence: dict[int, float],
    peaks: dict[str, float],
) -> None:
    """Warm every system up on its first batch, time them in interleaved rounds, and write the rows."""
    output_length = settings.translation_output_length
    for system in systems:
        # The real code path on the first batch; quick mode shortens the output to save time.
        system.translate(system.batches[0], settings.translation_warmup_length)
    passes = {system.label: (lambda system=system: system.run_pass(output_length)) for system in systems}
    timings = time_interleaved(passes, 0, settings.translation_repeats)
    our_rates = {
        (system.precision, system.beam_size): system.output_tokens / timings[system.label].median
        for system in systems
        if system.system == "ours" and system.use_cache
    }
    for system in systems:
        timing = timings[system.label]
        sentences = sum(len(batch) for batch in system.batches)
        rate = system.output_tokens / timing.median
        ours_rate = our_rates.get((system.compared_precision, system.beam_size))
        if system.system == "ours" and system.use_cache:
            ours_rate = None  # the row itself
        gflop_per_s = flops_per_sentence[system.beam_size] * sentences / timing.median / 1e9
        peak = peaks.get(system.compared_precision)
        section.rows.append(
            {
                "system": system.system,
                "precision": system.precision,
                "beam_size": system.beam_size,
                "use_cache": system.use_cache,
                "sentences": sentences,
                "output_tokens": system.output_tokens,
                "forced_length_ok": system.output_tokens == sentences * output_length,
                "sentences_per_s": sentences / timing.median,
                "tokens_per_s": rate,
                "compared_with": f"ours {system.compared_precision} (cache)",
                "ours_over_this": ours_rate / rate if ours_rate is not None else None,
                "gflop_per_s": gflop_per_s,
                "share_of_peak": gflop_per_s / peak if peak else None,
                **timing.to_dict(),
            }
        )
