"""The paper's named models as plain values: base, big and every Table 2 variant.

Each variant lists only what it changes from the base model, with the numbers the paper reports for it
(newstest2013 perplexity per word-piece, BLEU and parameters in millions, EN-DE, shared ~37k vocabulary).
``TransformerConfig.base``, ``.big`` and ``.table2`` turn these values into configs.
"""

from dataclasses import dataclass, field
from typing import Any

#: Values of the base model (Table 3 / Table 2 first row) that differ from nothing: the reference point.
BASE_SETTINGS: dict[str, Any] = {
    "d_model": 512,
    "d_ff": 2048,
    "num_heads": 8,
    "num_encoder_layers": 6,
    "num_decoder_layers": 6,
    "dropout": 0.1,
}

#: Table 2, last row: the big model (EN-DE; the paper used dropout 0.1 for EN-FR big).
BIG_SETTINGS: dict[str, Any] = {
    **BASE_SETTINGS,
    "d_model": 1024,
    "d_ff": 4096,
    "num_heads": 16,
    "dropout": 0.3,
}


@dataclass(frozen=True)
class Table2Variant:
    """One row of Table 2: a change to the base model and what the paper measured for it.

    Parameters
    ----------
    name : str
        Row letter and index, e.g. ``"C4"`` (rows are numbered top to bottom within each letter).
    model_settings : dict of str to Any
        ``TransformerConfig`` fields that differ from the base model.
    label_smoothing : float
        Label smoothing epsilon used for training (0.1 unless the row varies it).
    reported_perplexity : float
        Development perplexity reported in the paper.
    reported_bleu : float
        Development BLEU reported in the paper.
    reported_params_millions : float or None
        Parameter count reported in the paper, when given.

    Notes
    -----
    Label smoothing is a training setting, not a model one; rows (D) that vary it keep the base model.
    """

    name: str
    model_settings: dict[str, Any] = field(default_factory=dict)
    label_smoothing: float = 0.1
    reported_perplexity: float = 0.0
    reported_bleu: float = 0.0
    reported_params_millions: float | None = None

    @property
    def row(self) -> str:
        """The row letter, e.g. ``"C"``.

        Returns
        -------
        str
            The first character of ``name``, upper case as stored.

        Notes
        -----
        Table 2 groups its experiments by letter, each varying one aspect of the base model (A heads, B key
        size, C size, D regularisation, E positional encoding); :func:`find_table2_variant` selects within
        a row by the settings that row varies.
        """
        return self.name[0]


TABLE2_VARIANTS: tuple[Table2Variant, ...] = (
    Table2Variant("A1", {"num_heads": 1, "d_k": 512, "d_v": 512}, 0.1, 5.29, 24.9),
    Table2Variant("A2", {"num_heads": 4, "d_k": 128, "d_v": 128}, 0.1, 5.00, 25.5),
    Table2Variant("A3", {"num_heads": 16, "d_k": 32, "d_v": 32}, 0.1, 4.91, 25.8),
    Table2Variant("A4", {"num_heads": 32, "d_k": 16, "d_v": 16}, 0.1, 5.01, 25.4),
    Table2Variant("B1", {"d_k": 16}, 0.1, 5.16, 25.1, 58),
    Table2Variant("B2", {"d_k": 32}, 0.1, 5.01, 25.4, 60),
    Table2Variant("C1", {"num_encoder_layers": 2, "num_decoder_layers": 2}, 0.1, 6.11, 23.7, 36),
    Table2Variant("C2", {"num_encoder_layers": 4, "num_decoder_layers": 4}, 0.1, 5.19, 25.3, 50),
    Table2Variant("C3", {"num_encoder_layers": 8, "num_decoder_layers": 8}, 0.1, 4.88, 25.5, 80),
    Table2Variant("C4", {"d_model": 256, "d_k": 32, "d_v": 32}, 0.1, 5.75, 24.5, 28),
    Table2Variant("C5", {"d_model": 1024, "d_k": 128, "d_v": 128}, 0.1, 4.66, 26.0, 168),
    Table2Variant("C6", {"d_ff": 1024}, 0.1, 5.12, 25.4, 53),
    Table2Variant("C7", {"d_ff": 4096}, 0.1, 4.75, 26.2, 90),
    Table2Variant("D1", {"dropout": 0.0}, 0.1, 5.77, 24.6),
    Table2Variant("D2", {"dropout": 0.2}, 0.1, 4.95, 25.5),
    Table2Variant("D3", {}, 0.0, 4.67, 25.3),
    Table2Variant("D4", {}, 0.2, 5.47, 25.7),
    Table2Variant("E1", {"positional_encoding": "learned"}, 0.1, 4.92, 25.7),
)


def find_table2_variant(row: str, selectors: dict[str, Any]) -> Table2Variant:
    """Find the Table 2 variant named by a row and the settings that distinguish it.

    Parameters
    ----------
    row : str
        A variant name such as ``"C4"``, or a row letter ``"A"`` .. ``"E"`` together with ``selectors``.
    selectors : dict of str to Any
        Settings that pick one variant of the row, e.g. ``{"d_model": 256}`` or ``{"label_smoothing": 0.2}``.
        Ignored when ``row`` is a full variant name.

    Returns
    -------
    Table2Variant
        The unique matching variant.

    Raises
    ------
    ValueError
        Naming the valid choices when the row is unknown or the selectors match no variant or several.

    Notes
    -----
    A variant name such as "C4" is found directly; a row letter needs selectors that match exactly one of its
    variants.
    """
    by_name = {variant.name: variant for variant in TABLE2_VARIANTS}
    if row.upper() in by_name:
        return by_name[row.upper()]
    candidates = [variant for variant in TABLE2_VARIANTS if variant.row == row.upper()]
    if not candidates:
        raise ValueError(f"Table 2 has no row {row!r}; choose one of A, B, C, D, E or a name like 'C4'")
    matches = [variant for variant in candidates if _matches(variant, selectors)]
    if len(matches) != 1:
        choices = "; ".join(f"{v.name}: {_describe(v)}" for v in candidates)
        raise ValueError(
            f"settings {selectors} select {len(matches)} variants of Table 2 row {row}: {choices}"
        )
    return matches[0]


def varied_settings(row: str) -> set[str]:
    """Name the settings that Table 2 varies within a row.

    Parameters
    ----------
    row : str
        A row letter, e.g. ``"A"``.

    Returns
    -------
    set of str
        Setting names; includes ``"label_smoothing"`` for row D.

    Notes
    -----
    Used to tell selectors from plain overrides in ``TransformerConfig.table2``: ``table2("C", d_model=256)``
    picks variant C4 rather than overriding the base model's width. Label smoothing counts as varied only
    where a variant departs from the default 0.1.
    """
    names: set[str] = set()
    for variant in TABLE2_VARIANTS:
        if variant.row == row.upper():
            names.update(variant.model_settings)
            if variant.label_smoothing != 0.1:
                names.add("label_smoothing")
    return names


def _matches(variant: Table2Variant, selectors: dict[str, Any]) -> bool:
    for key, wanted in selectors.items():
        actual = variant.label_smoothing if key == "label_smoothing" else variant.model_settings.get(key)
        if actual is None and key != "label_smoothing":
            actual = BASE_SETTINGS.get(key)
        if actual != wanted:
            return False
    return True


def _describe(variant: Table2Variant) -> str:
    settings = dict(variant.model_settings)
    if variant.label_smoothing != 0.1:
        settings["label_smoothing"] = variant.label_smoothing
    return ", ".join(f"{key}={value}" for key, value in settings.items()) or "base"
