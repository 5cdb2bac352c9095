"""The ``data`` section: where the parallel text comes from and how it is tokenised."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from transformer.typed_fields import POSITIVE, SEED, FieldRange, check_field_types, check_ranges


@dataclass(frozen=True)
class DataConfig:
    """Where the parallel text comes from and how it is tokenised.

    Parameters
    ----------
    corpus : str
        "synthetic" (the built-in grammar, generated from ``synthetic_seed``), a known corpus name:
        "multi30k", "wmt14-en-de" or "wmt14-en-fr" (downloaded to ``cache_dir``, checksums verified; see
        docs/wmt14.md), or "directory" (files in ``data_dir``).
    data_dir : str or None
        Folder of ``{train,valid,test}.{lang}[.gz]`` files when ``corpus == "directory"``.
    source_lang : str
        Source language suffix ("en"). For a known corpus, its own direction or the reverse.
    target_lang : str
        Target language suffix ("de").
    max_len : int
        Pairs with more BPE tokens than this on either side are dropped (and counted in the log). At least 2
        (a token and EOS).
    cache_dir : str
        Download cache for known corpora ("~" is expanded).
    mirror : str or None
        Local folder or file:// URL holding the corpus files, used instead of the internet.
    synthetic_train_pairs, synthetic_valid_pairs, synthetic_test_pairs : int
        Split sizes of the built-in corpus. Positive.
    synthetic_seed : int
        Seed of the built-in corpus. From 0 to 2^63 - 1.
    token_store : bool
        Encode the training split once into a memory-mapped token store under ``run_dir/token_store/train``
        (reused by later runs with the same files and vocabulary) and train from it, instead of holding the
        corpus as Python lists; for corpora of millions of pairs. Validation stays in memory.
    token_store_verify : bool
        When reusing a token store, also check the SHA-256 of every array file (reads all of it); sizes are
        always checked.
    backtranslated_dir : str or None
        A folder written by ``transformer backtranslate`` (``train.{source_lang}``, ``train.{target_lang}``):
        its synthetic pairs are trained on beside the corpus's training split; None: none.
    backtranslation_tag : str or None
        Put before every synthetic source (tagged back-translation, Caswell et al. 2019), e.g. "<BT>"; it is
        made one piece of the joint vocabulary. None: the synthetic sources are not marked.
    real_upsample : int
        With ``backtranslated_dir``, each real training pair is repeated this many times (the ratio of real
        to synthetic data; Edunov et al. 2018 up-sample the bitext). At least 1.

    Notes
    -----
    The joint BPE vocabulary size is ``model.vocab_size``: one number, so the two cannot disagree. The
    vocabulary is learned on the real and synthetic training pairs together. Every numeric field's range
    (``FIELD_RANGES``) is checked at construction.
    """

    corpus: str = "synthetic"
    data_dir: str | None = None
    source_lang: str = "en"
    target_lang: str = "de"
    max_len: int = 128
    cache_dir: str = "~/.cache/transformer"
    mirror: str | None = None
    synthetic_train_pairs: int = 20000
    synthetic_valid_pairs: int = 500
    synthetic_test_pairs: int = 500
    synthetic_seed: int = 1234
    token_store: bool = False
    token_store_verify: bool = False
    backtranslated_dir: str | None = None
    backtranslation_tag: str | None = None
    real_upsample: int = 1

    #: The range of every numeric field (:func:`transformer.typed_fields.check_ranges`), as the docstring says.
    FIELD_RANGES: ClassVar[Mapping[str, FieldRange]] = {
        "max_len": FieldRange(2),
        "synthetic_train_pairs": POSITIVE,
        "synthetic_valid_pairs": POSITIVE,
        "synthetic_test_pairs": POSITIVE,
        "synthetic_seed": SEED,
        "real_upsample": FieldRange(1),
    }

    def __post_init__(self) -> None:
        check_field_types(self)
        check_ranges(self)
        if self.corpus == "directory" and not self.data_dir:
            raise ValueError("DataConfig.corpus='directory' needs data_dir")
        self._check_backtranslation()

    def _check_backtranslation(self) -> None:
        """Refuse back-translation settings that would be ignored or break the vocabulary."""
        if self.backtranslated_dir is None and (
            self.backtranslation_tag is not None or self.real_upsample != 1
        ):
            raise ValueError("DataConfig.backtranslation_tag and real_upsample need backtranslated_dir")
        if self.backtranslated_dir is not None and self.token_store:
            raise ValueError(
                "DataConfig.backtranslated_dir is read in memory; it cannot be used with token_store"
            )
        tag = self.backtranslation_tag
        if tag is not None and (not tag or any(character.isspace() for character in tag)):
            raise ValueError(f"DataConfig.backtranslation_tag={tag!r} must be one word without spaces")
