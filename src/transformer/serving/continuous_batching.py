"""Step-level ("continuous") batching: sentences join and leave one running decoder batch at any step.

The offline searches (:mod:`transformer.decoding.greedy`, :mod:`transformer.decoding.beam_search`) start a
batch together and run it until its last sentence ends, so every row shares one decoded length. A server
cannot wait for that: a short sentence that arrives while a long one decodes must start at once and leave
as soon as its search ends. :class:`ContinuousBatch` therefore keeps, per running sentence, its own step
count, position and length limit, and per decoder row a self-attention cache that is *right-aligned*: a row
that has decoded ``n`` tokens holds its keys/values in the last ``n`` columns, the columns before them
padding that ``self_valid`` masks out. Every step appends one column for all rows, so the model's own
incremental decoder layers (:class:`~transformer.model.decoder.DecoderLayer`) run unchanged; only the
embedding (each row at its own position) and the masks are built here.

The search arithmetic is the offline beam search's, step for step (2 x beam candidates ranked by summed
log-probability, the best ``beam_size`` EOS candidates finish, scores normalised once at the end over the
sentence's ``beam_size`` slots), with ``beam_size = 1`` as greedy search. A sentence's result is thus the
one ``transformer translate`` gives it, up to float32 rounding that depends on the batch's shape (as it
does offline when sentences are batched differently).
"""

from collections.abc import Hashable
from dataclasses import dataclass, field

import torch
from torch import Tensor
from torch.nn import functional as F

from transformer.config.decode import DecodeConfig
from transformer.data.pipeline.batch import pad_sequences
from transformer.data.shortlist import Shortlist
from transformer.decoding.cache_rows import reorder_decoder_cache
from transformer.decoding.search import Hypothesis, normalise_scores, output_length_limits
from transformer.decoding.shortlist import RestrictedProjection
from transformer.kernels.native_step import NativeDecoderStep
from transformer.model.decoder import DecoderCache
from transformer.model.masks import build_padding_mask
from transformer.model.transformer import Transformer
from transformer.serving.padded_cache import append_sentences, model_device, trim_unused_columns


@dataclass(frozen=True)
class SentenceToDecode:
    """One source sentence waiting to join a :class:`ContinuousBatch`.

    Parameters
    ----------
    key : Hashable
        The caller's handle, returned with the result.
    src_ids : list of int
        Source token ids, ending with EOS.
    decode_config : DecodeConfig
        Its search settings; ``beam_size`` must equal the batch's, the rest (length penalty, length limits,
        ``nbest``) may differ per sentence.

    Notes
    -----
    The length penalty only ranks finished hypotheses, so sentences with different ``length_penalty`` can
    share one batch; a different beam size changes the rows per sentence and needs its own batch.
    """

    key: Hashable
    src_ids: list[int]
    decode_config: DecodeConfig


@dataclass(frozen=True)
class DecodedSentence:
    """The result of one sentence, handed back the step its search ends.

    Parameters
    ----------
    key : Hashable
        The handle of its :class:`SentenceToDecode`.
    hypotheses : list of Hypothesis
        Its ``nbest`` best hypotheses, best first (empty when no finite-probability one exists).
    num_steps : int
        Decoder steps it took part in.
    error : str or None
        Why it has no result (the model's scores were NaN); None when it decoded normally.

    Notes
    -----
    ``hypotheses`` carry the same ``tokens``, ``score`` and ``log_prob`` as the offline searches'.
    """

    key: Hashable
    hypotheses: list[Hypothesis]
    num_steps: int
    error: str | None = None


@dataclass
class _Finished:
    """Finished hypotheses of one running sentence, in the order they finished (at most beam_size)."""

    tokens: list[list[int]] = field(default_factory=list)  # final EOS included
    num_steps: list[int] = field(default_factory=list)
    ends_with_eos: list[bool] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)


