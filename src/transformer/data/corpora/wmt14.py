"""WMT 2014 English-German and English-French as the paper used them: the archives, members and checksums.

Section 5.1: "the standard WMT 2014 English-German dataset consisting of about 4.5 million sentence pairs" and
"the significantly larger WMT 2014 English-French dataset consisting of 36M sentences"; newstest2013 for
development (Table 3) and newstest2014 for the reported scores (Table 2). The training sets are the WMT14
shared task's parallel data for each pair:

- English-German: Europarl v7, Common Crawl and News Commentary v9 (about 4.5M lines together).
- English-French: the same three plus the UN corpus and the 10^9 French-English corpus (giga-fren), roughly 41M
  lines as distributed. The paper's 36M is the count after a cleaning step it does not describe (the figure of
  Google's earlier systems); no filter is applied here, so expect more pairs than 36M.

Checksums: the training archives' SHA-256 and sizes as TensorFlow Datasets publishes them
(``url_checksums/wmt14_translate.txt`` and ``wmt15_translate.txt``); the test sets' MD5 as sacreBLEU publishes
them for its ``wmt13`` and ``wmt14/full`` test sets, whose member files and SGML handling are used here, so
the extracted validation and test files equal sacreBLEU's references. None of these archives was downloaded
on the machines this project is developed on (no internet); the extraction is tested on archives of the same
layout built in the tests.
"""

from transformer.data.corpora.archive_corpus import ArchiveCorpusSpec, ArchiveText, ParallelText
from transformer.data.corpora.remote_files import RemoteFile

EUROPARL_V7 = RemoteFile(
    url="https://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz",
    sha256="0224c7c710c8a063dfd893b0cc0830202d61f4c75c17eb8e31836103d27d96e7",
    filename="training-parallel-europarl-v7.tgz",
    size=657_632_379,
)
COMMON_CRAWL = RemoteFile(
    url="https://www.statmt.org/wmt13/training-parallel-commoncrawl.tgz",
    sha256="c7a74e2ea01ac6c920123108627e35278d4ccb5701e15428ffa34de86fa3a9e5",
    filename="training-parallel-commoncrawl.tgz",
    size=918_311_367,
)
NEWS_COMMENTARY_V9 = RemoteFile(
    url="https://www.statmt.org/wmt14/training-parallel-nc-v9.tgz",
    sha256="cb8953f292298e6877ae433c98912b927cb0766b303f4540512ddd286c748485",
    filename="training-parallel-nc-v9.tgz",
    size=80_418_416,
)
UN_CORPUS = RemoteFile(
    url="https://www.statmt.org/wmt13/training-parallel-un.tgz",
    sha256="29141b5c1eba149a94f7a59d3b1a834b2e47fe0f8758d68dcd77a3d3f497ee47",
    filename="training-parallel-un.tgz",
    size=2_365_634_246,
)
GIGA_FREN = RemoteFile(
    url="https://www.statmt.org/wmt10/training-giga-fren.tar",
    sha256="3ff8319f6919393520559bfbc7ad6a747ec81b3abc7be9993b338d4b017b4d9a",
    filename="training-giga-fren.tar",
    size=2_595_102_720,
)
#: newstest2013 (the paper's development set), as sacreBLEU's "wmt13" test set.
NEWSTEST_2013 = RemoteFile(
    url="https://statmt.org/wmt13/test.tgz",
    sha256=None,
    md5="48eca5d02f637af44e85186847141f67",
    filename="wmt13-test.tgz",
)
#: newstest2014, the full set (sacreBLEU's "wmt14/full"), not the filtered one of sacreBLEU's plain "wmt14".
NEWSTEST_2014_FULL = RemoteFile(
    url="https://statmt.org/wmt14/test-full.tgz",
    sha256=None,
    md5="a8cd784e006feb32ac6f3d9ec7eb389a",
    filename="test-full.tgz",
)

