import numpy as np
import pytest

from negutils.metrics import ranks_of_targets, recall_at_k
from negutils.retrieval import retrieval_recall


def test_recall_on_a_hand_computed_case():
    scores = np.array([[0.9, 0.1, 0.0],    # target 0 ranked 1st
                       [0.8, 0.2, 0.5],    # target 1 ranked 3rd
                       [0.1, 0.7, 0.6]])   # target 2 ranked 2nd
    assert ranks_of_targets(scores, [0, 1, 2]).tolist() == [0, 2, 1]
    assert recall_at_k(scores, [0, 1, 2], ks=(1, 2, 3)) == {"R@1": 1 / 3, "R@2": 2 / 3, "R@3": 1.0}


def test_ties_count_in_the_targets_favour():
    assert ranks_of_targets(np.ones((2, 4)), [1, 3]).tolist() == [0, 0]


def test_retrieval_recall_both_directions_and_chance():
    scores = np.eye(4)
    scores[0] = [0.0, 1.0, 0.0, 0.0]  # text 0 prefers image 1; image 1 ties texts 0 and 1
    out = retrieval_recall(scores, ks=(1,))
    assert out["t2i_R@1"] == 0.75
    assert out["i2t_R@1"] == 1.0
    assert out["chance_R@1"] == 0.25 and out["gallery"] == 4


def test_bad_shapes_are_rejected():
    with pytest.raises(ValueError, match="scores must be"):
        recall_at_k(np.zeros(3), [0, 1, 2])


def test_auc_on_hand_computed_cases():
    from negutils.metrics import roc_auc

    assert roc_auc([1, 1, 0, 0], [0.9, 0.8, 0.1, 0.2]) == 1.0
    assert roc_auc([1, 1, 0, 0], [0.1, 0.2, 0.9, 0.8]) == 0.0
    # one positive (0.5) beats one of two negatives and ties the other: (1 + 0.5) / 2
    assert roc_auc([1, 0, 0], [0.5, 0.5, 0.1]) == 0.75


def test_auc_matches_the_pair_counting_definition_on_random_cases():
    from negutils.metrics import roc_auc

    rng = np.random.default_rng(0)
    for _ in range(20):
        y = rng.random(40) < 0.3
        y[:2] = [True, False]
        s = rng.integers(0, 6, size=40).astype(float)  # many ties
        pos, neg = s[y], s[~y]
        expected = ((pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()) / (len(pos) * len(neg))
        assert abs(roc_auc(y, s) - expected) < 1e-12


def test_auc_needs_both_classes():
    from negutils.metrics import roc_auc

    with pytest.raises(ValueError, match="both classes"):
        roc_auc([1, 1], [0.2, 0.3])
