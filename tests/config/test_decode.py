import pytest

from transformer.config.decode import MAX_LENGTH_OFFSET, DecodeConfig


def test_decode_defaults_are_the_papers() -> None:
    # Section 6.1: beam 4, length penalty 0.6, outputs up to the input length + 50.
    settings = DecodeConfig()
    assert (settings.beam_size, settings.length_penalty, settings.max_length_offset) == (4, 0.6, 50)
    assert settings.length_penalty_form == "gnmt" and settings.nbest == 1 and not settings.sampling


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"beam_size": 0}, "DecodeConfig.beam_size=0 must be at least 1"),
        ({"nbest": 5}, "DecodeConfig.nbest=5 must be between 1 and beam_size=4"),
        ({"sampling": True, "nbest": 0}, "DecodeConfig.nbest=0 must be at least 1"),
        ({"mbr": 1}, "DecodeConfig.mbr=1 must be 0 \\(off\\) or at least 2 candidates"),
        ({"mbr": 3, "nbest": 4}, "DecodeConfig.nbest=4 must be between 1 and mbr=3"),
        ({"temperature": 0.0}, "DecodeConfig.temperature=0.0 must be positive"),
        ({"top_p": 0.0}, "DecodeConfig.top_p=0.0 must be in \\(0, 1\\]"),
        ({"epsilon": 1.0}, "DecodeConfig.epsilon=1.0 must be in \\[0, 1\\)"),
        ({"length_penalty_form": "linear"}, "DecodeConfig.length_penalty_form='linear' is not one of"),
        ({"max_length_offset": MAX_LENGTH_OFFSET + 1}, "must be from 0 to 1024"),
        (
            {"min_length": 3, "max_length": 2},
            "DecodeConfig.max_length=2 must be at least max\\(1, min_length=3\\)",
        ),
    ],
)
def test_bad_search_settings_are_refused_naming_the_field(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DecodeConfig(**fields)


def test_sampling_and_mbr_allow_more_hypotheses_than_the_beam() -> None:
    assert DecodeConfig(sampling=True, nbest=8).nbest == 8
    assert DecodeConfig(mbr=16, nbest=6).nbest == 6
