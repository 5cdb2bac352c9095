"""How often a shortlist holds the token the full vocabulary would choose: its step coverage.

The benchmark's shortlist target ("the shortlist holds the full vocabulary's best token on >= 99% of decoder
steps") is measured here: greedy search over the *whole* vocabulary, and for every step, whether the token it
chose is in that sentence's shortlist. A step whose best token is outside the shortlist is a step where the
shortlisted search must choose something else; coverage near 1 means the two searches agree nearly always.
"""

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from transformer.data.pipeline.batch import pad_sequences
from transformer.data.pipeline.inference_batches import inference_batches
from transformer.data.shortlist import Shortlist
from transformer.decoding.greedy import greedy_search
from transformer.decoding.step_model import as_step_model
from transformer.decoding.translator import Translator


@dataclass(frozen=True)
class StepCoverage:
    """Decoder steps counted, and those whose full-vocabulary best token was in the shortlist.

    Parameters
    ----------
    steps : int
        Greedy steps that output a token (EOS steps are not counted).
    covered : int
        Of those, the steps whose token is in the sentence's shortlist.
    mean_shortlist_size : float
        Mean size of a sentence's shortlist (tokens scored per step instead of the whole vocabulary).

    Notes
    -----
    EOS is in every shortlist, so leaving its steps out makes :attr:`fraction` a lower bound.
    """

    steps: int
    covered: int
    mean_shortlist_size: float

    @property
    def fraction(self) -> float:
        """Covered steps over all steps (1.0 when no step was counted).

        Returns
        -------
        float
            In [0, 1].

        Notes
        -----
        The issue's target is at least 0.99 on the validation set.
        """
        return self.covered / self.steps if self.steps else 1.0


def measure_step_coverage(
    translator: Translator, sentences: Sequence[str], shortlist: Shortlist, max_tokens: int = 4096
) -> StepCoverage:
    """Decode sentences greedily over the whole vocabulary and count steps whose token the shortlist holds.

    Parameters
    ----------
    translator : Translator
        The model, tokenizer, device, precision and length settings (its own shortlist, if any, is not
        used: the reference is the full vocabulary).
    sentences : sequence of str
        Source sentences (the validation set's, for the benchmark); blank ones are skipped.
    shortlist : Shortlist
        The shortlist to measure.
    max_tokens : int
        Source tokens per batch.

    Returns
    -------
    StepCoverage
        Steps, covered steps and the mean shortlist size.

    Notes
    -----
    Greedy search is the reference because each of its steps has one best token; beam search keeps
    several, and a shortlist that covers greedy's choices covers the tokens beam search ranks first too.
    Only the first model of an ensemble is decoded.
    """
    config = dataclasses.replace(translator.decode_config, beam_size=1, nbest=1, sampling=False, mbr=0)
    eos_id = translator.model.config.eos_id
    encoded = [
        [*translator.tokenizer.encode(sentence.strip()), eos_id] if sentence.strip() else []
        for sentence in sentences
    ]
    step_model = as_step_model(translator.model, config.use_cache)
    steps = covered = 0
    sizes: list[int] = []
    for batch in inference_batches([len(ids) for ids in encoded], max_tokens):
        sources = [encoded[index] for index in batch]
        src_tokens = pad_sequences(sources, translator.model.config.pad_id).to(translator.device)
        hypotheses = greedy_search(step_model, src_tokens, config)
        for source, found in zip(sources, hypotheses, strict=True):
            allowed = shortlist.sentence_tokens(source)
            sizes.append(allowed.numel())
            tokens = torch.tensor(found[0].tokens if found else [], dtype=torch.long)
            steps += tokens.numel()
            covered += int(torch.isin(tokens, allowed).sum())
    mean_size = sum(sizes) / len(sizes) if sizes else 0.0
    return StepCoverage(steps, covered, mean_size)
