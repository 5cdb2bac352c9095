"""Session-wide random models for the interop tests (each is built once: training SentencePiece and
importing transformers are the slow parts)."""

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from tests.interop.marian_fixtures import MarianSpec, write_our_checkpoint, write_random_marian
from transformer.interop.marian import export_marian, import_marian

SHARED = MarianSpec()
SEPARATE = MarianSpec(
    separate_vocabs=True, tie_word_embeddings=False, activation_function="gelu", scale_embedding=False
)
VARIANT = {
    "share_embeddings": False,
    "tie_output_projection": False,
    "output_bias": True,
    "activation": "gelu",
    "scale_embeddings": False,
}


@pytest.fixture(scope="session", autouse=True)
def single_thread() -> Iterator[None]:
    """Tiny models decode fastest on one thread, and far faster on a busy machine (no thread contention)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def shared_marian_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random OPUS-MT-like model: shared vocabulary, tied embeddings, swish, scaled embeddings."""
    pytest.importorskip("transformers")
    return write_random_marian(tmp_path_factory.mktemp("marian") / "shared", SHARED, seed=1)


@pytest.fixture(scope="session")
def separate_marian_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random Marian model with separate source/target vocabularies of different sizes, untied, GELU."""
    pytest.importorskip("transformers")
    return write_random_marian(tmp_path_factory.mktemp("marian") / "separate", SEPARATE, seed=2)


@pytest.fixture(scope="session")
def imported_shared(shared_marian_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return import_marian(shared_marian_dir, tmp_path_factory.mktemp("imported") / "shared")


@pytest.fixture(scope="session")
def imported_separate(separate_marian_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return import_marian(separate_marian_dir, tmp_path_factory.mktemp("imported") / "separate")


@pytest.fixture(scope="session")
def paper_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Our random model in the paper's configuration (shared, tied, interleaved sinusoids, ReLU)."""
    return write_our_checkpoint(tmp_path_factory.mktemp("ours") / "paper", seed=3)


@pytest.fixture(scope="session")
def variant_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Our random model with every option Marian also has: unshared, untied, logits bias, GELU, unscaled."""
    return write_our_checkpoint(tmp_path_factory.mktemp("ours") / "variant", seed=4, **VARIANT)


@pytest.fixture(scope="session")
def exported_paper(paper_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_marian(paper_checkpoint, tmp_path_factory.mktemp("exported") / "paper")


@pytest.fixture(scope="session")
def exported_variant(variant_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_marian(variant_checkpoint, tmp_path_factory.mktemp("exported") / "variant")


class RecordingHandler(logging.Handler):
    """Collects the messages of the ``transformers`` logger (it does not propagate to pytest's caplog)."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def transformers_warnings() -> Iterator[list[str]]:
    """The warnings ``transformers`` logs during a test."""
    logger = logging.getLogger("transformers")
    handler = RecordingHandler()
    logger.addHandler(handler)
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)
