"""CTranslate2 in a process of its own, driven over a pipe by the translation benchmark.

Why a separate process: CTranslate2 wheels bundle their own OpenMP runtime (a second ``libgomp``). Once a
``ctranslate2.Translator`` exists in a process, PyTorch's many small parallel regions in that same process
wake their threads as slowly as under ``OMP_WAIT_POLICY=PASSIVE``: on the development machine (2 cores) our
bf16 greedy decoding fell from about 2,100 to 1,150 tokens/s and HF ``generate()`` from 1,700 to 1,050, and
came back as soon as the translators were deleted. Measuring the three toolkits in one process therefore
charged CTranslate2's presence to the other two. Here the translators live in a worker process
(``python -m benchmarks.bench_ctranslate2 --model-dir ... --batches ...``, started in the repository root) that
answers one JSON line per request, so the rounds stay interleaved while no process holds both runtimes.

Protocol (one JSON object per line): the worker first prints ``{"ready": true}``; each request
``{"compute_type": "int8", "beam_size": 4, "batch": 0, "output_length": 32}`` translates one batch of the
pieces file and is answered with ``{"tokens": <output tokens produced>}``; end of input stops it.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

from benchmarks.bench_worker import REPOSITORY, worker_command


class CTranslate2Worker:
    """A CTranslate2 worker process holding one translator per compute type.

    Parameters
    ----------
    model_dir : pathlib.Path
        A CTranslate2 model directory (``transformer convert --to ctranslate2``, float32 weights; other
        compute types convert on load).
    piece_batches : list of list of list of str
        The source batches as pieces, indexed by ``translate``'s ``batch_index``.
    compute_types : list of str
        Compute types to load, e.g. ``["float32", "int8"]``.
    threads : int
        CTranslate2 intra-op threads.
    scratch : pathlib.Path
        Directory for the pieces file handed to the worker.

    Notes
    -----
    Use as a context manager; leaving it closes the worker's input and waits for it to exit. The pipe round
    trip per batch (well under a millisecond) is part of the timed pass, against passes of seconds.
    """

    def __init__(
        self,
        model_dir: Path,
        piece_batches: list[list[list[str]]],
        compute_types: list[str],
        threads: int,
        scratch: Path,
    ) -> None:
        pieces_file = scratch / "ct2-pieces.json"
        pieces_file.write_text(json.dumps(piece_batches), encoding="utf-8")
        arguments: dict[str, object] = {
            "model-dir": model_dir,
            "batches": pieces_file,
            "threads": threads,
            "compute-types": ",".join(compute_types),
        }
        command = worker_command(__name__, arguments)
        # stderr goes to a file: a pipe nobody reads could fill up and stall the worker.
        self.stderr_path = scratch / "ct2-worker.stderr"
        with self.stderr_path.open("w", encoding="utf-8") as stderr:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                cwd=REPOSITORY,
            )
        try:
            self._read_reply()  # {"ready": true} once every translator is loaded
        except BaseException:
            self.close()
            raise

    def translate(self, compute_type: str, beam_size: int, batch_index: int, output_length: int) -> int:
        """Translate one batch in the worker, forcing the output length.

        Parameters
        ----------
        compute_type : str
            Which loaded translator.
        beam_size : int
            1 for greedy.
        batch_index : int
            Index into the pieces batches.
        output_length : int
            Minimum and maximum decoding length.

        Returns
        -------
        int
            Output tokens produced.

        Notes
        -----
        Raises RuntimeError with the worker's stderr if it died.
        """
        request = {
            "compute_type": compute_type,
            "beam_size": beam_size,
            "batch": batch_index,
            "output_length": output_length,
        }
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            pass  # the worker died: reading its reply reports why, with its stderr
        return int(self._read_reply()["tokens"])

    def _read_reply(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            self.process.wait(timeout=30)
            stderr = self.stderr_path.read_text(encoding="utf-8", errors="replace")
            raise RuntimeError(f"CTranslate2 worker exited ({self.process.returncode}):\n{stderr[-2000:]}")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def close(self) -> None:
        """Close the worker's input and wait for it to exit (killed after 30 s).

        Parameters
        ----------
        None

        Returns
        -------
        None

        Notes
        -----
        Safe to call twice.
        """
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        if self.process.poll() is None:
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> "CTranslate2Worker":
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def serve(model_dir: str, batches_file: str, threads: int, compute_types: list[str]) -> None:
    """Load one translator per compute type and answer translation requests from standard input.

    Parameters
    ----------
    model_dir : str
        CTranslate2 model directory.
    batches_file : str
        JSON file with the source batches as pieces.
    threads : int
        Intra-op threads.
    compute_types : list of str
        Compute types to load.

    Returns
    -------
    None

    Notes
    -----
    Writes ``{"ready": true}`` after loading, then one ``{"tokens": n}`` line per request.
    """
    import ctranslate2

    batches = json.loads(Path(batches_file).read_text(encoding="utf-8"))
    translators = {
        compute_type: ctranslate2.Translator(
            model_dir, device="cpu", compute_type=compute_type, intra_threads=threads, inter_threads=1
        )
        for compute_type in compute_types
    }
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        batch = batches[request["batch"]]
        results = translators[request["compute_type"]].translate_batch(
            batch,
            beam_size=request["beam_size"],
            min_decoding_length=request["output_length"],
            max_decoding_length=request["output_length"],
            max_batch_size=len(batch),
        )
        tokens = sum(len(result.hypotheses[0]) for result in results)
        print(json.dumps({"tokens": tokens}), flush=True)


def main() -> None:
    """Parse the worker's command line and serve requests (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--batches", required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--compute-types", required=True)
    args = parser.parse_args()
    serve(args.model_dir, args.batches, args.threads, args.compute_types.split(","))


if __name__ == "__main__":
    main()
