import pytest
import torch

from transformer.device import resolve_device


def pretend_gpus(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)


def test_a_flag_is_named_as_typed_and_a_setting_as_assigned(monkeypatch) -> None:
    pretend_gpus(monkeypatch, 0)
    with pytest.raises(ValueError) as flag_error:
        resolve_device("cuda", option="--device")
    assert str(flag_error.value) == "--device cuda: CUDA is not available on this machine; use --device cpu"
    with pytest.raises(ValueError) as setting_error:
        resolve_device("cuda")
    assert str(setting_error.value) == (
        "train.device='cuda': CUDA is not available on this machine; use train.device=cpu"
    )
    assert resolve_device("auto", option="--device") == torch.device("cpu")


@pytest.mark.parametrize("requested", ["gpu", "cuda:", "cuda:one", "CPU", "cuda:0 "])
def test_a_malformed_device_is_refused_before_torch_sees_it(requested: str) -> None:
    with pytest.raises(ValueError) as error:
        resolve_device(requested, option="--device")
    assert str(error.value) == f"--device {requested}: expected auto, cpu, cuda or cuda:N"


def test_a_gpu_index_beyond_the_machine_is_refused(monkeypatch) -> None:
    pretend_gpus(monkeypatch, 2)
    assert resolve_device("cuda:1", option="--device") == torch.device("cuda:1")
    with pytest.raises(ValueError) as error:
        resolve_device("cuda:2", option="--device")
    assert str(error.value) == "--device cuda:2: this machine has 2 GPU(s)"
