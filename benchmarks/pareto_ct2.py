"""CTranslate2 for the quality-speed benchmark, in a worker process of its own (one per thread count).

A CTranslate2 translator in the benchmark's process slows PyTorch's decoding there (its second OpenMP runtime,
``bench_ctranslate2``), so the translators live in ``python -m benchmarks.pareto_ct2 --model-dir DIR --sentences
FILE --threads N --compute-types int8,float32``, which answers one JSON line per request. Unlike the suite's
worker it translates real text, raw sentences in and detokenised translations out, through
:class:`~transformer.interop.ctranslate2.CTranslate2Translator` (the ``translate --engine ctranslate2`` path, so
its tokenisation and truncation are ours), and it times each request itself: the seconds exclude the pipe.
A batch is one CTranslate2 call whose length limit is the batch's longest source + 50 (ours is each sentence's
own source + 50; outputs end long before either).

Protocol (one JSON object per line): the worker first prints ``{"ready": true}``; a request
``{"compute_type": "int8", "vmap": false, "beam_size": 4, "sentences": [0, 1, ...]}`` translates those sentences
of the file as one batch and is answered ``{"translations": [...], "seconds": 0.123}``; end of input stops it.
"""

import argparse
import concurrent.futures
import functools
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_ctranslate2 import CTranslate2Worker
from benchmarks.bench_worker import REPOSITORY, worker_command

#: CTranslate2's length penalty in the benchmark's search: the power form, alpha 1 (configs/multi30k's decode).
LENGTH_PENALTY = 1.0
#: Longest output = source length + this, as our ``DecodeConfig.max_length_offset`` default.
MAX_LENGTH_OFFSET = 50
#: An offset past any limit, so that every sentence of a batch shares the batch's limit (one call).
ONE_GROUP_OFFSET = 1_000_000


