"""Per-item outcomes and their bootstrap intervals (chapter 06's unified table)."""
import numpy as np
import pandas as pd
import pytest

from negutils.report import format_unified, leaders, read_items, unified_table
from negutils.report.unified import bootstrap_ci, write_items


def test_a_constant_has_a_zero_width_interval():
    assert bootstrap_ci(np.ones(50)) == (1.0, 1.0, 1.0)


def test_the_interval_holds_the_mean_and_narrows_with_more_items():
    rng = np.random.default_rng(0)
    small = bootstrap_ci(rng.random(40) < 0.6)
    large = bootstrap_ci(rng.random(4000) < 0.6)
    assert small[1] <= small[0] <= small[2] and large[1] <= large[0] <= large[2]
    assert (large[2] - large[1]) < (small[2] - small[1]) / 5     # width shrinks like 1/sqrt(n)
    # a 0/1 array of mean p: the interval is about p +- 1.96 sqrt(p(1-p)/n)
    assert large[2] - large[1] == pytest.approx(2 * 1.96 * np.sqrt(0.24 / 4000), rel=0.15)


def test_the_same_seed_gives_the_same_interval():
    v = np.random.default_rng(1).random(100)
    assert bootstrap_ci(v, seed=3) == bootstrap_ci(v, seed=3)
    assert bootstrap_ci(v, seed=3) != bootstrap_ci(v, seed=4)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="non-empty 1-D"):
        bootstrap_ci([])
    with pytest.raises(ValueError, match="level"):
        bootstrap_ci([1.0, 0.0], level=1.5)


def test_items_round_trip_and_the_first_chapter_wins(tmp_path, monkeypatch):
    from negutils.config import Profile

    monkeypatch.setenv("NEGBOOK_ARTIFACTS", str(tmp_path))
    prof = Profile(name="test")
    write_items({("vanilla", "embedded", "val", "mcq", "accuracy"): np.array([1, 0, 1])}, prof, "03_items")
    write_items({("vanilla", "embedded", "val", "mcq", "accuracy"): np.array([0, 0, 0]),
                 ("KTN", "embedded", "val", "mcq", "accuracy"): np.array([1, 1])}, prof, "04_items")
    items = read_items(prof, ["03_items", "04_items"])
    assert items[("vanilla", "embedded", "val", "mcq", "accuracy")].tolist() == [1, 0, 1]
    assert items[("KTN", "embedded", "val", "mcq", "accuracy")].tolist() == [1, 1]
    with pytest.raises(FileNotFoundError, match="05_items"):
        read_items(prof, ["05_items"])


def test_items_saved_with_the_split_in_the_dataset_are_read_in_the_new_shape(tmp_path, monkeypatch):
    from negutils.config import Profile

    monkeypatch.setenv("NEGBOOK_ARTIFACTS", str(tmp_path))
    prof = Profile(name="test")
    write_items({("vanilla", "embedded/ood", "mcq", "accuracy"): np.array([1, 0])}, prof, "03_items")
    items = read_items(prof, ["03_items"])
    assert list(items) == [("vanilla", "embedded", "ood", "mcq", "accuracy")]
    assert unified_table(items, n_boot=10).set_index("benchmark").loc["MCQ ood", "value"] == 50.0


def _items():
    rng = np.random.default_rng(0)
    return {("vanilla", "w", "val", "mcq", "accuracy"): (rng.random(500) < 0.4).astype(float),
            ("KTN", "w", "val", "mcq", "accuracy"): (rng.random(500) < 0.6).astype(float),
            ("vanilla", "w", "val", "retention", "rho"): np.ones(20),
            ("KTN", "w", "val", "retention", "rho"): np.full(20, 0.9)}


def test_the_unified_table_scales_and_formats():
    long = unified_table(_items(), n_boot=200)
    mcq = long[long.benchmark == "MCQ val"].set_index("method")
    assert mcq.loc["KTN", "value"] == pytest.approx(100 * _items()[("KTN", "w", "val", "mcq", "accuracy")].mean())
    assert (mcq["low"] <= mcq["value"]).all() and (mcq["value"] <= mcq["high"]).all()
    table = format_unified(long)
    assert list(table.index) == ["vanilla", "KTN"] and list(table.columns) == ["MCQ val", "rho"]
    assert table.loc["KTN", "rho"] == "0.900 [0.900, 0.900]"
    with pytest.raises(ValueError, match="no outcomes"):
        unified_table(_items(), methods=["LCSE"])


def test_leaders_say_whether_the_lead_is_settled():
    long = pd.DataFrame([{"method": "a", "benchmark": "x", "value": 60, "low": 58, "high": 62},
                         {"method": "b", "benchmark": "x", "value": 50, "low": 48, "high": 52},
                         {"method": "a", "benchmark": "y", "value": 51, "low": 45, "high": 57},
                         {"method": "b", "benchmark": "y", "value": 50, "low": 44, "high": 56}])
    long = pd.concat([long, pd.DataFrame([
        {"method": "vanilla", "benchmark": "rho", "value": 1.0, "low": 1.0, "high": 1.0},
        {"method": "a", "benchmark": "rho", "value": 0.9, "low": 0.85, "high": 0.95}])])
    out = leaders(long).set_index("benchmark")
    assert out.loc["rho", "best"] == "a"   # vanilla is the reference of rho, not a competitor
    assert out.loc["x", "best"] == "a" and bool(out.loc["x", "settled"])
    assert out.loc["y", "best"] == "a" and not bool(out.loc["y", "settled"])


def test_ties_are_named_and_a_paired_lead_can_settle_what_intervals_cannot():
    rng = np.random.default_rng(0)
    base = rng.random(400)
    items = {("a", "w", "val", "mcq", "accuracy"): base + 0.02, ("b", "w", "val", "mcq", "accuracy"): base,
             ("a copy", "w", "val", "mcq", "accuracy"): base + 0.02}
    long = unified_table(items, n_boot=300)
    unpaired = leaders(long).set_index("benchmark")
    paired = leaders(long, items, n_boot=300).set_index("benchmark")
    assert unpaired.loc["MCQ val", "tied"] == "a copy" and unpaired.loc["MCQ val", "runner-up"] == "b"
    # the separate intervals overlap widely, yet a beats b on every single item
    assert not unpaired.loc["MCQ val", "settled"] and paired.loc["MCQ val", "settled"]
    assert paired.loc["MCQ val", "lead"] == pytest.approx(2.0)
