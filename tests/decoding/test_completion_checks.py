"""Completion checks every few steps: the results of checking every step, and no host read in between.

A search learns which sentences are done (to drop them from the batch and to end the loop) by reading a
tensor back to the host, which on a GPU makes the host wait for the queued kernels. It does so every
``completion_check_interval(device)`` steps: 1 on the CPU, more on a GPU. These tests force other intervals
on the CPU by patching that function in the search modules.
"""

import collections
import dataclasses
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode

import transformer.decoding.beam_search as beam_search_module
import transformer.decoding.greedy as greedy_module
from tests.decoding.oracle_step_model import EOS, A, B, TableStepModel, oracle_sources, random_tables
from transformer import Transformer, TransformerConfig
from transformer.config.decode import DecodeConfig
from transformer.decoding.beam_search import beam_search, search
from transformer.decoding.greedy import greedy_search
from transformer.decoding.search import Hypothesis
from transformer.decoding.step_model import StepModel, TransformerStepModel

NEVER = 1000  # an interval longer than any search here: no check before the loop ends by itself
REFERENCE_CASES = json.loads((Path(__file__).parent / "reference_searches.json").read_text())["cases"]


@pytest.fixture
def check_every(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """Set the number of steps between completion checks, on any device."""

    def set_interval(interval: int) -> None:
        for module in (greedy_module, beam_search_module):
            monkeypatch.setattr(module, "completion_check_interval", lambda device: interval)

    return set_interval


def decode_reference_case(case: dict[str, Any]) -> list[list[Hypothesis]]:
    tables = random_tables(case["seed"], num_tables=3, max_prefix_len=4)
    src_tokens = oracle_sources(*case["table_ids"], lengths=tuple(case["lengths"]))
    return search(TableStepModel(*tables), src_tokens, DecodeConfig(**case["config"]))


@pytest.mark.parametrize("interval", [1, 2, 3, 5, NEVER])
def test_oracle_results_equal_those_of_the_implementation_that_checked_every_step(
    check_every, interval: int
) -> None:
    """30 searches (greedy, beam 2 to 4, batches of 1 and 7) whose sentences finish at different steps."""
    check_every(interval)
    for case in REFERENCE_CASES:
        found = decode_reference_case(case)
        expected = case["hypotheses"]
        assert [[h.tokens for h in s] for s in found] == [[h["tokens"] for h in s] for s in expected]
        # Sums of the same float32 log-probabilities in the same order: equal to the last bit.
        assert [[h.log_prob for h in s] for s in found] == [[h["log_prob"] for h in s] for s in expected]
        # A float32 pow may round differently in vectorised and scalar code, or on another CPU.
        assert [h.score for s in found for h in s] == pytest.approx(
            [h["score"] for s in expected for h in s], rel=1e-6
        )


# Two tables of test_greedy.py: EOS at once, or only at the length limit.
EARLY_EOS = {(): {EOS: 0.6, A: 0.4}, (A,): {EOS: 0.7, B: 0.3}}
NEVER_ENDS = {(A,) * k: {A: 0.5, EOS: 0.4} for k in range(60)}
# One path only: at a length limit of 2 a beam of 2 gets one hypothesis, [A, A]. A search that let the
# done sentence go on would continue it to [A, A, A] and finish that with EOS as a second hypothesis.
ONE_PATH = {(): {A: 1.0}, (A,): {A: 1.0}, (A, A): {A: 1.0}}
# With a beam of 2, [B] + EOS finishes at the second step and [A, B] + EOS at the third.
ENDS_AFTER_B = {(A,) * k: {A: 0.5, B: 0.3, EOS: 0.2} for k in range(60)}


def test_finished_sentences_leave_the_batch_at_the_next_check(check_every) -> None:
    check_every(3)
    step_model = TableStepModel(EARLY_EOS, NEVER_ENDS)
    found = greedy_search(step_model, oracle_sources(0, 1), DecodeConfig(max_length=8))
    assert [h.tokens for [h] in found] == [[], [A] * 8]
    # Done after the first step, the first sentence stays until the check after the third.
    assert step_model.rows_per_step == [2, 2, 2, 1, 1, 1, 1, 1]


@pytest.mark.parametrize(("interval", "num_steps"), [(1, 1), (3, 3), (4, 4), (NEVER, 8)])
def test_the_loop_ends_at_the_first_check_after_every_sentence_is_done(
    check_every, interval: int, num_steps: int
) -> None:
    check_every(interval)
    greedy_model, beam_model = TableStepModel(EARLY_EOS), TableStepModel(EARLY_EOS)
    assert greedy_search(greedy_model, oracle_sources(0, 0), DecodeConfig(max_length=8))[0][0].tokens == []
    assert greedy_model.rows_per_step == [2] * num_steps
    config = DecodeConfig(beam_size=2, nbest=2, max_length=8)
    assert [h.tokens for h in beam_search(beam_model, oracle_sources(0), config)[0]] == [[], [A]]
    assert len(beam_model.rows_per_step) == max(num_steps, 2)  # [A] + EOS finishes at the second step


@pytest.mark.parametrize("interval", [1, 3, NEVER])
def test_a_sentence_done_at_its_length_limit_adds_no_hypothesis_while_it_waits_to_leave(
    check_every, interval: int
) -> None:
    check_every(interval)
    src_tokens = oracle_sources(0, 1, lengths=(2, 6))  # length limits 2 and 6
    config = DecodeConfig(beam_size=2, nbest=2, max_length_offset=0)
    short, long = beam_search(TableStepModel(ONE_PATH, ENDS_AFTER_B), src_tokens, config)
    assert [h.tokens for h in short] == [[A, A]]  # cut at the limit, without EOS
    assert short[0].log_prob == 0.0
    assert [h.tokens for h in long] == [[B], [A, B]]


@pytest.fixture(scope="module")
def eos_prone_models() -> list[Transformer]:
    """Random tiny models with a large EOS output bias, so that sentences end at different steps."""
    models = []
    for seed, eos_bias in [(0, 2.5), (1, 2.0), (2, 1.5)]:
        torch.manual_seed(seed)
        config = TransformerConfig(
            vocab_size=40,
            d_model=32,
            d_ff=64,
            num_heads=4,
            num_encoder_layers=2,
            num_decoder_layers=2,
            dropout=0.0,
            output_bias=True,
        )
        model = Transformer(config).eval()
        assert model.output_bias is not None
        model.output_bias[config.eos_id] = eos_bias
        models.append(model)
    return models


def random_sources(config: TransformerConfig, batch_size: int, seed: int) -> Tensor:
    """Random sentences of 1 to 11 tokens (EOS included), right-padded."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 12, (batch_size,), generator=generator).tolist()
    src_tokens = torch.full((batch_size, max(lengths)), config.pad_id)
    for row, length in enumerate(lengths):
        src_tokens[row, : length - 1] = torch.randint(
            4, config.vocab_size, (length - 1,), generator=generator
        )
        src_tokens[row, length - 1] = config.eos_id
    return src_tokens


@pytest.mark.parametrize("batch_size", [1, 6, 17])
@pytest.mark.parametrize(
    "config", [DecodeConfig(beam_size=1, min_length=1), DecodeConfig(beam_size=4, nbest=2, min_length=2)]
)
def test_random_models_give_the_same_hypotheses_whatever_the_interval(
    check_every, eos_prone_models, batch_size: int, config: DecodeConfig
) -> None:
    config = dataclasses.replace(config, max_length_offset=3)
    for seed, model in enumerate(eos_prone_models):
        src_tokens = random_sources(model.config, batch_size, seed)
        check_every(1)
        expected = search(model, src_tokens, config)
        lengths = {len(sentence[0].tokens) for sentence in expected}
        assert batch_size == 1 or len(lengths) > 1  # the sentences end at different steps
        for interval in (3, NEVER):
            check_every(interval)
            found = search(model, src_tokens, config)
            assert [[h.tokens for h in s] for s in found] == [[h.tokens for h in s] for s in expected]
            # The model's own float32 arithmetic may round differently for a batch of another size.
            for sentence, expected_sentence in zip(found, expected, strict=True):
                for hypothesis, expected_hypothesis in zip(sentence, expected_sentence, strict=True):
                    assert hypothesis.log_prob == pytest.approx(expected_hypothesis.log_prob, abs=1e-5)
                    assert hypothesis.score == pytest.approx(expected_hypothesis.score, abs=1e-5)


# What makes a GPU wait for the host: reading values back, or a result whose size depends on values.
HOST_READS = {
    "__bool__",
    "__int__",
    "__float__",
    "__index__",
    "item",
    "tolist",
    "nonzero",
    "argwhere",
    "masked_select",
    "equal",
    "unique",
    "unique_consecutive",
}


def is_host_read(func: Callable[..., Any], args: tuple[Any, ...]) -> bool:
    name = getattr(func, "__name__", "")
    if name in ("__getitem__", "__setitem__"):  # indexing with a boolean mask
        index = args[1] if isinstance(args[1], tuple) else (args[1],)
        return any(isinstance(item, Tensor) and item.dtype == torch.bool for item in index)
    return name in HOST_READS


class HostReadRecorder(TorchFunctionMode):
    """Count the host reads a search makes, by decoding step; the step model's own are not counted."""

    def __init__(self) -> None:
        super().__init__()
        self.step = -1  # -1 before the first step
        self.recording = True
        self.reads: collections.Counter[int] = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if self.recording and is_host_read(func, args):
            self.reads[self.step] += 1
        return func(*args, **(kwargs or {}))

    @contextmanager
    def paused(self) -> Iterator[None]:
        recording, self.recording = self.recording, False
        try:
            yield
        finally:
            self.recording = recording


class RecordingStepModel:
    """Pass calls on to a step model with the recorder paused, and tell the recorder each new step."""

    def __init__(self, step_model: StepModel[Any], recorder: HostReadRecorder) -> None:
        self.step_model, self.recorder = step_model, recorder
        self.pad_id, self.bos_id, self.eos_id = step_model.pad_id, step_model.bos_id, step_model.eos_id

    def start(self, src_tokens: Tensor) -> Any:
        with self.recorder.paused():
            return self.step_model.start(src_tokens)

    def log_probs(self, state: Any, last_tokens: Tensor) -> Tensor:
        self.recorder.step += 1
        with self.recorder.paused():
            return self.step_model.log_probs(state, last_tokens)

    def reorder(self, state: Any, row_indices: Tensor) -> None:
        with self.recorder.paused():
            self.step_model.reorder(state, row_indices)


@pytest.mark.parametrize("interval", [1, 3, 4])
@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize("config", [DecodeConfig(beam_size=1), DecodeConfig(beam_size=3, nbest=2)])
def test_the_search_reads_from_the_host_only_at_completion_checks(
    check_every, monkeypatch, eos_prone_models, interval: int, use_cache: bool, config: DecodeConfig
) -> None:
    """One read before the loop (the longest length limit), one per check, none in between, one after (NaN)."""
    check_every(interval)
    recorder = HostReadRecorder()

    def stop_recording(function: Callable[..., Any]) -> Callable[..., Any]:
        def run_unrecorded(*args: Any) -> Any:
            recorder.recording = False  # turning tensors into Hypothesis records, once, after the loop
            return function(*args)

        return run_unrecorded

    monkeypatch.setattr(greedy_module, "build_hypotheses", stop_recording(greedy_module.build_hypotheses))
    monkeypatch.setattr(
        beam_search_module, "_best_hypotheses", stop_recording(beam_search_module._best_hypotheses)
    )
    model = eos_prone_models[1]
    step_model = RecordingStepModel(TransformerStepModel(model, use_cache), recorder)
    src_tokens = random_sources(model.config, 9, seed=1)
    config = dataclasses.replace(config, max_length_offset=3)
    with recorder:
        found = search(step_model, src_tokens, config)
    num_steps = recorder.step + 1
    assert num_steps > interval
    assert len({len(sentence[0].tokens) for sentence in found}) > 1  # sentences end at different steps
    checks = {step: 1 for step in range(num_steps) if (step + 1) % interval == 0}
    checks[num_steps - 1] = checks.get(num_steps - 1, 0) + 1  # after the loop: were any scores NaN?
    assert recorder.reads == {-1: 1, **checks}


def test_the_recorder_sees_the_reads_that_stall_a_gpu() -> None:
    mask, values = torch.tensor([True, False]), torch.tensor([1.0, 2.0])
    recorder = HostReadRecorder()
    with recorder:
        bool(mask.any())
        values[mask]
        values[mask] = 0.0
        mask.nonzero()
        int(values.argmax())
        values.tolist()
        values[values.argmax()]  # an index tensor: no read
        torch.where(mask, values, 0.0)  # no read
    assert recorder.reads == {-1: 6}
