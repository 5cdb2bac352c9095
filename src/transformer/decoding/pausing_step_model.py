"""A step model that pauses before each step, so a long search is time-sliced with other work.

:class:`PausingStepModel` wraps any :class:`~transformer.decoding.step_model.StepModel` and calls a function
before its encoder pass and before every decoder step; the server's model worker uses it to run a whole search
(sampling, MBR, a prefix, an ensemble) between the steps of the other clients' running batches. Start reading
at :class:`PausingStepModel`; it passes every call on unchanged, so results are the wrapped model's own.
"""

from collections.abc import Callable
from typing import Any

from torch import Tensor

from transformer.decoding.step_model import StepModel


class PausingStepModel:
    """A step model that calls a function before each of its steps: a search that lets other work run.

    Parameters
    ----------
    step_model : StepModel
        The step model that computes (a Transformer's, an ensemble's, a test's oracle).
    pause : callable
        Takes no argument; called before :meth:`start` (the encoder) and before every :meth:`log_probs`.
        It may raise to abandon the search.

    Notes
    -----
    The server runs a whole search (sampling, MBR, a prefix, an ensemble) through one of these, and its
    ``pause`` steps the other clients' running batch, so a long search is time-sliced with theirs instead of
    holding the model for its whole length. The search's arithmetic is untouched: every call is passed on
    as it is, so its results are those of the step model alone. ``max_output_length`` and ``model`` are
    passed through too, for the length limits and :func:`~transformer.decoding.step_model.inference_context`.
    """

    def __init__(self, step_model: StepModel[Any], pause: Callable[[], None]) -> None:
        self.step_model = step_model
        self.pause = pause

    @property
    def pad_id(self) -> int:
        """The wrapped step model's padding id.

        Returns
        -------
        int
            ``step_model.pad_id``.

        Notes
        -----
        The search forbids it and pads with it exactly as it would unwrapped.
        """
        return self.step_model.pad_id

    @property
    def bos_id(self) -> int:
        """The wrapped step model's start id.

        Returns
        -------
        int
            ``step_model.bos_id``.

        Notes
        -----
        The search feeds it first exactly as it would unwrapped.
        """
        return self.step_model.bos_id

    @property
    def eos_id(self) -> int:
        """The wrapped step model's end-of-sentence id.

        Returns
        -------
        int
            ``step_model.eos_id``.

        Notes
        -----
        The search ends hypotheses on it exactly as it would unwrapped.
        """
        return self.step_model.eos_id

    @property
    def max_output_length(self) -> int | None:
        """The wrapped step model's output length cap, if it has one.

        Returns
        -------
        int or None
            Its ``max_output_length``, or None.

        Notes
        -----
        Without it a wrapped model with learned positions would lose its cap (the searches read it with
        ``getattr``).
        """
        return getattr(self.step_model, "max_output_length", None)

    @property
    def model(self) -> Any:
        """The module the wrapped step model decodes with, if any.

        Returns
        -------
        Any
            Its ``model`` attribute, or None.

        Notes
        -----
        What :func:`~transformer.decoding.step_model.inference_context` switches to eval mode.
        """
        return getattr(self.step_model, "model", None)

    def start(self, src_tokens: Tensor) -> Any:
        """Pause, then start the wrapped step model.

        Parameters
        ----------
        src_tokens : torch.Tensor, shape (batch, src_len), int64
            Source token ids.

        Returns
        -------
        Any
            The wrapped model's state.

        Notes
        -----
        The encoder pass is one slice of the search, as each decoder step is.
        """
        self.pause()
        return self.step_model.start(src_tokens)

    def log_probs(self, state: Any, last_tokens: Tensor) -> Tensor:
        """Pause, then run one step of the wrapped step model.

        Parameters
        ----------
        state : Any
            The wrapped model's state.
        last_tokens : torch.Tensor, shape (rows,), int64
            Newest token of every row.

        Returns
        -------
        torch.Tensor, shape (rows, vocab_size), float32
            The wrapped model's log-probabilities.

        Notes
        -----
        Whatever ``pause`` runs must not touch this search's state.
        """
        self.pause()
        return self.step_model.log_probs(state, last_tokens)

    def reorder(self, state: Any, row_indices: Tensor) -> None:
        """Reorder the wrapped step model's rows.

        Parameters
        ----------
        state : Any
            The wrapped model's state.
        row_indices : torch.Tensor, shape (new_rows,), int64
            For each new row, the old row it continues.

        Returns
        -------
        None

        Notes
        -----
        No pause: a reorder belongs to the step before it.
        """
        self.step_model.reorder(state, row_indices)