class ContinuousBatch:
    """A running decoder batch that sentences join and leave at any step.

    Parameters
    ----------
    model : Transformer
        The model, in eval mode, on its device and in its dtype; :meth:`step` must run under
        ``torch.inference_mode``.
    beam_size : int
        Hypotheses per sentence (1: greedy search).
    shortlist : Shortlist or None
        A vocabulary shortlist: each sentence is scored over its own shortlist, as
        :class:`~transformer.decoding.shortlist.ShortlistStepModel` scores it offline; None scores the whole
        vocabulary.
    native_step : NativeDecoderStep or None
        The model's C++ decoder step (the translator's), run with each row's own position; None runs the
        Python decoder. Both give the same bits.

    Notes
    -----
    With a shortlist the output projection covers the union of the running sentences' shortlists, gathered
    again only when a sentence joins or leaves. Row ``s * beam_size + b`` is beam ``b`` of running sentence ``s``; the projected encoder output is kept
    once per sentence (``DecoderCache.rows_per_source = beam_size``). Sources of different lengths share
    the cross-attention cache right-padded to the longest, with ``cross_attend_mask`` False on the padding.
    Columns no row needs any more (of sentences that left) are trimmed after each step, so memory follows
    the sentences running now, not the longest one ever seen.
    """

    def __init__(
        self,
        model: Transformer,
        beam_size: int,
        shortlist: Shortlist | None = None,
        native_step: NativeDecoderStep | None = None,
    ) -> None:
        if beam_size < 1:
            raise ValueError(f"beam_size must be at least 1, got {beam_size}")
        self.model = model
        self.native_step = native_step
        self.beam_size = beam_size
        self.shortlist = shortlist
        self.device = model_device(model)
        self._clear()

    def _clear(self) -> None:
        device, beam = self.device, self.beam_size
        self.keys: list[Hashable] = []
        self.configs: list[DecodeConfig] = []
        self.src_lengths: list[int] = []
        self.finished: list[_Finished] = []
        self.sentence_tokens: list[Tensor] = []  # with a shortlist: each sentence's allowed target ids
        self._projection: RestrictedProjection | None = None  # their union's; None: gather it again
        self.cache = DecoderCache(rows_per_source=beam)
        self.self_valid = torch.zeros((0, 0), dtype=torch.bool, device=device)  # (rows, key_len)
        self.steps = torch.zeros(0, dtype=torch.long, device=device)  # (sentences,)
        self.min_lengths = torch.zeros(0, dtype=torch.long, device=device)  # (sentences,)
        self.max_lengths = torch.zeros(0, dtype=torch.long, device=device)  # (sentences,)
        self.tokens = torch.zeros((0, beam, 0), dtype=torch.long, device=device)  # (sentences, beam, len)
        self.log_probs = torch.zeros((0, beam), device=device)  # (sentences, beam)
        self.last_tokens = torch.zeros(0, dtype=torch.long, device=device)  # (rows,)

    @property
    def num_sentences(self) -> int:
        """Sentences decoding now.

        Returns
        -------
        int
            Running sentences (rows / ``beam_size``).

        Notes
        -----
        Zero after every sentence has left; the batch can be reused at once.
        """
        return len(self.keys)

    @property
    def num_rows(self) -> int:
        """Decoder rows of the next step.

        Returns
        -------
        int
            ``num_sentences * beam_size``.

        Notes
        -----
        What the ``batch rows per step`` metric records.
        """
        return len(self.keys) * self.beam_size

    @property
    def source_tokens(self) -> int:
        """Source tokens of the running sentences, times the beam size: what the token budget counts.

        Returns
        -------
        int
            ``beam_size * sum(source lengths)``.

        Notes
        -----
        Cross-attention work per step grows with it, as ``Translator``'s ``max_tokens`` budget counts.
        """
        return self.beam_size * sum(self.src_lengths)

    def admit(self, sentences: list[SentenceToDecode]) -> None:
        """Encode sentences and add their rows to the running batch.

        Parameters
        ----------
        sentences : list of SentenceToDecode
            New sentences; each ``decode_config.beam_size`` must equal the batch's.

        Returns
        -------
        None

        Notes
        -----
        The new sentences are encoded together (one encoder call) and their projected encoder output is
        appended to the cross-attention cache; their self-attention rows start as padding, so their first
        step feeds the start token at position 0 while older rows continue at theirs. Raises ValueError
        for a beam size other than the batch's or a sentence without tokens.
        """
        if not sentences:
            return
        for sentence in sentences:
            if sentence.decode_config.beam_size != self.beam_size:
                raise ValueError(
                    f"sentence {sentence.key!r} asks for beam size {sentence.decode_config.beam_size}, "
                    f"this batch runs {self.beam_size}"
                )
            if not sentence.src_ids:
                raise ValueError(f"sentence {sentence.key!r} has no source tokens")
        config, beam, count = self.model.config, self.beam_size, len(sentences)
        src_tokens = pad_sequences([s.src_ids for s in sentences], config.pad_id).to(self.device)
        src_padding_mask = build_padding_mask(src_tokens, config.pad_id)  # (count, src_len)
        new_cache = self.model.init_decoder_cache(self.model.encode(src_tokens), src_padding_mask)
        self._append_cache(new_cache, count * beam)
        limits = [self._length_limit(s) for s in sentences]
        device = self.device
        self.keys += [s.key for s in sentences]
        self.configs += [s.decode_config for s in sentences]
        self.src_lengths += [len(s.src_ids) for s in sentences]
        self.finished += [_Finished() for _ in sentences]
        if self.shortlist is not None:
            self.sentence_tokens += [self.shortlist.sentence_tokens(s.src_ids) for s in sentences]
            self._projection = None
        zeros = torch.zeros(count, dtype=torch.long, device=device)
        self.steps = torch.cat([self.steps, zeros])
        self.min_lengths = torch.cat(
            [self.min_lengths, torch.tensor([s.decode_config.min_length for s in sentences], device=device)]
        )
        self.max_lengths = torch.cat([self.max_lengths, torch.tensor(limits, device=device)])
        width = self.tokens.size(2)
        self.tokens = torch.cat([self.tokens, self.tokens.new_full((count, beam, width), config.pad_id)])
        # One live beam per new sentence; the others empty (-inf), as the offline beam search starts.
        new_log_probs = torch.full((count, beam), float("-inf"), device=device)
        new_log_probs[:, 0] = 0.0
        self.log_probs = torch.cat([self.log_probs, new_log_probs])
        start = torch.full((count * beam,), config.start_id, dtype=torch.long, device=device)
        self.last_tokens = torch.cat([self.last_tokens, start])

    def _length_limit(self, sentence: SentenceToDecode) -> int:
        """Compute the most output tokens the sentence may get, as the offline searches do."""
        config = self.model.config
        position_limit = config.max_positions if config.positional_encoding == "learned" else None
        src_tokens = torch.tensor([sentence.src_ids])
        return int(output_length_limits(src_tokens, config.pad_id, sentence.decode_config, position_limit)[0])

    def _append_cache(self, new_cache: DecoderCache, new_rows: int) -> None:
        """Append new sentences' cross-attention cache and padding self-attention rows."""
        if self.cache.cross_attend_mask is None or not self.cache.layers:
            self.cache.layers = new_cache.layers
            self.cache.cross_attend_mask = new_cache.cross_attend_mask
            self.self_valid = torch.zeros((new_rows, 0), dtype=torch.bool, device=self.device)
            return
        self.self_valid = append_sentences(self.cache, new_cache, self.self_valid, new_rows)

    def drop(self, keys: set[Hashable]) -> int:
        """Remove sentences from the batch without a result (their clients went away).

        Parameters
        ----------
        keys : set of Hashable
            Handles of sentences to drop; handles not in the batch are ignored.

        Returns
        -------
        int
            How many sentences were dropped.

        Notes
        -----
        The remaining rows keep their caches; the freed budget admits waiting sentences at the next step.
        """
        kept = [index for index, key in enumerate(self.keys) if key not in keys]
        dropped = len(self.keys) - len(kept)
        if dropped:
            self._keep_sentences(torch.tensor(kept, dtype=torch.long, device=self.device), None)
        return dropped

    def step(self) -> list[DecodedSentence]:
        """Run one decoder step for every row, advance every search, and return the sentences that ended.

        Returns
        -------
        list of DecodedSentence
            Sentences whose search ended at this step (they have left the batch).

        Notes
        -----
        One forward pass of the decoder over ``num_rows`` rows of one new token each. A sentence ends when
        ``beam_size`` hypotheses have finished, at its length limit, or when no live beam has non-zero
        probability; then it leaves at once. Rows whose model scores are NaN end with ``error`` set.
        """
        if not self.keys:
            return []
        model_log_probs = self._decoder_step()  # (rows, vocab)
        beam, num_sentences = self.beam_size, len(self.keys)
        nan_rows = model_log_probs.isnan().any(dim=1).view(num_sentences, beam).any(dim=1)  # (sentences,)
        step_log_probs = self._forbid_tokens(model_log_probs).view(num_sentences, beam, -1)
        candidate_log_probs, origins, new_tokens = self._extend(step_log_probs)
        at_limit = self.max_lengths == self.steps + 1  # (sentences,)
        eos_id = self.model.config.eos_id
        num_candidates = candidate_log_probs.size(1)
        ranks = torch.arange(num_candidates, device=self.device)
        is_eos = new_tokens == eos_id  # (sentences, num_candidates)
        finishing = (is_eos | at_limit[:, None]) & (ranks < beam) & candidate_log_probs.isfinite()
        self._add_finished(finishing, candidate_log_probs, origins, new_tokens)
        # The best beam_size candidates that do not end in EOS continue (EOS ones pushed behind, stably).
        order = torch.where(is_eos, ranks + num_candidates, ranks).argsort(dim=1)[:, :beam]
        kept_origins = origins.gather(1, order)  # (sentences, beam)
        self.log_probs = candidate_log_probs.gather(1, order)
        self.tokens = self.tokens.gather(1, kept_origins[:, :, None].expand(-1, -1, self.tokens.size(2)))
        newest = new_tokens.gather(1, order)  # (sentences, beam)
        self._write_tokens(newest)
        self.steps = self.steps + 1
        counts = torch.tensor([len(done.tokens) for done in self.finished], device=self.device)
        done = (counts >= beam) | at_limit | ~self.log_probs.isfinite().any(dim=1) | nan_rows
        done_list = done.tolist()  # the step's one read back to the host, besides finished candidates
        nan_list = nan_rows.tolist() if any(done_list) else []
        results = [self._result(index, nan_list[index]) for index, ended in enumerate(done_list) if ended]
        self.last_tokens = newest.reshape(-1)  # (rows,)
        if results or beam > 1:  # greedy rows stay in place while no sentence leaves: no cache copy
            self._keep_sentences((~done).nonzero().squeeze(1), kept_origins)
        return results

    def _decoder_step(self) -> Tensor:
        """Feed every row's last token at its own position; return next-token log-probabilities."""
        model, beam = self.model, self.beam_size
        positions = self.steps.repeat_interleave(beam)  # (rows,)
        rows = positions.numel()
        self.self_valid = torch.cat(
            [self.self_valid, torch.ones((rows, 1), dtype=torch.bool, device=self.device)], dim=1
        )  # (rows, key_len)
        self_mask = self._self_attend_mask(positions)
        if self.native_step is not None:
            hidden = self.native_step.run(self.cache, self.last_tokens, False, positions, self_mask)
        else:
            hidden = model.tgt_embedding(self.last_tokens[:, None])  # (rows, 1, d_model)
            if model.positional_encoding is not None:
                table = model.positional_encoding(int(self.steps.max()) + 1, 0)  # (max_position + 1, d_model)
                hidden = hidden + table[positions][:, None].to(hidden.dtype)
            hidden = model.embedding_dropout(hidden)
            hidden, _, _ = model.decoder(hidden, None, self_mask, self.cache.cross_attend_mask, self.cache)
        if self.shortlist is not None:
            if self._projection is None:
                self._projection = RestrictedProjection(model, self.sentence_tokens)
            sentences = torch.arange(len(self.keys), device=self.device)  # (sentences,)
            row_sentences = sentences.repeat_interleave(beam)  # (rows,)
            return self._projection.log_probs(hidden[:, -1], row_sentences)
        logits = model.project_output(hidden)  # (rows, 1, vocab)
        return F.log_softmax(logits[:, -1], dim=-1, dtype=torch.float32)

    def _self_attend_mask(self, positions: Tensor) -> Tensor | None:
        """Mask of shape (rows, 1, 1, key_len): True on each row's own keys (and inside its window)."""
        window = self.model.config.attention_window
        if window is None and bool(self.self_valid.all()):
            return None  # every row sees every column: unmasked, as the offline step of a lone sentence
        allowed = self.self_valid
        if window is not None:
            key_len = allowed.size(1)
            # Right-aligned: column c of a row at position p holds position p - (key_len - 1 - c).
            distance = key_len - 1 - torch.arange(key_len, device=self.device)  # (key_len,)
            allowed = allowed & (distance[None, :] <= window)
        return allowed[:, None, None, :]

    def _forbid_tokens(self, model_log_probs: Tensor) -> Tensor:
        """Forbid padding and the start token always, EOS before each sentence's ``min_length`` tokens."""
        config = self.model.config
        forbidden = model_log_probs.index_fill(
            1, torch.tensor([config.pad_id, config.start_id], device=self.device), float("-inf")
        )
        eos_allowed = (self.steps >= self.min_lengths).repeat_interleave(self.beam_size)  # (rows,)
        eos_column = torch.where(eos_allowed, model_log_probs[:, config.eos_id], float("-inf"))
        forbidden[:, config.eos_id] = eos_column  # put back when the start token is also EOS (Marian)
        return forbidden

    def _extend(self, step_log_probs: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Find the 2 x beam best one-token extensions per sentence: summed log-probs, origin beams, tokens."""
        num_sentences, beam, vocab_size = step_log_probs.shape
        num_candidates = min(2 * beam, beam * vocab_size)
        per_beam = min(num_candidates, vocab_size)
        beam_best, beam_tokens = step_log_probs.topk(per_beam, dim=2)  # (sentences, beam, per_beam)
        totals = self.log_probs[:, :, None] + beam_best
        candidate_log_probs, flat = totals.view(num_sentences, -1).topk(num_candidates, dim=1)
        new_tokens = beam_tokens.view(num_sentences, -1).gather(1, flat)  # (sentences, num_candidates)
        return candidate_log_probs, flat // per_beam, new_tokens

    def _add_finished(
        self, finishing: Tensor, candidate_log_probs: Tensor, origins: Tensor, new_tokens: Tensor
    ) -> None:
        """Append finishing candidates, best first, to their sentences' free slots (host side)."""
        sentences = finishing.any(dim=1).nonzero().squeeze(1).tolist()
        if not sentences:
            return
        steps = self.steps.tolist()
        for sentence in sentences:
            finished = self.finished[sentence]
            flags = finishing[sentence].tolist()
            log_probs = candidate_log_probs[sentence].tolist()
            origin_list, token_list = origins[sentence].tolist(), new_tokens[sentence].tolist()
            step = steps[sentence]
            for rank, flag in enumerate(flags):
                if not flag or len(finished.tokens) >= self.beam_size:
                    continue
                prefix = self.tokens[sentence, origin_list[rank], :step].tolist()
                finished.tokens.append([*prefix, token_list[rank]])
                finished.num_steps.append(step + 1)
                finished.ends_with_eos.append(token_list[rank] == self.model.config.eos_id)
                finished.log_probs.append(log_probs[rank])

    def _write_tokens(self, continuing_tokens: Tensor) -> None:
        """Write each sentence's new tokens at its own step, widening the token table when needed."""
        width = int(self.steps.max()) + 1
        if width > self.tokens.size(2):
            extra = self.tokens.new_full((*self.tokens.shape[:2], width - self.tokens.size(2)), 0)
            self.tokens = torch.cat([self.tokens, extra], dim=2)  # (sentences, beam, width)
        index = self.steps[:, None, None].expand(-1, self.beam_size, 1)
        self.tokens.scatter_(2, index, continuing_tokens[:, :, None])

    def _result(self, sentence: int, nan_seen: bool) -> DecodedSentence:
        """Rank a sentence's finished hypotheses as the offline beam search does, over its beam slots."""
        key, config, finished = self.keys[sentence], self.configs[sentence], self.finished[sentence]
        num_steps = int(self.steps[sentence])
        if nan_seen:
            error = "the model computes NaN scores (its weights are damaged or overflow)"
            return DecodedSentence(key, [], num_steps, error)
        count, beam = len(finished.tokens), self.beam_size
        log_probs = torch.full((1, beam), float("-inf"))
        lengths = torch.zeros((1, beam), dtype=torch.long)
        log_probs[0, :count] = torch.tensor(finished.log_probs, dtype=torch.float32)
        lengths[0, :count] = torch.tensor(finished.num_steps, dtype=torch.long)
        # Scored once, over the (1, beam) slots: the layout of the offline search of this sentence alone.
        scores = torch.where(
            torch.arange(beam) < count, normalise_scores(log_probs, lengths, config), -torch.inf
        )
        order = scores.argsort(dim=1, descending=True, stable=True)[0, : min(config.nbest, count)].tolist()
        score_list = scores[0].tolist()
        hypotheses = [
            Hypothesis(
                tokens=finished.tokens[slot][: finished.num_steps[slot] - int(finished.ends_with_eos[slot])],
                score=score_list[slot],
                log_prob=finished.log_probs[slot],
                num_steps=finished.num_steps[slot],
            )
            for slot in order
        ]
        return DecodedSentence(key, hypotheses, num_steps)

    def _keep_sentences(self, kept: Tensor, origins: Tensor | None) -> None:
        """Keep sentences ``kept`` (shape (kept,)), their rows following ``origins`` (sentences, beam)."""
        if kept.numel() == 0:
            self._clear()
            return
        beam = self.beam_size
        within = (
            origins[kept]
            if origins is not None
            else torch.arange(beam, device=self.device).expand(kept.numel(), beam)
        )
        row_indices = (kept[:, None] * beam + within).reshape(-1)  # (kept * beam,)
        if self.cache.layers:
            reorder_decoder_cache(self.cache, row_indices)  # rows stay grouped by sentence
        self.self_valid = self.self_valid[row_indices]
        kept_list = kept.tolist()
        self.keys = [self.keys[index] for index in kept_list]
        self.configs = [self.configs[index] for index in kept_list]
        self.src_lengths = [self.src_lengths[index] for index in kept_list]
        self.finished = [self.finished[index] for index in kept_list]
        if self.shortlist is not None and len(kept_list) != len(self.sentence_tokens):
            self.sentence_tokens = [self.sentence_tokens[index] for index in kept_list]
            self._projection = None
        self.steps, self.min_lengths = self.steps[kept], self.min_lengths[kept]
        self.max_lengths, self.log_probs = self.max_lengths[kept], self.log_probs[kept]
        # Tokens sit at their step's column: the longest running sentence's step count is all the width needed.
        self.tokens = self.tokens[kept][:, :, : int(self.steps.max())]
        self.last_tokens = self.last_tokens.view(-1, beam)[kept].reshape(-1)
        self._trim()

    def _trim(self) -> None:
        """Drop self-attention columns and source columns that no remaining row uses."""
        self.self_valid = trim_unused_columns(self.cache, self.self_valid, max(self.src_lengths))
