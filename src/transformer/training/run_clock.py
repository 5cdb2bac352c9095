"""The wall clock of one training invocation, and the schedule position a binding time budget gives.

A run stopped by ``max_minutes`` and resumed trains for another ``max_minutes``: the clock measures the
current invocation (a "segment"), while the run's total time is kept in its training state.
"""

import time

from transformer.training.schedule import TimeBudget


class RunClock:
    """Time a training segment and place the schedule on ``max(step, the clock's step)``.

    Parameters
    ----------
    time_budget : TimeBudget or None
        ``train.max_minutes`` as a budget; None when the run has no time limit.

    Notes
    -----
    The first step of a segment is not counted (:meth:`step_done` starts the budget's clock after it): it
    carries one-off costs (kernel selection, allocation) that would otherwise let the clock lead on a machine
    that is in fact fast enough. The position only moves forward, so validation and checkpoints that follow it
    (``crossed_multiple``) fire once per multiple.
    """

    def __init__(self, time_budget: TimeBudget | None) -> None:
        self.time_budget = time_budget
        self.position = 0.0  # where the schedule stood after the last step
        self.led_from: int | None = None  # the first step at which the clock led the schedule
        self._segment_started: float | None = None  # perf_counter() when the segment's loop began
        self._clock_start: float | None = None  # segment seconds at the end of the segment's first step

    def start_segment(self, step: int) -> None:
        """Start timing a segment that begins after ``step`` steps.

        Parameters
        ----------
        step : int
            Optimizer steps already done (0, or the resumed checkpoint's step).

        Returns
        -------
        None

        Notes
        -----
        Forgets the previous segment's clock: each invocation gets its whole ``max_minutes``.
        """
        self._segment_started = time.perf_counter()
        self._clock_start, self.led_from = None, None
        self.position = float(step)

    def end_segment(self) -> None:
        """Stop timing: :meth:`segment_seconds` reads 0 until the next segment starts.

        Returns
        -------
        None

        Notes
        -----
        Called when the loop ends, however it ends, so a validation after it does not see a running clock.
        """
        self._segment_started = None

    def step_done(self) -> None:
        """Note that a step ended; after the segment's first, the budget's clock starts.

        Returns
        -------
        None

        Notes
        -----
        The first step's one-off costs (kernel selection, first allocations) stay out of the budget's clock,
        which otherwise could lead on a machine fast enough for the whole schedule.
        """
        if self._clock_start is None:
            self._clock_start = self.segment_seconds()

    def segment_seconds(self) -> float:
        """Wall-clock seconds this segment has trained (0 outside a segment).

        Returns
        -------
        float
            Time since :meth:`start_segment`.

        Notes
        -----
        ``max_minutes`` limits each invocation, and the learning-rate schedule reads this clock to end its
        cool-down at the limit.
        """
        if self._segment_started is None:
            return 0.0
        return time.perf_counter() - self._segment_started

    def clock_step(self) -> float:
        """Return the step of the schedule that the time budget's clock has reached.

        Returns
        -------
        float
            0.0 without a budget or before the segment's first step has ended; then ``max_steps`` times the
            share of the budget used since (:meth:`TimeBudget.schedule_step`).

        Notes
        -----
        The schedule, validation and checkpoints follow ``max(step, clock_step())``, so when the time limit
        binds the whole recipe (warm-up, decay, cool-down, checkpoint spacing) is fitted into it.
        """
        if self.time_budget is None or self._clock_start is None or self._segment_started is None:
            return 0.0
        return self.time_budget.schedule_step(self.segment_seconds(), self._clock_start)

    def advance(self, step: int) -> tuple[float, float, bool]:
        """Move the schedule's position to ``step``, or to the clock's step if that is further.

        Parameters
        ----------
        step : int
            The step just finished.

        Returns
        -------
        previous : float
            The position before.
        position : float
            The position now.
        clock_took_the_lead : bool
            True at the first step of the segment where the clock leads (the caller says so once).

        Notes
        -----
        A clock that leads once keeps leading in practice (it is a share of the time, and steps do not speed
        up), so only the first lead is reported.
        """
        clock = self.clock_step()
        took_the_lead = clock > step and self.led_from is None
        if took_the_lead:
            self.led_from = step
        previous, self.position = self.position, max(self.position, float(step), clock)
        return previous, self.position, took_the_lead
