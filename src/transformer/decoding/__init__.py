"""Decoding: from a trained model to translations.

The step-model interface every search drives (``step_model.py``), greedy and beam search (section 6.1's beam 4
and length penalty) with their constraints, sampling, MBR, ensembles, a vocabulary shortlist, alignments,
confidence and quality flags; :class:`~transformer.decoding.translator.Translator` puts them behind one call,
and the command workflows (``file_translation.py``, ``translation_evaluation.py``, ``backtranslation.py``) use it.
"""
