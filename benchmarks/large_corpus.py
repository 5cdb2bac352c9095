"""Write (or reuse) a large parallel corpus recombined from Multi30k, for testing at the paper's data sizes.

From the repository root (a module of the ``benchmarks`` package):

    python -m benchmarks.large_corpus --pairs 4500000 --output-dir /data/wmt14-sized
    python -m benchmarks.large_corpus --pairs 36000000 --output-dir DIR --mirror /work/shared/data/multi30k

The corpus is :func:`transformer.data.corpora.large_corpus.write_large_corpus`'s: ``DIR/train.en`` and
``DIR/train.de``, usable with ``data.corpus: directory`` and ``data.data_dir: DIR``. The Multi30k training
files come from ``--source-files``, or else from the project's corpus cache (``~/.cache/transformer``),
fetched there once (1.2 MB, from ``--mirror`` when given). A corpus already written for the same request is
reused. Prints one JSON line: files, bytes, seconds, pairs per second and words per line of each side.
"""

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

if not __package__:  # run by path, where the package imports below fail: say how to run it instead
    sys.exit(
        f"run from the repository root: python -m benchmarks.large_corpus {shlex.join(sys.argv[1:])}".rstrip()
    )

from transformer.config.data import DataConfig
from transformer.data.corpora.known_corpora import fetch_corpus
from transformer.data.corpora.large_corpus import (
    find_large_corpus,
    read_large_corpus_manifest,
    write_large_corpus,
)


def multi30k_training_files(mirror: str | None) -> tuple[Path, Path]:
    """Locate Multi30k's training files in the project's corpus cache, fetching them once if missing.

    Parameters
    ----------
    mirror : str or None
        A local directory or URL holding the files (as ``data.mirror``); None for the publisher.

    Returns
    -------
    (pathlib.Path, pathlib.Path)
        ``train.en.gz`` and ``train.de.gz``.

    Notes
    -----
    Uses :func:`transformer.data.corpora.known_corpora.fetch_corpus` with the default ``data.cache_dir``, so the files are
    checked against their SHA-256 and downloaded (1.2 MB) only when the cache lacks them.
    """
    return fetch_corpus("multi30k", Path(DataConfig().cache_dir), mirror=mirror)["train"]


def generate_or_reuse(
    source_files: tuple[Path, Path], output_dir: Path, pairs: int, seed: int
) -> dict[str, Any]:
    """Return a corpus of ``pairs`` lines in ``output_dir``, writing it unless the same one is already there.

    Parameters
    ----------
    source_files : (pathlib.Path, pathlib.Path)
        The corpus to recombine (English, German).
    output_dir : pathlib.Path
        Where the corpus goes.
    pairs : int
        Lines per file.
    seed : int
        Seed of the generator.

    Returns
    -------
    dict
        ``files``, ``bytes``, ``reused`` (bool), ``seconds`` and ``pairs_per_second`` of the writing (None when
        reused), the manifest's ``statistics`` (words per line, per side) and ``single_pair_lines``.

    Notes
    -----
    The time covers everything :func:`write_large_corpus` does: reading the sources, drawing, writing and
    fsyncing both files.
    """
    files = find_large_corpus(source_files, output_dir, pairs, seed)
    seconds = None
    if files is None:
        started = time.perf_counter()
        files = write_large_corpus(source_files, output_dir, pairs, seed)
        seconds = time.perf_counter() - started
    manifest = read_large_corpus_manifest(output_dir)
    assert manifest is not None  # just written or found
    return {
        "pairs": pairs,
        "seed": seed,
        "files": [str(path) for path in files],
        "bytes": sum(path.stat().st_size for path in files),
        "reused": seconds is None,
        "seconds": seconds,
        "pairs_per_second": pairs / seconds if seconds else None,
        "statistics": manifest["statistics"],
        "single_pair_lines": manifest["single_pair_lines"],
    }


def main(argv: list[str] | None = None) -> int:
    """Write or reuse the corpus the command line asks for and print its record as one JSON line.

    Parameters
    ----------
    argv : list of str or None
        The arguments (``--help`` lists them); None reads ``sys.argv``.

    Returns
    -------
    int
        The exit status: 0, or 2 with a one-line message for a bad argument, a missing source or an output
        file this generator did not write.

    Notes
    -----
    See the module docstring for the arguments and defaults.
    """
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.large_corpus", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--pairs", type=int, required=True, help="lines per file, e.g. 4500000")
    parser.add_argument("--output-dir", type=Path, required=True, help="where train.en and train.de go")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generator (default 0)")
    parser.add_argument(
        "--source-files", type=Path, nargs=2, default=None, help="English and German files to recombine"
    )
    parser.add_argument("--mirror", default=None, help="where to copy Multi30k from when the cache lacks it")
    args = parser.parse_args(argv)
    try:
        source_files = tuple(args.source_files) if args.source_files else multi30k_training_files(args.mirror)
        record = generate_or_reuse(source_files, args.output_dir, args.pairs, args.seed)
    except (ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
