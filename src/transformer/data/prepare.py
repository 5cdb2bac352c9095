"""From a data config to encoded training data: find or fetch the corpus, train or load the joint BPE model."""

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from transformer.config.data import DataConfig
from transformer.data.corpora.backtranslated_corpus import read_backtranslated_pairs
from transformer.data.corpora.known_corpora import fetch_corpus, local_directory_corpus
from transformer.data.corpora.synthetic import generate_splits, write_corpus
from transformer.data.pipeline.dataset import EncodedCorpus, ParallelCorpus, encode_corpus
from transformer.data.pipeline.stored_corpus import StoredCorpus
from transformer.data.pipeline.text_files import iter_parallel_lines, read_parallel_files
from transformer.data.pipeline.token_store_builder import prepare_token_store
from transformer.data.pipeline.tokenizer import Tokenizer

TOKENIZER_FILE = "tokenizer.model"
#: The training split's token store, under the run directory (``data.token_store: true``).
TOKEN_STORE_DIR = Path("token_store") / "train"


@dataclass
class TrainingData:
    """Encoded training and validation data with their tokenizer and the files they came from.

    Parameters
    ----------
    train : EncodedCorpus or StoredCorpus
        Training pairs as token ids: Python lists, or a memory-mapped token store (``data.token_store``).
    valid : EncodedCorpus or None
        Validation pairs, or None when the corpus has no validation split.
    tokenizer : Tokenizer
        The joint BPE model (stored in every checkpoint).
    split_files : dict of str to (Path, Path)
        Source and target file of each split ("train", "valid", maybe "test").

    Notes
    -----
    Built by :func:`prepare_data`. The test split is listed in ``split_files`` but not encoded: it is
    scored on raw text after training (detokenised output against the reference), never fed to the model
    as ids.
    """

    train: ParallelCorpus
    valid: EncodedCorpus | None
    tokenizer: Tokenizer
    split_files: dict[str, tuple[Path, Path]]


def corpus_files(
    data: DataConfig, run_dir: Path, message: Callable[[str], None] | None = None
) -> dict[str, tuple[Path, Path]]:
    """Locate (generating or downloading if needed) the files of each split.

    Parameters
    ----------
    data : DataConfig
        Which corpus.
    run_dir : Path
        The run directory; the built-in corpus is written to ``run_dir/data``.
    message : callable or None
        Receives one-line progress notes (downloads, extraction).

    Returns
    -------
    dict of str to (Path, Path)
        Source and target file per split name.

    Notes
    -----
    The built-in corpus is regenerated only when its files are missing; it is deterministic in its seed. A
    known corpus is served in the direction ``data.source_lang`` to ``data.target_lang`` (its own or the
    reverse; other languages are an error naming the options).
    """
    if data.corpus == "synthetic":
        directory = run_dir / "data"
        names = ("train", "valid", "test")
        files = {
            name: (directory / f"{name}.{data.source_lang}", directory / f"{name}.{data.target_lang}")
            for name in names
        }
        if not all(path.exists() for pair in files.values() for path in pair):
            splits = generate_splits(
                data.synthetic_train_pairs,
                data.synthetic_valid_pairs,
                data.synthetic_test_pairs,
                data.synthetic_seed,
            )
            files = write_corpus(directory, splits, data.source_lang, data.target_lang)
        return files
    if data.corpus == "directory":
        assert data.data_dir is not None  # checked by DataConfig
        return local_directory_corpus(Path(data.data_dir).expanduser(), data.source_lang, data.target_lang)
    return fetch_corpus(
        data.corpus,
        Path(data.cache_dir).expanduser(),
        mirror=data.mirror,
        source_lang=data.source_lang,
        target_lang=data.target_lang,
        message=message,
    )


