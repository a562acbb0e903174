"""The one sigmoid and the one bootstrap that every stage shares, and their callers agreeing with them."""
import numpy as np
import pytest

from negutils.core import stats
from negutils.core.stats import bootstrap_interval, sigmoid
from negutils.diagnosis.collapse import bootstrap_layer_means
from negutils.report.unified import bootstrap_ci


def test_sigmoid_by_hand():
    assert sigmoid(0.0) == 0.5
    x = np.array([-3.0, -0.5, 0.0, 2.0])
    assert np.array_equal(sigmoid(x), 1.0 / (1.0 + np.exp(-x)))
    assert np.allclose(sigmoid(x) + sigmoid(-x), 1.0)


def test_constant_values_give_a_zero_width_interval():
    assert bootstrap_interval(np.full(30, 0.25), n_boot=50) == (0.25, 0.25, 0.25)
    mean, low, high = bootstrap_interval(np.array([[0.3] * 10, [-1.0] * 10]), n_boot=50)
    assert np.array_equal(low, mean) and np.array_equal(high, mean) and np.allclose(mean, [0.3, -1.0])


def test_resamples_as_a_loop_written_out_would():
    v = np.random.default_rng(2).normal(size=(3, 17))
    rng = np.random.default_rng(5)
    draws = np.stack([v[:, rng.integers(0, 17, 17)].mean(axis=1) for _ in range(64)])
    mean, low, high = bootstrap_interval(v, n_boot=64, level=0.9, seed=5)
    assert np.array_equal(mean, v.mean(axis=1))
    tail = (1 - 0.9) / 2                                       # 0.04999..., not 0.05
    assert np.array_equal(low, np.quantile(draws, tail, axis=0))
    assert np.array_equal(high, np.quantile(draws, 1 - tail, axis=0))


def test_draws_do_not_depend_on_the_batch(monkeypatch):
    v = np.random.default_rng(3).random(41)
    whole = bootstrap_interval(v, n_boot=30, seed=1)
    monkeypatch.setattr(stats, "_BATCH_VALUES", 100)          # 2 resamples per batch
    assert bootstrap_interval(v, n_boot=30, seed=1) == whole


def test_both_callers_agree_with_the_shared_bootstrap():
    values = np.random.default_rng(4).normal(size=(5, 60))
    for row in values:
        assert bootstrap_ci(row, n_boot=200, seed=9) == tuple(float(x) for x in bootstrap_interval(row, 200, seed=9))
    curve = bootstrap_layer_means(values, n_boot=200, seed=9)
    mean, low, high = bootstrap_interval(values, 200, seed=9)
    assert np.array_equal(curve["mean"], mean) and np.array_equal(curve["lo"], low)
    assert np.array_equal(curve["hi"], high)
    # one joint resample of the items: each layer's interval is that layer's own bootstrap (up to
    # the last bit, which np.quantile along an axis and on one row may round differently)
    own = [bootstrap_ci(row, n_boot=200, seed=9) for row in values]
    assert np.allclose(curve[["mean", "lo", "hi"]].to_numpy(), own, rtol=1e-14, atol=0)


def test_rejects_no_items_and_a_level_outside_zero_one():
    with pytest.raises(ValueError, match="at least one item"):
        bootstrap_interval(np.empty((2, 0)))
    with pytest.raises(ValueError, match="level"):
        bootstrap_interval([1.0, 2.0], level=1.0)
