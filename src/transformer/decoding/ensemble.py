"""Ensemble decoding: several models score each step together, each keeping its own decoder cache.

An :class:`EnsembleStepModel` is itself a step model, so greedy search, beam search, sampling, constraints
and MBR decode an ensemble exactly as they decode one model. Every member sees the same rows: a beam
reorder or a finished sentence reorders every member's state.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from transformer.architectures import SequenceModel
from transformer.data.pipeline.text_tokenizer import TextTokenizer
from transformer.decoding.step_model import StepModel

#: ``--ensemble-mode`` values: average the members' probabilities, or their log-probabilities.
ENSEMBLE_MODES = ("prob", "logprob")


@dataclass
class EnsembleState:
    """The members' states, in member order.

    Parameters
    ----------
    member_states : list
        One opaque state per member step model.

    Notes
    -----
    Kept separate because members may be different architectures or sizes: nothing in one member's cache
    has the shape of another's.
    """

    member_states: list[Any]


class EnsembleStepModel:
    """Average the next-token distributions of several step models.

    Parameters
    ----------
    members : sequence of StepModel
        The models' step models (at least one); they must agree on ``pad_id``, ``bos_id`` and ``eos_id``
        and output the same vocabulary.
    mode : {"prob", "logprob"}
        "prob": log of the mean probability (a mixture, as fairseq ensembles); "logprob": the mean
        log-probability, renormalised (a normalised geometric mean, a product of experts).

    Raises
    ------
    ValueError
        For an unknown mode, no members, or members whose special ids differ.

    Notes
    -----
    The mixture keeps a token that any member finds likely; the geometric mean vetoes a token that any member
    rules out (one ``-inf`` makes the mean ``-inf``). Members' log-probabilities are float32 whatever their
    dtype, so an int8 model and a float model may be mixed.
    """

    def __init__(self, members: Sequence[StepModel[Any]], mode: str = "prob") -> None:
        if mode not in ENSEMBLE_MODES:
            raise ValueError(f"ensemble mode {mode!r} is not one of {ENSEMBLE_MODES}")
        if not members:
            raise ValueError("an ensemble needs at least one model")
        first = members[0]
        for index, member in enumerate(members[1:], start=2):
            ids = (member.pad_id, member.bos_id, member.eos_id)
            if ids != (first.pad_id, first.bos_id, first.eos_id):
                raise ValueError(
                    f"ensemble model {index} has pad/start/eos ids {ids}, model 1 "
                    f"{(first.pad_id, first.bos_id, first.eos_id)}: they must share one target vocabulary"
                )
        self.members = list(members)
        self.mode = mode
        wrapped = [getattr(member, "model", None) for member in self.members]
        #: The members' models as one module, so :func:`inference_context` switches them all to eval mode.
        self.model = nn.ModuleList([m for m in wrapped if isinstance(m, nn.Module)])

    @property
    def pad_id(self) -> int:
        """Id of the padding token, shared by every member.

        Returns
        -------
        int
            The first member's ``pad_id`` (checked equal for all at construction).

        Notes
        -----
        One source batch is fed to every member, so they must agree on what padding is.
        """
        return self.members[0].pad_id

    @property
    def bos_id(self) -> int:
        """Id of the first decoder input, shared by every member.

        Returns
        -------
        int
            The first member's ``bos_id``.

        Notes
        -----
        The same token is fed to every member at the first step.
        """
        return self.members[0].bos_id

    @property
    def eos_id(self) -> int:
        """Id of the end-of-sentence token, shared by every member.

        Returns
        -------
        int
            The first member's ``eos_id``.

        Notes
        -----
        A hypothesis ends for every member at once, so the id must mean the same to all.
        """
        return self.members[0].eos_id

    @property
    def max_output_length(self) -> int | None:
        """The most tokens every member can generate: the smallest of their limits.

        Returns
        -------
        int or None
            The smallest ``max_output_length`` of the members that have one; None if none has.

        Notes
        -----
        A member with learned positions would fail past its table, so the ensemble stops where the most
        limited member must.
        """
        limits = [getattr(member, "max_output_length", None) for member in self.members]
        known = [limit for limit in limits if limit is not None]
        return min(known) if known else None

    def start(self, src_tokens: Tensor) -> EnsembleState:
        """Encode the source with every member.

        Parameters
        ----------
        src_tokens : torch.Tensor, shape (batch, src_len), int64
            Source token ids, right-padded with ``pad_id``.

        Returns
        -------
        EnsembleState
            Every member's fresh state.

        Notes
        -----
        Each member builds its own decoder cache: members share no tensors.
        """
        return EnsembleState([member.start(src_tokens) for member in self.members])

    def log_probs(self, state: EnsembleState, last_tokens: Tensor) -> Tensor:
        """Feed every member one token per row and average their distributions.

        Parameters
        ----------
        state : EnsembleState
            The members' states, each extended by ``last_tokens``.
        last_tokens : torch.Tensor, shape (rows,), int64
            Newest token of every row.

        Returns
        -------
        torch.Tensor, shape (rows, vocab_size), float32
            The ensemble's next-token log-probabilities (normalised in both modes).

        Raises
        ------
        ValueError
            If the members' vocabularies differ.

        Notes
        -----
        "prob": ``logsumexp_m(log p_m) - log M``, computed in log space so that small probabilities do not
        underflow. "logprob": ``mean_m(log p_m)`` minus its log-sum-exp; a row every member gives ``-inf``
        everywhere stays ``-inf`` instead of NaN.
        """
        member_log_probs = [
            member.log_probs(member_state, last_tokens)
            for member, member_state in zip(self.members, state.member_states, strict=True)
        ]
        sizes = [log_probs.size(-1) for log_probs in member_log_probs]
        if len(set(sizes)) > 1:
            raise ValueError(f"ensemble members output vocabularies of different sizes: {sizes}")
        stacked = torch.stack(member_log_probs)  # (members, rows, vocab)
        if len(self.members) == 1:
            return stacked[0]
        if self.mode == "prob":
            return torch.logsumexp(stacked, dim=0) - math.log(len(self.members))
        mean = stacked.mean(dim=0)  # (rows, vocab)
        normaliser = torch.logsumexp(mean, dim=-1, keepdim=True)  # (rows, 1)
        return mean - normaliser.clamp(min=torch.finfo(mean.dtype).min)

    def reorder(self, state: EnsembleState, row_indices: Tensor) -> None:
        """Reorder every member's state the same way.

        Parameters
        ----------
        state : EnsembleState
            The members' states, changed in place.
        row_indices : torch.Tensor, shape (new_rows,), int64
            For each new row, the old row it continues.

        Returns
        -------
        None

        Notes
        -----
        Each member reorders its own cache (keeping encoder keys once per sentence where it can).
        """
        for member, member_state in zip(self.members, state.member_states, strict=True):
            member.reorder(member_state, row_indices)


def special_ids_mismatch(first: SequenceModel, other: SequenceModel) -> str | None:
    """Describe how two models' output vocabularies differ in size or special ids, or None.

    Parameters
    ----------
    first, other : Transformer or RNNEncoderDecoder
        Two models meant to decode together.

    Returns
    -------
    str or None
        E.g. "8000 target tokens here, 10000 there" (here: ``other``); None when they agree.

    Notes
    -----
    A model-level check, enough for :class:`~transformer.decoding.translator.Translator` given models;
    :func:`vocabulary_mismatch` also compares the tokenizers' pieces.
    """
    first_config, other_config = first.config, other.config
    if other_config.tgt_vocab_size != first_config.tgt_vocab_size:
        return f"{other_config.tgt_vocab_size} target tokens here, {first_config.tgt_vocab_size} there"
    for name in ("pad_id", "start_id", "eos_id"):
        if getattr(other_config, name) != getattr(first_config, name):
            return f"{name} {getattr(other_config, name)} here, {getattr(first_config, name)} there"
    return None


def vocabulary_mismatch(
    first_tokenizer: TextTokenizer, other_tokenizer: TextTokenizer, first: SequenceModel, other: SequenceModel
) -> str | None:
    """Describe the first difference between two checkpoints' vocabularies, or None when they are one.

    Parameters
    ----------
    first_tokenizer, other_tokenizer : TextTokenizer
        The checkpoints' tokenizers.
    first, other : Transformer or RNNEncoderDecoder
        Their models.

    Returns
    -------
    str or None
        E.g. "target token 17 is '▁Hund' here, '▁Mann' there" (here: ``other``).

    Notes
    -----
    The source side is compared too: the ensemble feeds one encoding of the source to every model.
    Comparing every piece costs a few milliseconds for a 37,000-piece vocabulary.
    """
    mismatch = special_ids_mismatch(first, other)
    if mismatch is not None:
        return mismatch
    if other.config.src_vocab_size != first.config.src_vocab_size:
        return f"{other.config.src_vocab_size} source tokens here, {first.config.src_vocab_size} there"
    sides = [
        ("target", first.config.tgt_vocab_size, first_tokenizer.id_to_piece, other_tokenizer.id_to_piece),
        (
            "source",
            first.config.src_vocab_size,
            first_tokenizer.source_id_to_piece,
            other_tokenizer.source_id_to_piece,
        ),
    ]
    for side, size, first_piece, other_piece in sides:
        for token_id in range(size):
            if other_piece(token_id) != first_piece(token_id):
                return f"{side} token {token_id} is {other_piece(token_id)!r} here, {first_piece(token_id)!r} there"
    return None


def check_ensemble(model: SequenceModel, ensemble: Sequence[SequenceModel], ensemble_mode: str) -> None:
    """Refuse ensemble members whose special ids differ from the first model's, or an unknown mode.

    Parameters
    ----------
    model : SequenceModel
        The first model (model 1).
    ensemble : sequence of SequenceModel
        The other models, numbered from 2 in the messages.
    ensemble_mode : str
        How the ensemble averages; one of :data:`ENSEMBLE_MODES`.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Naming the first member that differs and how (:func:`special_ids_mismatch`), or the unknown mode.

    Notes
    -----
    The members are checked before the mode, so a bad member is reported first; the mode is checked even
    with no other model, as :class:`~transformer.decoding.translator.Translator` always did.
    """
    for index, member in enumerate(ensemble, start=2):
        mismatch = special_ids_mismatch(model, member)
        if mismatch is not None:
            raise ValueError(f"ensemble model {index} differs from model 1: {mismatch}")
    if ensemble_mode not in ENSEMBLE_MODES:
        raise ValueError(f"ensemble_mode={ensemble_mode!r} is not one of {ENSEMBLE_MODES}")


def check_ensemble_vocabularies(
    paths: Sequence[Any], tokenizers: Sequence[TextTokenizer], models: Sequence[SequenceModel]
) -> None:
    """Refuse checkpoints whose vocabulary differs from the first one's.

    Parameters
    ----------
    paths : sequence of str or Path
        The checkpoints, as named by the user (the messages name them).
    tokenizers : sequence of TextTokenizer
        Each checkpoint's tokenizer.
    models : sequence of SequenceModel
        Each checkpoint's model.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Naming the first checkpoint that differs, the first one, and the first difference
        (:func:`vocabulary_mismatch`).

    Notes
    -----
    Every model reads the same source ids and must output the same target ids, so an ensemble needs one
    vocabulary; the models may otherwise differ.
    """
    others = zip(paths[1:], tokenizers[1:], models[1:], strict=True)
    for path, tokenizer, model in others:
        mismatch = vocabulary_mismatch(tokenizers[0], tokenizer, models[0], model)
        if mismatch is not None:
            raise ValueError(
                f"{path}: its vocabulary differs from {paths[0]}'s: {mismatch} (an ensemble needs one)"
            )
