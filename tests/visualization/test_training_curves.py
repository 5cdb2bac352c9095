import json
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from transformer.visualization import training_curves
from transformer.visualization.attention_plot import save_figure_atomically
from transformer.visualization.training_curves import plot_training_curves, read_training_curves


def write_metrics(path: Path, records: list[dict | str]) -> Path:
    lines = [record if isinstance(record, str) else json.dumps(record) for record in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def sample_records() -> list[dict | str]:
    records: list[dict | str] = [{"kind": "config", "d_model": 32, "step": 0}]  # neither train nor valid
    for step in range(10, 210, 10):
        learning_rate = 32**-0.5 * min(step**-0.5, step * 50**-1.5)
        train = {"step": step, "train_loss": 6.0 - step / 50, "learning_rate": learning_rate}
        records.append({**train, "tokens_per_second": 1234.5, "epoch": 1})
        if step % 50 == 0:
            records.append(
                {"kind": "valid", "step": step, "valid_loss": 6.2 - step / 60, "valid_perplexity": 9.9}
            )
    records.insert(5, "")  # blank lines are skipped
    return records


def test_read_training_curves_keeps_file_order_and_ignores_other_records_and_keys(tmp_path: Path) -> None:
    records = sample_records() + [{"kind": "train", "step": 300, "train_loss": 1.5, "note": "kind given"}]
    curves = read_training_curves(write_metrics(tmp_path / "metrics.jsonl", records))
    assert len(curves.train_loss) == 21 and len(curves.learning_rate) == 20
    assert curves.train_loss[0] == (10, 5.8) and curves.train_loss[-1] == (300, 1.5)
    assert [step for step, _ in curves.valid_loss] == [50, 100, 150, 200]
    assert curves.valid_loss[-1] == (200, pytest.approx(6.2 - 200 / 60))


def test_plot_training_curves_draws_both_panels(tmp_path: Path, png) -> None:
    metrics = write_metrics(tmp_path / "metrics.jsonl", sample_records())
    path = plot_training_curves(metrics, tmp_path / "plots" / "curves.png")
    assert path == tmp_path / "plots" / "curves.png"
    image = png.load(path)
    for colour in ("tab:blue", "tab:orange", "tab:green"):  # train loss, validation loss, learning rate
        assert png.count_near(image, colour, tolerance=0.05) > 200, colour
    assert sorted(item.name for item in path.parent.iterdir()) == ["curves.png"]


@pytest.fixture
def drawn_figures(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    """The figures plot_training_curves saves, kept for inspection (they are still written)."""
    figures: list[Figure] = []

    def keep_and_save(figure: Figure, path: Path) -> Path:
        figures.append(figure)
        return save_figure_atomically(figure, path)

    monkeypatch.setattr(training_curves, "save_figure_atomically", keep_and_save)
    return figures


def test_plotted_lines_hold_the_logged_values(tmp_path: Path, drawn_figures: list[Figure]) -> None:
    metrics = write_metrics(tmp_path / "metrics.jsonl", sample_records())
    plot_training_curves(metrics, tmp_path / "curves.png")
    (figure,) = drawn_figures
    loss_axes, rate_axes = figure.axes
    train_line, valid_line = loss_axes.get_lines()
    steps = list(range(10, 210, 10))
    assert list(train_line.get_xdata()) == steps
    assert list(train_line.get_ydata()) == pytest.approx([6.0 - step / 50 for step in steps])
    assert list(valid_line.get_xdata()) == [50, 100, 150, 200]
    assert list(valid_line.get_ydata()) == pytest.approx([6.2 - step / 60 for step in (50, 100, 150, 200)])
    # Validation losses fall, so the best is the last one.
    assert train_line.get_label() == "train loss"
    assert valid_line.get_label() == f"validation loss (best {6.2 - 200 / 60:.3f} at step 200)"
    legend = loss_axes.get_legend()
    assert [text.get_text() for text in legend.get_texts()] == [
        train_line.get_label(),
        valid_line.get_label(),
    ]
    (rate_line,) = rate_axes.get_lines()
    assert list(rate_line.get_xdata()) == steps
    expected_rates = [32**-0.5 * min(step**-0.5, step * 50**-1.5) for step in steps]
    assert list(rate_line.get_ydata()) == pytest.approx(expected_rates)
    assert (loss_axes.get_ylabel(), rate_axes.get_ylabel()) == ("loss (nats per token)", "learning rate")
    assert rate_axes.get_xlabel() == "step"
    assert (loss_axes.get_title(), rate_axes.get_title()) == ("Loss", "Learning rate")
    assert figure.get_suptitle() == "Training curves: metrics.jsonl"


def test_validation_only_log_still_plots(tmp_path: Path, png, drawn_figures: list[Figure]) -> None:
    # A NaN first would win a plain min(); the legend must name the best finite loss.
    records: list[dict | str] = ['{"step": 3, "valid_loss": NaN}']
    records += [
        {"step": 5, "valid_loss": 3.0},
        {"step": 9, "valid_loss": 2.5},
        {"step": 12, "valid_loss": 2.75},
    ]
    metrics = write_metrics(tmp_path / "m.jsonl", records)
    image = png.load(plot_training_curves(metrics, tmp_path / "curves.png"))
    (figure,) = drawn_figures
    loss_axes, rate_axes = figure.axes
    (valid_line,) = loss_axes.get_lines()
    assert list(valid_line.get_xdata()) == [3, 5, 9, 12]
    assert list(valid_line.get_ydata())[1:] == [3.0, 2.5, 2.75]
    assert valid_line.get_label() == "validation loss (best 2.500 at step 9)"
    assert rate_axes.get_lines() == []
    assert [text.get_text() for text in rate_axes.texts] == ["no learning rate logged"]
    assert png.count_near(image, "tab:orange", tolerance=0.05) > 200
    for colour in ("tab:blue", "tab:green"):  # no training loss, no learning rate
        assert png.count_near(image, colour, tolerance=0.05) == 0, colour


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ('{"step": 30, "train_loss": ', r"line 3: not valid JSON"),
        ("[1, 2]", r"line 3: expected a JSON object, got list"),
        ('{"train_loss": 2.0}', r"line 3: train record has no 'step'"),
        ('{"step": 30, "valid_loss": "low"}', r"line 3: 'valid_loss' must be a number, got 'low'"),
        ('{"step": 30, "train_loss": true}', r"line 3: 'train_loss' must be a number, got True"),
    ],
)
def test_malformed_line_names_file_and_line(tmp_path: Path, bad_line: str, message: str) -> None:
    metrics = write_metrics(tmp_path / "metrics.jsonl", [{"step": 10, "train_loss": 3.0}, "", bad_line])
    with pytest.raises(ValueError, match=rf"metrics\.jsonl, {message}"):
        plot_training_curves(metrics, tmp_path / "curves.png")
    assert not (tmp_path / "curves.png").exists()


def test_missing_or_empty_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"metrics file .*absent\.jsonl does not exist"):
        plot_training_curves(tmp_path / "absent.jsonl", tmp_path / "curves.png")
    empty = write_metrics(tmp_path / "empty.jsonl", [{"kind": "config", "d_model": 8}])
    with pytest.raises(ValueError, match=r"empty\.jsonl holds no training or validation records"):
        plot_training_curves(empty, tmp_path / "curves.png")
