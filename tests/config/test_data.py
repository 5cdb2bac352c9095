import pytest

from transformer.config.data import DataConfig


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"backtranslation_tag": "<BT>"}, "need backtranslated_dir"),
        ({"real_upsample": 3}, "need backtranslated_dir"),
        ({"backtranslated_dir": "bt", "real_upsample": 0}, "real_upsample=0 must be at least 1"),
        ({"backtranslated_dir": "bt", "backtranslation_tag": "<B T>"}, "must be one word without spaces"),
        ({"backtranslated_dir": "bt", "token_store": True}, "cannot be used with token_store"),
    ],
)
def test_backtranslation_data_settings_are_checked(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DataConfig(**fields)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"corpus": "directory"}, "DataConfig.corpus='directory' needs data_dir"),
        ({"max_len": 1}, "DataConfig.max_len=1 must be at least 2"),
        ({"synthetic_valid_pairs": 0}, "DataConfig.synthetic_valid_pairs=0 must be positive"),
    ],
)
def test_bad_data_settings_are_refused_naming_the_field(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DataConfig(**fields)
