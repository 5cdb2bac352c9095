import pytest

from transformer import Transformer, TransformerConfig
from transformer.model.presets import TABLE2_VARIANTS, find_table2_variant


def test_base_and_big_parameter_counts() -> None:
    # The paper reports 65M and 213M; the difference is the paper's exact vocabulary size.
    assert Transformer(TransformerConfig.base(vocab_size=37000)).num_parameters() == 63_082_496
    assert Transformer(TransformerConfig.big(vocab_size=37000)).num_parameters() == 214_245_376


@pytest.mark.parametrize("variant", [v for v in TABLE2_VARIANTS if v.reported_params_millions], ids=str)
def test_table2_parameter_counts_are_close_to_the_paper(variant) -> None:
    count = Transformer(TransformerConfig.table2(variant.name)).num_parameters() / 1e6
    assert variant.reported_params_millions - 5 <= count <= variant.reported_params_millions


def test_table2_selection_by_row_and_setting() -> None:
    config = TransformerConfig.table2("C", d_model=256)
    assert (config.d_model, config.d_k, config.d_v, config.num_heads) == (256, 32, 32, 8)
    assert TransformerConfig.table2("A", num_heads=1).head_dims == (512, 512)
    assert TransformerConfig.table2("E").positional_encoding == "learned"
    assert TransformerConfig.table2("C2").num_encoder_layers == 4
    assert TransformerConfig.table2("D", dropout=0.0).dropout == 0.0
    assert find_table2_variant("D", {"label_smoothing": 0.2}).name == "D4"
    # Settings the row does not vary are plain overrides.
    assert TransformerConfig.table2("C", d_model=256, vocab_size=1000, dropout=0.3).dropout == 0.3


def test_table2_full_name_refuses_a_contradicting_setting() -> None:
    # Before, the d_model given was dropped silently and C4's 256 built.
    with pytest.raises(ValueError, match=r"variant C4 sets .*'d_model': 512\} contradicts it"):
        TransformerConfig.table2("C4", d_model=512)
    assert TransformerConfig.table2("C4", d_model=256).d_model == 256  # repeating the variant's value is fine


def test_table2_ambiguous_or_unknown_selection_fails() -> None:
    with pytest.raises(ValueError, match="select 0 variants"):
        TransformerConfig.table2("C", d_model=300)
    with pytest.raises(ValueError, match="select 7 variants"):
        TransformerConfig.table2("C")
    with pytest.raises(ValueError, match="no row"):
        TransformerConfig.table2("Z")


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"vocab_size": 100, "d_model": 100, "num_heads": 8}, "not divisible"),
        ({"vocab_size": 0}, "vocab_size=0 must be positive"),
        ({"vocab_size": 100, "d_ff": -1}, "d_ff=-1"),
        ({"vocab_size": 100, "positional_encoding": "rotary"}, "positional_encoding"),
        ({"vocab_size": 100, "dropout": 1.5}, "dropout"),
        ({"vocab_size": 100, "target_vocab_size": 50}, "share_embeddings"),
        ({"vocab_size": 100, "pad_id": 1}, "pad_id and bos_id must differ"),
        ({"vocab_size": 100, "eos_id": 3}, "eos_id and unk_id must differ"),
        ({"vocab_size": 100, "decoder_start_id": 100}, "decoder_start_id=100 is outside"),
        ({"vocab_size": 100, "sinusoidal_layout": "blocked"}, "sinusoidal_layout"),
        ({"vocab_size": 3}, "outside the vocabulary"),
        ({"vocab_size": 100, "attention_window": 0}, "attention_window"),
        ({"vocab_size": 100, "colour": "red"}, "unknown option"),
    ],
)
def test_invalid_configs_fail_at_construction(values, message) -> None:
    with pytest.raises(ValueError, match=message):
        TransformerConfig.from_dict(values)


def test_wrong_types_fail_with_field_name() -> None:
    with pytest.raises(TypeError, match="d_model"):
        TransformerConfig.from_dict({"vocab_size": 100, "d_model": "512"})
    with pytest.raises(TypeError, match="num_heads"):
        TransformerConfig.from_dict({"vocab_size": 100, "num_heads": True})


def test_non_divisible_width_allowed_with_explicit_head_dims() -> None:
    config = TransformerConfig(vocab_size=100, d_model=100, num_heads=8, d_k=16, d_v=16)
    assert config.head_dims == (16, 16)


def test_dict_round_trip() -> None:
    config = TransformerConfig.big(vocab_size=1234, norm_first=True)
    assert TransformerConfig.from_dict(config.to_dict()) == config


def test_marian_style_special_ids_are_allowed() -> None:
    config = TransformerConfig(vocab_size=100, pad_id=99, bos_id=0, eos_id=0, unk_id=1, decoder_start_id=99)
    assert config.start_id == 99
    assert TransformerConfig(vocab_size=100).start_id == 1
