import warnings

import numpy as np
import pytest

from negutils.core.metrics import ranks_of_targets, recall_at_k
from negutils.models.retrieval import retrieval_recall


def test_recall_on_a_hand_computed_case():
    scores = np.array([[0.9, 0.1, 0.0],    # target 0 ranked 1st
                       [0.8, 0.2, 0.5],    # target 1 ranked 3rd
                       [0.1, 0.7, 0.6]])   # target 2 ranked 2nd
    assert ranks_of_targets(scores, [0, 1, 2]).tolist() == [0, 2, 1]
    assert recall_at_k(scores, [0, 1, 2], ks=(1, 2, 3)) == {"R@1": 1 / 3, "R@2": 2 / 3, "R@3": 1.0}


def test_ties_count_against_the_target():
    # a constant scorer ranks every target last (a favourable count would give it R@1 = 100%)
    assert ranks_of_targets(np.ones((2, 4)), [1, 3]).tolist() == [3, 3]


def test_retrieval_recall_both_directions_and_chance():
    scores = np.eye(4)
    scores[0] = [0.0, 1.0, 0.0, 0.0]  # text 0 prefers image 1; image 1 ties texts 0 and 1
    out = retrieval_recall(scores, ks=(1,))
    assert out["t2i_R@1"] == 0.75
    assert out["i2t_R@1"] == 0.5       # ties count against the target: image 0 ties all four texts at 0,
                                       # image 1 ties two
    assert out["chance_R@1"] == 0.25 and out["gallery"] == 4


def test_bad_shapes_are_rejected():
    with pytest.raises(ValueError, match="scores must be"):
        recall_at_k(np.zeros(3), [0, 1, 2])


def test_auc_on_hand_computed_cases():
    from negutils.core.metrics import roc_auc

    assert roc_auc([1, 1, 0, 0], [0.9, 0.8, 0.1, 0.2]) == 1.0
    assert roc_auc([1, 1, 0, 0], [0.1, 0.2, 0.9, 0.8]) == 0.0
    # one positive (0.5) beats one of two negatives and ties the other: (1 + 0.5) / 2
    assert roc_auc([1, 0, 0], [0.5, 0.5, 0.1]) == 0.75


def test_auc_matches_the_pair_counting_definition_on_random_cases():
    from negutils.core.metrics import roc_auc

    rng = np.random.default_rng(0)
    for _ in range(20):
        y = rng.random(40) < 0.3
        y[:2] = [True, False]
        s = rng.integers(0, 6, size=40).astype(float)  # many ties
        pos, neg = s[y], s[~y]
        expected = (((pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()) /
                    (len(pos) * len(neg)))
        assert abs(roc_auc(y, s) - expected) < 1e-12


def test_auc_needs_both_classes():
    from negutils.core.metrics import roc_auc

    with pytest.raises(ValueError, match="both classes"):
        roc_auc([1, 1], [0.2, 0.3])


def test_average_precision_matches_scikit_learn_on_random_cases():
    from sklearn.metrics import average_precision_score

    from negutils.core.metrics import average_precision

    rng = np.random.default_rng(1)
    for _ in range(50):
        y = rng.random(30) < 0.4
        y[0] = True
        s = rng.integers(0, 8, size=30).astype(float) if rng.random() < 0.5 else rng.random(30)
        assert abs(average_precision(y, s) - average_precision_score(y, s)) < 1e-12


def test_ap_and_macro_map_by_hand():
    from negutils.core.metrics import average_precision, mean_average_precision

    # ranking: pos, neg, pos -> precisions 1 and 2/3 -> AP 5/6
    assert average_precision([1, 0, 1], [0.9, 0.8, 0.7]) == pytest.approx(5 / 6)
    assert mean_average_precision([([1, 0], [1.0, 0.0]), ([0, 1], [1.0, 0.0])]) == pytest.approx(0.75)


def test_recall_with_positive_sets_and_pessimistic_ties():
    from negutils.core.metrics import recall_at_k_sets

    scores = np.array([[0.9, 0.5, 0.1], [0.2, 0.2, 0.9]])
    assert recall_at_k_sets(scores, [[1, 2], [0]], ks=(1, 2)) == {"R@1": 0.0, "R@2": 0.5}
    # query 1's positive ties one negative and is beaten by another: rank 2
    assert recall_at_k_sets(scores, [[0], [1]], ks=(1, 3))["R@3"] == 1.0


def test_pairwise_accuracy_splits_ties():
    from negutils.core.metrics import pairwise_accuracy

    assert pairwise_accuracy([[0.3, 0.1], [0.2, 0.2], [0.1, 0.5]], [0, 0, 1]) == pytest.approx(2.5 / 3)


def test_spearman_against_definition():
    from scipy.stats import spearmanr

    from negutils.core.metrics import spearman_rho

    rng = np.random.default_rng(2)
    a, b = rng.integers(0, 5, 40), rng.random(40)
    assert spearman_rho(a, b) == pytest.approx(spearmanr(a, b).statistic)
    assert spearman_rho([1, 2, 3], [10, 20, 30]) == 1.0


def test_mcq_metrics_by_template_and_wrong_pick_type():
    from negutils.core.metrics import mcq_metrics

    scores = [[0.9, 0.1, 0.1, 0.1],   # right
              [0.1, 0.9, 0.1, 0.1],   # wrong: picked a positive-type option
              [0.1, 0.1, 0.1, 0.9]]   # wrong: picked a negative-type option
    out = mcq_metrics(scores, [0, 0, 0], ["positive", "negative", "negative"],
                      [["correct", "positive", "hybrid", "negative"]] * 3)
    assert out["accuracy"] == pytest.approx(1 / 3)
    assert out["positive_accuracy"] == 1.0 and out["negative_accuracy"] == 0.0
    assert np.isnan(out["hybrid_accuracy"])
    assert out["wrong_pick_positive"] == 0.5 and out["wrong_pick_negative"] == 0.5 and out["wrong_pick_hybrid"] == 0.0


def test_row_wise_spearman_equals_the_one_row_function_and_scipy_with_ties_nan_and_constant_rows():
    from scipy.stats import spearmanr

    from negutils.core.metrics import spearman_rho, spearman_rho_rows

    rng = np.random.default_rng(0)
    a = rng.integers(0, 6, size=(300, 40)).astype(float)     # many ties per row
    b = rng.normal(size=(300, 40))
    b[::7] = np.round(b[::7], 1)
    a[5, 3] = np.nan        # ranked last, as spearman_rho always has (scipy says NaN; issue 20's to refuse)
    a[9] = 2.0                                               # a constant row has no correlation
    rows = spearman_rho_rows(a, b, chunk=64)                 # several blocks
    one_by_one = np.array([spearman_rho(x, y) for x, y in zip(a, b)])
    assert np.isnan(rows[9]) and np.isnan(one_by_one[9])
    assert np.allclose(rows, one_by_one, atol=1e-12, rtol=0, equal_nan=True)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")                      # scipy warns on the constant row
        independent = np.array([spearmanr(x, y).statistic for x, y in zip(a, b)])
    finite = ~np.isnan(a).any(axis=1)
    assert np.allclose(rows[finite], independent[finite], atol=1e-12, rtol=0, equal_nan=True)
    with pytest.raises(ValueError, match=r"\[Q, N\]"):
        spearman_rho_rows(a[:, :1], b[:, :1])