WMT14_CITATION = (
    "Bojar, Buck, Federmann, Haddow, Koehn, Leveling, Monz, Pecina, Post, Saint-Amand, Soricut, Specia and "
    "Tamchyna (2014). Findings of the 2014 Workshop on Statistical Machine Translation. Proceedings of the "
    "Ninth Workshop on Statistical Machine Translation."
)


def _parallel(name: str, archive: RemoteFile, source_member: str, target_member: str) -> ParallelText:
    return ParallelText(name, ArchiveText(archive, source_member), ArchiveText(archive, target_member))


def _training_texts(other: str) -> tuple[ParallelText, ...]:
    """List the WMT14 parallel training texts between English and ``other``, in the archives' own naming."""
    pair = f"{other}-en"
    texts = [
        _parallel(
            "europarl-v7",
            EUROPARL_V7,
            f"training/europarl-v7.{pair}.en",
            f"training/europarl-v7.{pair}.{other}",
        ),
        _parallel("commoncrawl", COMMON_CRAWL, f"commoncrawl.{pair}.en", f"commoncrawl.{pair}.{other}"),
    ]
    if other == "fr":
        texts.append(_parallel("un", UN_CORPUS, "un/undoc.2000.fr-en.en", "un/undoc.2000.fr-en.fr"))
    texts.append(
        _parallel(
            "news-commentary-v9",
            NEWS_COMMENTARY_V9,
            f"training/news-commentary-v9.{pair}.en",
            f"training/news-commentary-v9.{pair}.{other}",
        )
    )
    if other == "fr":
        texts.append(
            _parallel(
                "giga-fren", GIGA_FREN, "giga-fren.release2.fixed.en.gz", "giga-fren.release2.fixed.fr.gz"
            )
        )
    return tuple(texts)


def wmt14_spec(other: str) -> ArchiveCorpusSpec:
    """Describe the WMT 2014 corpus between English (source) and German or French (target).

    Parameters
    ----------
    other : str
        "de" or "fr".

    Returns
    -------
    ArchiveCorpusSpec
        Named "wmt14-en-de" or "wmt14-en-fr": train, valid (newstest2013) and test (newstest2014, full).

    Raises
    ------
    ValueError
        For a language other than those WMT14 pairs with English.

    Notes
    -----
    The other direction (German to English) uses the same files with the languages swapped: set
    ``data.source_lang: de`` and ``data.target_lang: en``. The test set's reference side for English to German
    is ``newstest2014-deen-ref.de.sgm`` with source ``newstest2014-deen-src.en.sgm``, as sacreBLEU's
    ``-t wmt14/full -l en-de`` uses them.
    """
    if other not in ("de", "fr"):
        raise ValueError(f"WMT14 pairs English with 'de' or 'fr', not {other!r}")
    size = "about 4.5M" if other == "de" else "roughly 41M (the paper: 36M after cleaning)"
    return ArchiveCorpusSpec(
        name=f"wmt14-en-{other}",
        source_lang="en",
        target_lang=other,
        splits={
            "train": _training_texts(other),
            "valid": (
                _parallel(
                    "newstest2013",
                    NEWSTEST_2013,
                    "test/newstest2013-src.en.sgm",
                    f"test/newstest2013-src.{other}.sgm",
                ),
            ),
            "test": (
                _parallel(
                    "newstest2014",
                    NEWSTEST_2014_FULL,
                    f"test-full/newstest2014-{other}en-src.en.sgm",
                    f"test-full/newstest2014-{other}en-ref.{other}.sgm",
                ),
            ),
        },
        description=(
            f"WMT 2014 English-{'German' if other == 'de' else 'French'} ({size} training pairs), the paper's "
            "data (section 5.1): newstest2013 to validate, newstest2014 to test."
        ),
        citation=WMT14_CITATION,
        sacrebleu_test_sets={"valid": "wmt13", "test": "wmt14/full"},
    )


WMT14_EN_DE = wmt14_spec("de")
WMT14_EN_FR = wmt14_spec("fr")
