"""Sequence-level knowledge distillation: a small, fast student trained on a teacher's translations.

``transformer distill`` is :func:`~transformer.distillation.pipeline.distill`; the modules are its stages: the
teacher's sharded pass (:mod:`.teacher_pass`), the student's corpus (:mod:`.distilled_corpus`), its training and
judging (:mod:`.student_stages`, :mod:`.judging`), and the run's record (:mod:`.run_state`, :mod:`.identity`).
"""