def prepare_data(
    data: DataConfig, vocab_size: int, run_dir: Path, message: Callable[[str], None] | None = None
) -> TrainingData:
    """Read the corpus, train (or reuse) the joint BPE vocabulary and encode the splits.

    Parameters
    ----------
    data : DataConfig
        Which corpus and the length filter.
    vocab_size : int
        Size of the joint BPE vocabulary (the model's ``vocab_size``).
    run_dir : Path
        The run directory; holds ``tokenizer.model`` (reused when present, so a resumed run keeps its ids).
    message : callable or None
        Receives one-line progress notes (sizes, dropped pairs).

    Returns
    -------
    TrainingData
        Encoded train and validation data and the tokenizer.

    Notes
    -----
    The vocabulary is learned on the training split only, both languages together (section 5.1: "a shared
    source-target vocabulary"). With ``data.token_store`` the training split is never held in memory: the
    vocabulary is learned from a bounded sample of a stream of its lines, and the split is encoded once into
    ``run_dir/token_store/train`` (:func:`transformer.data.pipeline.token_store_builder.prepare_token_store`), reused
    by later runs and resumptions with the same files and vocabulary. The store lives in the run directory,
    next to the tokenizer it was encoded with, rather than in a shared cache: each run learns its own
    vocabulary, so stores could be shared only between runs that share one. Validation is encoded in memory
    either way.
    """
    tell = message or (lambda text: None)
    run_dir.mkdir(parents=True, exist_ok=True)
    files = corpus_files(data, run_dir, tell)
    if data.token_store:
        tokenizer = _load_or_train_tokenizer(
            run_dir,
            vocab_size,
            lambda: (side for pair in iter_parallel_lines(*files["train"]) for side in pair),
            tell,
        )
        store = prepare_token_store(
            run_dir / TOKEN_STORE_DIR,
            files["train"],
            tokenizer,
            data.max_len,
            verify=data.token_store_verify,
            message=tell,
        )
        train: ParallelCorpus = StoredCorpus(store)
    else:
        train_pairs = read_parallel_files(*files["train"])
        tell(f"train: {len(train_pairs)} pairs from {files['train'][0]} and {files['train'][1]}")
        train_pairs = _add_backtranslated_pairs(data, train_pairs, tell)
        pairs = train_pairs
        symbols = [data.backtranslation_tag] if data.backtranslation_tag else []
        tokenizer = _load_or_train_tokenizer(
            run_dir, vocab_size, lambda: [side for pair in pairs for side in pair], tell, symbols
        )
        train = encode_corpus(train_pairs, tokenizer, data.max_len)
    tell(f"train: {train.report.describe()}")
    valid = None
    if "valid" in files:
        valid = encode_corpus(read_parallel_files(*files["valid"]), tokenizer, data.max_len)
        tell(f"valid: {valid.report.describe()}")
    return TrainingData(train=train, valid=valid, tokenizer=tokenizer, split_files=files)


def _add_backtranslated_pairs(
    data: DataConfig, real_pairs: list[tuple[str, str]], tell: Callable[[str], None]
) -> list[tuple[str, str]]:
    """Up-sample the real pairs and add the (tagged) synthetic ones, when ``data.backtranslated_dir`` is set.

    Parameters
    ----------
    data : DataConfig
        ``backtranslated_dir``, ``backtranslation_tag``, ``real_upsample`` and the languages.
    real_pairs : list of (str, str)
        The corpus's training pairs.
    tell : callable
        Receives a one-line note of the mixture.

    Returns
    -------
    list of (str, str)
        The real pairs repeated ``real_upsample`` times, then the synthetic pairs.

    Notes
    -----
    Repeating pairs (rather than weighting the loss) keeps every later stage unchanged: the batches mix
    real and synthetic pairs in the configured ratio, since the batch sampler shuffles within length buckets.
    """
    if data.backtranslated_dir is None:
        return real_pairs
    directory = Path(data.backtranslated_dir).expanduser()
    synthetic = read_backtranslated_pairs(
        directory, (data.source_lang, data.target_lang), data.backtranslation_tag
    )
    tag = f", sources tagged {data.backtranslation_tag!r}" if data.backtranslation_tag else ""
    tell(
        f"train: + {len(synthetic)} back-translated pairs from {directory}{tag}; real pairs x{data.real_upsample}"
    )
    return real_pairs * data.real_upsample + synthetic


def _load_or_train_tokenizer(
    run_dir: Path,
    vocab_size: int,
    texts: Callable[[], Iterable[str]],
    tell: Callable[[str], None],
    user_symbols: Sequence[str] = (),
) -> Tokenizer:
    """Reuse ``run_dir/tokenizer.model`` or learn it from ``texts()``; refuse one of another size.

    Parameters
    ----------
    run_dir : pathlib.Path
        The run directory.
    vocab_size : int
        The model's vocabulary size.
    texts : callable
        Returns the training sentences of both languages (a list, or a stream read from the files); called
        only when a vocabulary must be learned.
    tell : callable
        Receives one-line notes.
    user_symbols : sequence of str
        Pieces the vocabulary must hold whole (the back-translation tag).

    Returns
    -------
    Tokenizer
        The joint vocabulary.

    Notes
    -----
    Raises ValueError when an existing model's size differs from ``vocab_size``, or when it lacks one of
    ``user_symbols`` as a single piece (a run resumed with a tag it was not started with).
    """
    tokenizer_path = run_dir / TOKENIZER_FILE
    if tokenizer_path.exists():
        tokenizer = Tokenizer.load(tokenizer_path)
        tell(f"vocabulary: reusing {tokenizer_path} ({tokenizer.vocab_size} pieces)")
    else:
        tokenizer = Tokenizer.train(texts(), tokenizer_path, vocab_size, user_symbols=user_symbols)
        tell(f"vocabulary: trained a joint BPE model of {tokenizer.vocab_size} pieces -> {tokenizer_path}")
    if tokenizer.vocab_size != vocab_size:
        raise ValueError(
            f"{tokenizer_path} has {tokenizer.vocab_size} pieces but model.vocab_size={vocab_size}; "
            "delete it to retrain the vocabulary or set model.vocab_size to match"
        )
    for symbol in user_symbols:
        if len(tokenizer.pieces(symbol)) > 2 or symbol not in tokenizer.pieces(symbol):
            raise ValueError(
                f"{tokenizer_path} does not hold {symbol!r} (data.backtranslation_tag) as one piece; "
                "delete it to retrain the vocabulary"
            )
    return tokenizer
