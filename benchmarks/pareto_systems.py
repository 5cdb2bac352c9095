"""The systems of the quality-speed benchmark: ours, onnxruntime, CTranslate2 and HF ``generate()``, same weights.

Every system takes raw source sentences and returns detokenised translations; its time covers tokenisation,
search and detokenisation (what a user of each tool waits for), with the model loaded beforehand. The search
is the same for all: greedy or beam 4, the power length penalty with alpha 1 (configs/multi30k's decode),
outputs up to the source length + 50 tokens. CTranslate2 and HF run on weights exported from the checkpoint
by this project's converters, so every row computes the same function up to each engine's arithmetic. The
onnxruntime rows run our searches over the ONNX export's graphs (``convert --to onnx``), so they differ from ours
in the arithmetic of the network alone.
"""

import contextlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from benchmarks.bench_common import describe_import_failure
from benchmarks.pareto_ct2 import LENGTH_PENALTY, MAX_LENGTH_OFFSET, ParetoCTranslate2Worker
from transformer.checkpoint.layout import resolve_checkpoint
from transformer.checkpoint.model_checkpoint import load_checkpoint, load_checkpoint_tokenizer
from transformer.config.decode import DecodeConfig
from transformer.data.pipeline.batch import pad_sequences
from transformer.decoding.batch_workers import run_batches
from transformer.decoding.translator import Translator
from transformer.model.config import TransformerConfig

#: The benchmark's two searches, by row label.
SEARCHES = {"greedy": 1, "beam 4": 4}
#: Our translator's precisions, each run with and without the checkpoint's shortlist.
OUR_PRECISIONS = ("fp32", "bf16", "int8")
#: Our translator's source-token budget: large enough that each benchmark batch is one search.
ONE_BATCH_TOKENS = 1_000_000
#: CTranslate2's compute types in the benchmark: int8 (the comparison of the issue's targets) and float32.
CT2_COMPUTE_TYPES = ["int8", "float32"]

#: A system's translation of some sentences with a beam size: (translations, seconds).
TranslateFunction = Callable[[list[int], int], tuple[list[str], float]]
#: A system's translation of many batches at once with a beam size: (translations per batch, seconds).
BatchesFunction = Callable[[list[list[int]], int], tuple[list[list[str]], float]]


@dataclass
class System:
    """One engine, precision and vocabulary setting, translating sentences of the benchmark by index.

    Parameters
    ----------
    name : str
        Row label, e.g. ``"ours int8 + shortlist"``; also the key a resumed run skips by.
    engine : {"ours", "student", "onnxruntime", "ctranslate2", "hf"}
        Which toolkit ("student": ours, on a student distilled from the checkpoint).
    precision : str
        ``fp32``, ``bf16`` or ``int8`` (CTranslate2's ``float32`` is written ``fp32``).
    shortlist : bool
        Whether the output vocabulary is restricted (our shortlist, CTranslate2's vocabulary map of it).
    translate : callable
        ``translate(indices, beam_size) -> (translations, seconds)`` at the thread count last set with
        :meth:`SystemSet.set_threads`.
    workers : int
        Batches it searches at once (``Translator.workers``; CTranslate2's ``inter_threads``); 1 for every
        system but the ``--workers`` rows.
    translate_batches : callable or None
        ``translate_batches(batches, beam_size) -> (translations per batch, seconds)``: all of a pass's
        batches in one call, ``workers`` at a time; None for systems that take one batch per call.

    Notes
    -----
    The name says everything that changes the result, since rows are resumed by it. A system with workers
    runs only where the thread count is at least ``workers`` (each worker on ``threads // workers``), and
    only in throughput passes: one sentence at a time has nothing to share.
    """

    name: str
    engine: str
    precision: str
    shortlist: bool
    translate: TranslateFunction
    workers: int = 1
    translate_batches: BatchesFunction | None = None


