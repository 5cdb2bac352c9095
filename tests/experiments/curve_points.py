"""A hand-made quality curve for the tests of ``first_reaching`` and the rnn-baseline's curve metrics."""

from transformer.experiments.rnn_baseline.quality_curve import CurvePoint

#: Four checkpoints 100 steps (60 s, 1000 tokens) apart, scoring 8, 21, 19.5 and 31: the third dips below a
#: level the second already reached, so "first at or above" and "last at or above" differ.
CURVE_WITH_A_DIP = (
    CurvePoint("step-00000100", 100, 60.0, 1000, 8.0),
    CurvePoint("step-00000200", 200, 120.0, 2000, 21.0),
    CurvePoint("step-00000300", 300, 180.0, 3000, 19.5),
    CurvePoint("step-00000400", 400, 240.0, 4000, 31.0),
)