class ParetoCTranslate2Worker(CTranslate2Worker):
    """A worker process holding one CTranslate2 translator per compute type, at one thread count.

    Parameters
    ----------
    model_dir : pathlib.Path
        A ``transformer convert --to ctranslate2`` export (float32 weights; ``vmap.txt`` for the vocabulary map).
    sentences_file : pathlib.Path
        JSON list of the raw source sentences the requests index.
    compute_types : list of str
        E.g. ``["int8", "float32"]``.
    threads : int
        CTranslate2's ``intra_threads``.
    stderr_path : pathlib.Path
        Where the worker's standard error goes (named when it dies).
    inter_threads : int
        CTranslate2's ``inter_threads``: batches translated at once by :meth:`translate_batches`.

    Notes
    -----
    Use as a context manager: leaving it closes the worker's input and waits for it (killed after 30 s). Its
    reading of replies and its closing are the suite's worker's (:class:`benchmarks.bench_ctranslate2.
    CTranslate2Worker`); only the process it starts and its requests differ.
    """

    def __init__(
        self,
        model_dir: Path,
        sentences_file: Path,
        compute_types: list[str],
        threads: int,
        stderr_path: Path,
        inter_threads: int = 1,
    ) -> None:  # the suite's worker's __init__ starts another process: not called
        arguments: dict[str, object] = {
            "model-dir": model_dir,
            "sentences": sentences_file,
            "threads": threads,
            "compute-types": ",".join(compute_types),
            "inter-threads": inter_threads,
        }
        self.stderr_path = stderr_path
        with stderr_path.open("w", encoding="utf-8") as stderr:  # a pipe nobody reads could stall the worker
            self.process = subprocess.Popen(
                worker_command(__name__, arguments),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                cwd=REPOSITORY,
            )
        try:
            self._read_reply()  # {"ready": true}
        except BaseException:
            self.close()
            raise

    def translate_sentences(
        self, compute_type: str, vmap: bool, beam_size: int, indices: list[int]
    ) -> tuple[list[str], float]:
        """Translate some of the file's sentences as one batch.

        Parameters
        ----------
        compute_type : str
            Which loaded translator.
        vmap : bool
            Restrict the output vocabulary with the export's ``vmap.txt``.
        beam_size : int
            1 for greedy.
        indices : list of int
            Positions in the sentences file, in batch order.

        Returns
        -------
        translations : list of str
            Detokenised, in the order of ``indices``.
        seconds : float
            Wall time of the translation in the worker (tokenisation and detokenisation included).

        Notes
        -----
        Raises RuntimeError with the worker's standard error if it died.
        """
        request = {"compute_type": compute_type, "vmap": vmap, "beam_size": beam_size, "sentences": indices}
        reply = self._request(request)
        return [str(text) for text in reply["translations"]], float(reply["seconds"])

    def translate_batches(
        self, compute_type: str, vmap: bool, beam_size: int, batches: list[list[int]]
    ) -> tuple[list[list[str]], float]:
        """Translate a pass's batches, ``inter_threads`` of them at once.

        Parameters
        ----------
        compute_type : str
            Which loaded translator.
        vmap : bool
            Restrict the output vocabulary with the export's ``vmap.txt``.
        beam_size : int
            1 for greedy.
        batches : list of list of int
            Positions in the sentences file, one list per batch.

        Returns
        -------
        translations : list of list of str
            Per batch, in the order of its positions.
        seconds : float
            Wall time of the whole pass in the worker.

        Notes
        -----
        CTranslate2's counterpart of our ``--workers``: each batch is one call, from one of the worker's
        ``inter_threads`` calling threads.
        """
        request = {"compute_type": compute_type, "vmap": vmap, "beam_size": beam_size, "batches": batches}
        reply = self._request(request)
        return [[str(text) for text in batch] for batch in reply["translations"]], float(reply["seconds"])

    def _request(self, request: dict[str, object]) -> dict[str, Any]:
        """Send one request line and read its reply (RuntimeError with the worker's stderr if it died)."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            pass  # reading the reply reports why, with the worker's stderr
        return self._read_reply()


def serve(
    model_dir: str, sentences_file: str, threads: int, compute_types: list[str], inter_threads: int = 1
) -> None:
    """Load the translators and answer requests from standard input (see the module docstring).

    Parameters
    ----------
    model_dir : str
        The CTranslate2 export.
    sentences_file : str
        JSON list of raw source sentences.
    threads : int
        Intra-op threads.
    compute_types : list of str
        Compute types to load.
    inter_threads : int
        CTranslate2's ``inter_threads``: a request's ``batches`` are translated this many at once, from as
        many calling threads.

    Returns
    -------
    None

    Notes
    -----
    One translator per compute type serves both ``vmap`` settings: ``use_vmap`` is an argument of each
    CTranslate2 call, switched on the wrapper between requests. A request holds ``sentences`` (one batch)
    or ``batches`` (a pass's batches, answered with one list of translations per batch).
    """
    from transformer.interop.ctranslate2 import CTranslate2Translator
    from transformer.interop.ctranslate2_vocabulary_map import VOCABULARY_MAP_FILE

    sentences = json.loads(Path(sentences_file).read_text(encoding="utf-8"))
    has_vmap = (Path(model_dir) / VOCABULARY_MAP_FILE).is_file()
    translators = {
        compute_type: CTranslate2Translator.from_directory(
            Path(model_dir), compute_type=compute_type, threads=threads, inter_threads=inter_threads
        )
        for compute_type in compute_types
    }
    print(json.dumps({"ready": True}), flush=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=inter_threads) as pool:
        for line in sys.stdin:
            request = json.loads(line)
            if request["vmap"] and not has_vmap:
                raise SystemExit(f"{model_dir}: no {VOCABULARY_MAP_FILE} for a vocabulary-map request")
            translator = translators[request["compute_type"]]
            translator.use_vmap = bool(request["vmap"])
            batches = request["batches"] if "batches" in request else [request["sentences"]]
            started = time.perf_counter()
            texts = [[sentences[i] for i in indices] for indices in batches]
            outputs = list(pool.map(functools.partial(_translate_batch, translator, request=request), texts))
            seconds = time.perf_counter() - started
            translations: object = outputs if "batches" in request else outputs[0]
            print(json.dumps({"translations": translations, "seconds": seconds}), flush=True)


def _translate_batch(translator: Any, batch: list[str], *, request: dict[str, Any]) -> list[str]:
    """Translate one batch in one CTranslate2 call, as its users make them.

    ``translate_ids`` groups a batch by each sentence's length limit (to keep ours exactly), which would split
    a batch of 32 into several calls; one limit for the batch keeps it one call.
    """
    encoded = [translator.encode(sentence) for sentence in batch]
    outputs = translator.translate_ids(
        encoded,
        beam_size=request["beam_size"],
        length_penalty=LENGTH_PENALTY,
        max_length_offset=ONE_GROUP_OFFSET,
        max_length=max(len(ids) for ids in encoded) + MAX_LENGTH_OFFSET,
        max_batch_size=len(batch),
    )
    return [translator.tokenizer.decode(ids).strip() for ids in outputs]


def main() -> None:
    """Parse the worker's command line and serve requests."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--sentences", required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--compute-types", required=True)
    parser.add_argument("--inter-threads", type=int, default=1)
    args = parser.parse_args()
    serve(args.model_dir, args.sentences, args.threads, args.compute_types.split(","), args.inter_threads)


if __name__ == "__main__":
    main()
