"""LCSE's aggregation and correction on hand-computed inputs, its closed forms, calibration, and the
zero correction on captions without an operator or negation."""
import numpy as np
import pytest

from negutils.core.stats import sigmoid
from negutils.methods import closed_form_and, closed_form_not, lcse_correction
from negutils.methods.lcse import fit_calibration, logic_probability, power_mean


def parse(op, *lits):
    return {"operator": op, "concepts": [{"name": n.rstrip("-"), "negated": n.endswith("-")} for n in lits]}


def test_power_means_by_hand():
    x = [np.array(0.2), np.array(0.8)]
    assert power_mean(x, 1) == pytest.approx(0.5)
    assert power_mean(x, -1) == pytest.approx(2 * 0.2 * 0.8 / (0.2 + 0.8))           # harmonic: 0.32
    assert power_mean(x, 10) == pytest.approx(((0.2 ** 10 + 0.8 ** 10) / 2) ** 0.1)   # ~0.746, toward the max
    assert power_mean(x, -1) < power_mean(x, 1) < power_mean(x, 10) < 0.8


def test_correction_signs():
    mu, beta = 0.2, 30
    high, low = np.array(0.3), np.array(0.1)
    assert lcse_correction(parse("SINGLE", "a-"), {"a": high}, mu, beta) < 0     # present: "no A" pushed down
    assert lcse_correction(parse("SINGLE", "a-"), {"a": low}, mu, beta) > 0      # absent: pushed up
    assert lcse_correction(parse("AND", "a", "b"), {"a": high, "b": low}, mu, beta) < 0   # HM < AM
    assert lcse_correction(parse("OR", "a", "b"), {"a": high, "b": low}, mu, beta) > 0    # soft-max > AM
    assert lcse_correction(parse("AND", "a", "b"), {"a": high, "b": high}, mu, beta) == pytest.approx(0, abs=1e-12)


def test_no_operator_and_no_negation_means_exactly_zero():
    sims = {"a": np.linspace(-0.2, 0.5, 7), "b": np.linspace(0.4, 0.0, 7)}
    assert np.array_equal(lcse_correction(parse("SINGLE", "a"), sims, 0.22, 30), np.zeros(7))
    assert np.array_equal(lcse_correction(parse("NONE", "a", "b"), sims, 0.22, 30), np.zeros(7))


def test_closed_forms_match_the_implementation():
    rng = np.random.default_rng(0)
    s_a, s_b = rng.uniform(-0.1, 0.5, 50), rng.uniform(-0.1, 0.5, 50)
    for mu, beta in ((0.22, 30), (0.05, 10), (0.3, 60)):
        assert np.allclose(lcse_correction(parse("SINGLE", "a-"), {"a": s_a}, mu, beta), closed_form_not(s_a, mu, beta))
        assert np.allclose(closed_form_not(s_a, mu, beta), -2 * (s_a - mu))
        assert np.allclose(lcse_correction(parse("AND", "a", "b"), {"a": s_a, "b": s_b}, mu, beta),
                           closed_form_and(s_a, s_b, mu, beta))


def test_nested_parse_aggregates_recursively():
    prob = {"a": np.array(0.9), "b": np.array(0.1), "c": np.array(0.6)}
    tree = {"operator": "OR", "children": [parse("AND", "a", "b"), parse("SINGLE", "c")]}
    inner = power_mean([prob["a"], prob["b"]], -1)
    assert logic_probability(tree, prob) == pytest.approx(float(power_mean([inner, prob["c"]], 10)))
    sims = {k: np.log(v / (1 - v)) / 30 + 0.2 for k, v in prob.items()}       # s such that p = prob at (0.2, 30)
    p_soft = np.mean(list(prob.values()))
    expected = (np.log(logic_probability(tree, prob) / (1 - logic_probability(tree, prob)))
                - np.log(p_soft / (1 - p_soft))) / 30
    assert lcse_correction(tree, sims, 0.2, 30) == pytest.approx(float(expected))
    assert sigmoid(30 * (sims["a"] - 0.2)) == pytest.approx(0.9)


def test_fit_calibration_picks_the_best_grid_point():
    import pandas as pd

    grid = pd.DataFrame({"mu": [0.1, 0.2, 0.3, 0.2], "beta": [30, 30, 30, 60], "All": [0.6, 0.8, 0.7, 0.8]})
    fitted = fit_calibration(grid)
    assert (fitted.mu, fitted.beta) == (0.2, 30) and "0.800" in fitted.source


def test_lcse_equals_holistic_on_affirmative_single_concept_retrieval(tiny_world):
    """Spearman rho with holistic scoring is exactly 1 on captions with no operator and no negation."""
    from scipy.stats import spearmanr

    from negutils.benchmarks import ClipScorer
    from negutils.methods.lcse import Calibration, LcseScorer
    from negutils.models.backbone import load_backbone
    from negutils.world.coco import load_split

    backbone, split = load_backbone("negbook-tiny"), load_split(tiny_world / "val")
    vanilla = ClipScorer(backbone)
    lcse = LcseScorer(vanilla, backbone.encode_text, Calibration(0.22, 30))
    feats = vanilla.image_features(split, np.arange(len(split)))
    queries = [f"A photo of a {c}." for c in split.categories[:6]] + ["a dog chasing a cat"]
    hol, edited = vanilla.score(feats, queries).numpy(), lcse.score(feats, queries).numpy()
    assert np.allclose(hol, edited, atol=1e-6)
    assert all(spearmanr(hol[:, j], edited[:, j])[0] == pytest.approx(1.0) for j in range(len(queries)))
    unparsable = ["", "A kite and a boat or a car."]
    assert np.allclose(lcse.score(feats, unparsable).numpy(), vanilla.score(feats, unparsable).numpy(), atol=1e-6)
    assert lcse.fallbacks == set(unparsable)
    negated = lcse.score(feats, [f"No {split.categories[0]}."]).numpy()
    assert not np.allclose(negated[:, 0], vanilla.score(feats, [f"No {split.categories[0]}."]).numpy()[:, 0])
