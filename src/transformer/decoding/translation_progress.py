"""The progress of a translation: how a caller shows it, and the progress bar the commands show.

The library never prints on its own: a workflow that translates many sentences takes a
:data:`TranslationProgress` (None shows nothing), and the commands pass :func:`translation_progress_bar`,
a tqdm bar on standard error, so standard output stays the translations'.
"""

import contextlib
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

from tqdm import tqdm

#: Seconds a translation runs before its progress bar appears (quicker ones print nothing extra).
PROGRESS_DELAY_SECONDS = 3.0
#: Opens a progress display for a translation of the given number of sentences; entered, it gives the callback
#: that :meth:`~transformer.decoding.translator.Translator.translate` calls with the sentences each batch held.
TranslationProgress = Callable[[int], AbstractContextManager[Callable[[int], None]]]


def open_progress(
    progress: TranslationProgress | None, total: int
) -> AbstractContextManager[Callable[[int], None] | None]:
    """Open a caller's progress display for ``total`` sentences, or none.

    Parameters
    ----------
    progress : TranslationProgress or None
        The caller's display (the command line's progress bar); None shows nothing.
    total : int
        Sentences to translate.

    Returns
    -------
    contextlib.AbstractContextManager
        Entered, it gives the callback for :meth:`Translator.translate` (None without a display).

    Notes
    -----
    The display is opened only once the sentences are read, so its total is known from the start and the
    time-left estimate is right from the first batch.
    """
    return contextlib.nullcontext() if progress is None else progress(total)


@contextlib.contextmanager
def translation_progress_bar(total: int) -> Iterator[Callable[[int], None]]:
    """Show a progress bar on standard error for a translation that takes more than a few seconds.

    Parameters
    ----------
    total : int
        The sentences to translate.

    Returns
    -------
    Iterator[callable]
        A context manager yielding the ``progress`` callback of :meth:`Translator.translate`.

    Notes
    -----
    The bar (sentences done, rate, time left) appears only after :data:`PROGRESS_DELAY_SECONDS`, so a quick
    translation prints nothing extra, and it is cleared when done; standard output stays the translations'.
    A long search used to run for minutes without a word.
    """
    with tqdm(
        total=total,
        unit="sentence",
        file=sys.stderr,
        delay=PROGRESS_DELAY_SECONDS,
        leave=False,
        dynamic_ncols=True,
    ) as bar:

        def advance(count: int) -> None:
            bar.update(count)

        yield advance