class SystemSet:
    """Build every system of the benchmark for one checkpoint, skipping (with the reason) what cannot run.

    Parameters
    ----------
    checkpoint : pathlib.Path
        Our checkpoint (a run directory means its best); its ``shortlist.safetensors`` gives the shortlisted
        rows and, exported, CTranslate2's vocabulary map.
    sentences : list of str
        The raw source sentences the systems translate by index.
    scratch : pathlib.Path
        Directory for the exports and the CTranslate2 worker's files.
    engines : set of str
        Which of ``ours``, ``onnxruntime``, ``ctranslate2`` and ``hf`` to build.
    precisions : sequence of str
        Our precisions (for the checkpoint and the student).
    student : pathlib.Path or None
        A student distilled from the checkpoint, built as ours is (engine ``student``); None: none.
    workers : int
        Above 1, ours (and the student) also run as that many workers searching batches at once
        (:mod:`transformer.decoding.batch_workers`), and CTranslate2 with that many ``inter_threads``, one
        more row per system.

    Notes
    -----
    Use as a context manager: leaving it stops the CTranslate2 workers. CTranslate2 runs in worker processes
    (one per thread count, started when first needed), never in this process (see
    :mod:`benchmarks.pareto_ct2`).
    """

    def __init__(
        self,
        checkpoint: Path,
        sentences: list[str],
        scratch: Path,
        engines: set[str],
        precisions: Sequence[str] = OUR_PRECISIONS,
        student: Path | None = None,
        workers: int = 1,
    ) -> None:
        self.checkpoint = checkpoint
        self.workers = workers
        self.precisions = tuple(precisions)
        self.sentences = sentences
        self.scratch = scratch
        self.systems: list[System] = []
        #: System name -> why it was not built.
        self.skipped: dict[str, str] = {}
        self.threads = torch.get_num_threads()
        self._stack = contextlib.ExitStack()
        self._ct2_workers: dict[tuple[int, int], ParetoCTranslate2Worker] = {}
        self._ct2_dir: Path | None = None
        self._tokenizer: Any = None
        if "ours" in engines:
            self._add_ours()
        if student is not None:
            self._add_ours(student, "student")
        if "onnxruntime" in engines:
            self._add_onnxruntime()
        if "ctranslate2" in engines:
            self._add_ctranslate2()
        if "hf" in engines:
            self._add_hf()

    def set_threads(self, threads: int) -> None:
        """Run the following translations on ``threads`` intra-op threads (PyTorch's and CTranslate2's).

        Parameters
        ----------
        threads : int
            Thread count.

        Returns
        -------
        None

        Notes
        -----
        CTranslate2 fixes its thread count when a translator loads, so each count has a worker of its own.
        """
        torch.set_num_threads(threads)
        self.threads = threads

    def target_tokenizer(self) -> Any:
        """The checkpoint's tokenizer, which counts every system's target tokens alike.

        Returns
        -------
        TextTokenizer
            Loaded once.

        Notes
        -----
        Counting the pieces of each detokenised output, rather than each engine's own ids, counts every
        system the same way (EOS never, a piece the detokeniser drops never).
        """
        if self._tokenizer is None:
            self._tokenizer = load_checkpoint_tokenizer(resolve_checkpoint(self.checkpoint))
        return self._tokenizer

    def _add_ours(self, checkpoint: Path | None = None, label: str = "ours") -> None:
        """Our translator in each precision, with and without the shortlist: of the checkpoint, or a student."""
        for precision in self.precisions:
            for shortlist in (False, True):
                name = f"{label} {precision}" + (" + shortlist" if shortlist else "")
                try:
                    translator = Translator.from_checkpoint(
                        checkpoint or self.checkpoint, device="cpu", precision=precision, shortlist=shortlist
                    )
                except ValueError as error:  # bf16 without native bf16; no shortlist file
                    self.skipped[name] = str(error)
                    continue
                translator.max_tokens = ONE_BATCH_TOKENS
                translate = self._ours_function(translator)
                self.systems.append(System(name, label, precision, shortlist, translate))
                if self.workers > 1:
                    batches = self._ours_batches_function(translate)
                    self.systems.append(
                        System(f"{name} ({self.workers} workers)", label, precision, shortlist, translate,
                               self.workers, batches)
                    )  # fmt: skip

    def _ours_function(self, translator: Translator) -> TranslateFunction:
        """Translate with our translator at a beam size, nothing of the checkpoint's search kept.

        A checkpoint's ``decode`` section may hold settings CTranslate2 is never given (n-gram blocking,
        minimum lengths), so the search is built from the defaults and the benchmark's settings alone.
        """
        searches = benchmark_searches()

        def translate(indices: list[int], beam_size: int) -> tuple[list[str], float]:
            translator.decode_config = searches[beam_size]
            batch = [self.sentences[index] for index in indices]
            started = time.perf_counter()
            translations = translator.translate(batch)
            return translations, time.perf_counter() - started

        return translate

    def _ours_batches_function(self, translate: TranslateFunction) -> BatchesFunction:
        """Translate a pass's batches ``workers`` at a time, each worker on its share of the threads.

        The batches are the benchmark's (the same sentences together as in the one-at-a-time rows), each
        through ``translate``, run by the pool ``Translator.workers`` uses
        (:func:`~transformer.decoding.batch_workers.run_batches`).
        """

        def translate_batches(batches: list[list[int]], beam_size: int) -> tuple[list[list[str]], float]:
            threads = torch.get_num_threads()
            torch.set_num_threads(max(1, threads // self.workers))
            try:
                started = time.perf_counter()
                outputs = run_batches(batches, lambda batch: translate(batch, beam_size)[0], self.workers)
                return outputs, time.perf_counter() - started
            finally:
                torch.set_num_threads(threads)

        return translate_batches

    def _add_onnxruntime(self) -> None:
        """Our searches on onnxruntime, fp32 and int8 graphs of the checkpoint's ONNX export."""
        names = ["onnxruntime fp32", "onnxruntime int8"]
        failure = next(
            (describe_import_failure(name) for name in ("onnx", "onnxscript", "onnxruntime")
             if describe_import_failure(name)),
            None,
        )  # fmt: skip
        if failure:
            self.skipped.update(dict.fromkeys(names, failure))
            return
        from transformer.interop.onnx_export import export_onnx

        try:
            directory = export_onnx(self.checkpoint, self.scratch / "onnx", "int8")
        except ValueError as error:
            self.skipped.update(dict.fromkeys(names, f"export to ONNX refused: {error}"))
            return
        for precision in ("fp32", "int8"):
            function = self._onnx_function(directory, precision)
            self.systems.append(System(f"onnxruntime {precision}", "onnxruntime", precision, False, function))

    def _onnx_function(self, directory: Path, precision: str) -> TranslateFunction:
        """Translate with the export's graphs of ``precision``, one set of sessions per thread count.

        onnxruntime fixes a session's intra-op threads when it is created, so each count gets its own.
        """
        from transformer.interop.onnx_translation import OnnxTranslator

        searches = benchmark_searches()
        translators: dict[int, OnnxTranslator] = {}

        def translate(indices: list[int], beam_size: int) -> tuple[list[str], float]:
            if self.threads not in translators:
                translators[self.threads] = OnnxTranslator.from_directory(directory, precision, self.threads)
                translators[self.threads].max_tokens = ONE_BATCH_TOKENS
            translator = translators[self.threads]
            translator.decode_config = searches[beam_size]
            batch = [self.sentences[index] for index in indices]
            started = time.perf_counter()
            translations = translator.translate(batch)
            return translations, time.perf_counter() - started

        return translate

    def _add_ctranslate2(self) -> None:
        """CTranslate2 int8 (with and without the vocabulary map) and float32 on the exported weights."""
        names = ["CTranslate2 int8", "CTranslate2 int8 + vmap", "CTranslate2 fp32"]
        failure = describe_import_failure("ctranslate2") or describe_import_failure(
            "transformer.interop.ctranslate2"
        )
        if failure:
            self.skipped.update(dict.fromkeys(names, failure))
            return
        from transformer.interop.ctranslate2 import export_ctranslate2
        from transformer.interop.ctranslate2_vocabulary_map import VOCABULARY_MAP_FILE

        try:
            self._ct2_dir = export_ctranslate2(self.checkpoint, self.scratch / "ctranslate2")
        except ValueError as error:
            self.skipped.update(dict.fromkeys(names, f"export to CTranslate2 refused: {error}"))
            return
        (self.scratch / "sentences.json").write_text(json.dumps(self.sentences), encoding="utf-8")
        has_vmap = (self._ct2_dir / VOCABULARY_MAP_FILE).is_file()
        for name, compute_type, vmap in [
            ("CTranslate2 int8", "int8", False),
            ("CTranslate2 int8 + vmap", "int8", True),
            ("CTranslate2 fp32", "float32", False),
        ]:
            if vmap and not has_vmap:
                self.skipped[name] = "the checkpoint has no shortlist, so its export has no vmap.txt"
                continue
            precision = "fp32" if compute_type == "float32" else compute_type
            function = self._ct2_function(compute_type, vmap)
            self.systems.append(System(name, "ctranslate2", precision, vmap, function))
            if self.workers > 1:  # its inter_threads, as our --workers: batches searched at once
                batches = self._ct2_batches_function(compute_type, vmap)
                self.systems.append(
                    System(f"{name} ({self.workers} workers)", "ctranslate2", precision, vmap, function,
                           self.workers, batches)
                )  # fmt: skip

    def _ct2_function(self, compute_type: str, vmap: bool) -> TranslateFunction:
        """Translate in the CTranslate2 worker of the current thread count."""

        def translate(indices: list[int], beam_size: int) -> tuple[list[str], float]:
            return self._ct2_worker().translate_sentences(compute_type, vmap, beam_size, indices)

        return translate

    def _ct2_batches_function(self, compute_type: str, vmap: bool) -> BatchesFunction:
        """Translate a pass's batches ``workers`` at a time in a CTranslate2 worker with that ``inter_threads``.

        Each batch runs on ``threads // workers`` intra-op threads, as each of our workers does.
        """

        def translate_batches(batches: list[list[int]], beam_size: int) -> tuple[list[list[str]], float]:
            worker = self._ct2_worker(inter_threads=self.workers)
            return worker.translate_batches(compute_type, vmap, beam_size, batches)

        return translate_batches

    def _ct2_worker(self, inter_threads: int = 1) -> ParetoCTranslate2Worker:
        """The worker of the current thread count (split over ``inter_threads`` batches), started on first use."""
        intra_threads = max(1, self.threads // inter_threads)
        key = (intra_threads, inter_threads)
        if key not in self._ct2_workers:
            assert self._ct2_dir is not None
            worker = ParetoCTranslate2Worker(
                self._ct2_dir,
                self.scratch / "sentences.json",
                CT2_COMPUTE_TYPES,
                intra_threads,
                self.scratch / f"ct2-worker-{intra_threads}x{inter_threads}.stderr",
                inter_threads,
            )
            self._stack.enter_context(worker)
            self._ct2_workers[key] = worker
        return self._ct2_workers[key]

    def _add_hf(self) -> None:
        """HF ``MarianMTModel.generate()`` in fp32 on the exported Marian model."""
        name = "HF generate() fp32"
        failure = describe_import_failure("transformers") or describe_import_failure(
            "transformer.interop.marian"
        )
        if failure:
            self.skipped[name] = failure
            return
        import transformers

        from transformer.interop.marian import export_marian

        transformers.utils.logging.set_verbosity_error()  # type: ignore[no-untyped-call]
        transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        try:
            output_dir = export_marian(self.checkpoint, self.scratch / "marian")
        except ValueError as error:  # e.g. a pre-norm model: MarianMT is post-norm only
            self.skipped[name] = f"export to MarianMT refused: {error}"
            return
        model = transformers.MarianMTModel.from_pretrained(output_dir)
        model.eval()  # type: ignore[no-untyped-call]
        config = load_checkpoint(resolve_checkpoint(self.checkpoint)).model_config  # our special ids
        if not isinstance(config, TransformerConfig):
            self.skipped[name] = "not a Transformer checkpoint"
            return
        self.systems.append(System(name, "hf", "fp32", False, self._hf_function(model, config)))

    def _hf_function(self, model: Any, config: TransformerConfig) -> TranslateFunction:
        """Translate with ``generate()``, encoding and decoding with the checkpoint's own tokenizer."""
        tokenizer = self.target_tokenizer()

        def translate(indices: list[int], beam_size: int) -> tuple[list[str], float]:
            started = time.perf_counter()
            encoded = [[*tokenizer.encode(self.sentences[index].strip()), config.eos_id] for index in indices]
            src_tokens = pad_sequences(encoded, config.pad_id)
            with torch.inference_mode():
                output = model.generate(
                    input_ids=src_tokens,
                    attention_mask=src_tokens != config.pad_id,
                    num_beams=beam_size,
                    do_sample=False,
                    length_penalty=LENGTH_PENALTY,
                    max_new_tokens=max(len(ids) for ids in encoded) + MAX_LENGTH_OFFSET,
                )  # (batch, 1 + new tokens): the decoder start token first
            translations = [tokenizer.decode(row[1:].tolist()).strip() for row in output]
            return translations, time.perf_counter() - started

        return translate

    def __enter__(self) -> "SystemSet":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stack.close()


def benchmark_searches() -> dict[int, DecodeConfig]:
    """The benchmark's search for each beam size, as every system runs it.

    Returns
    -------
    dict of int to DecodeConfig
        Beam size (1 or 4) -> the power length penalty with the benchmark's alpha and length offset.

    Notes
    -----
    A checkpoint's ``decode`` section may hold settings CTranslate2 is never given (n-gram blocking, minimum
    lengths), so the search is built from the defaults and the benchmark's settings alone.
    """
    return {
        beam: DecodeConfig(
            beam_size=beam,
            length_penalty=LENGTH_PENALTY,
            length_penalty_form="power",
            max_length_offset=MAX_LENGTH_OFFSET,
        )
        for beam in SEARCHES.values()
    }
