"""``transformer`` CLI with recorders, for torchrun tests: which ranks encode a token store, and which pairs each trains on.

Run it as the script of ``torchrun`` (``torchrun ... recording_cli.py train --config ...``) with ``$RECORD_DIR``
set, or call :func:`install_recorders` in-process. Every process appends to files in the record directory:

``builds.jsonl``            one line per token store the process encoded: ``{"rank", "directory"}``
``batches.rank{R}.jsonl``   one line per training batch, in order: ``{"store", "indices"}``
``pid.rank{R}``             the process id, so a test can kill the rank mid-training

Only training batches are recorded: they are the ones collated from a :class:`StoredCorpus`, while validation
reads an in-memory corpus. Under torchrun, rank 0 starts encoding a store only after a pause
(``BUILD_DELAY_SECONDS``): the tiny test corpus is encoded in milliseconds, and without the pause a rank that
failed to wait for rank 0 would usually still find the store finished, so the race would go unseen.
"""

import json
import os
import sys
import time
from pathlib import Path

import pytest

from transformer.cli import main
from transformer.data.pipeline import token_store_builder
from transformer.data.pipeline.stored_corpus import StoredCorpus
from transformer.training import data_feed

#: How long rank 0 of a multi-process job holds back each store build, widening the window of a race.
BUILD_DELAY_SECONDS = 1.0


def _append(path: Path, record: dict) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


def install_recorders(record_dir: Path, patch: pytest.MonkeyPatch) -> None:
    """Wrap the store builder and the training feed's collate so that each call leaves a line in ``record_dir``."""
    rank = int(os.environ.get("RANK", "0"))
    build_token_store, collate = token_store_builder.build_token_store, data_feed.collate

    def recording_build(directory, *args, **kwargs):
        _append(record_dir / "builds.jsonl", {"rank": rank, "directory": str(directory)})
        if rank == 0 and int(os.environ.get("WORLD_SIZE", "1")) > 1:
            time.sleep(BUILD_DELAY_SECONDS)
        return build_token_store(directory, *args, **kwargs)

    def recording_collate(indices, corpus, *args, **kwargs):
        if isinstance(corpus, StoredCorpus):
            record = {"store": str(corpus.store.directory), "indices": [int(index) for index in indices]}
            _append(record_dir / f"batches.rank{rank}.jsonl", record)
        return collate(indices, corpus, *args, **kwargs)

    # prepare_token_store and the training feed look these names up in their modules at each call.
    patch.setattr(token_store_builder, "build_token_store", recording_build)
    patch.setattr(data_feed, "collate", recording_collate)
    (record_dir / f"pid.rank{rank}").write_text(str(os.getpid()), encoding="utf-8")


def read_records(path: Path) -> list[dict]:
    """The JSON lines of one record file (an empty list when the file was never written)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


if __name__ == "__main__":
    install_recorders(Path(os.environ["RECORD_DIR"]), pytest.MonkeyPatch())
    sys.exit(main(sys.argv[1:]))
