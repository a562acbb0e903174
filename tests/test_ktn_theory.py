"""KTN's theory checks (Lemma 1, Corollary 1, score separation, top-k, the pool-weight sweep) on a
hand-built world where the linear concept model holds exactly.

Concepts are orthonormal axes; an image's embedding is the (unnormalised) sum of its concepts with
given strengths, and a caption's embedding a fixed mix of axes. Then alpha_c(i) and beta_c(q) are
the coordinates, and every quantity below has a value computable by hand.
"""
import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from negutils.diagnosis import (ConceptBank, lemma1_check, lemma1_summary, pick_showcase_gallery, pool_weight_sweep,
                                score_separation, top_k_scores)
from negutils.report import ktn_verdicts
from negutils.report.verdicts import NOT_REPRODUCED, REPRODUCED
from negutils.world.coco import CocoSplit

CATEGORIES = ["dog", "cat", "bird"]
DOG, CAT, BIRD = (torch.eye(3)[k] for k in range(3))
# gallery images 0-3; 4 and 5 satisfy "a dog, no cat" outside the gallery; 6 and 7 do not
FEATURES = torch.stack([DOG + 0.5 * BIRD,       # 0 correct
                        0.9 * DOG,              # 1 correct
                        DOG + CAT,              # 2 confusing
                        0.9 * DOG + 0.6 * CAT,  # 3 confusing: mean dog 0.95 on both sides, mean cat 0.8 vs 0
                        DOG,                    # 4
                        DOG + BIRD,             # 5
                        CAT,                    # 6
                        DOG + CAT])             # 7
OBJECTS = [{"dog", "bird"}, {"dog"}, {"dog", "cat"}, {"dog", "cat"}, {"dog"}, {"dog", "bird"}, {"cat"},
           {"dog", "cat"}]
BLIND = "A dog is present but no cat."          # encoded as if the negation were an affirmation
REJECTING = "There is a dog but no cat."         # encoded with a negative coefficient on cat
TEXT = {BLIND: DOG + 0.5 * CAT, REJECTING: DOG - 0.5 * CAT, "A dog.": DOG}
NORM = math.sqrt(1.25)                           # |DOG +- 0.5 CAT|


def encode(captions):
    """Captions of TEXT by the table; anything else (the concept templates) is the axis it names."""
    out = []
    for c in captions:
        if c in TEXT:
            out.append(TEXT[c])
        else:
            named = [k for k, name in enumerate(CATEGORIES) if name in c.split()]
            assert len(named) == 1, c
            out.append(torch.eye(3)[named[0]])
    return torch.stack(out)


class FixedImages:
    """A scorer over FEATURES: cosine-free dot product with the normalised caption embedding."""

    def __init__(self, name="vanilla", text=None):
        self.name, self.text = name, text or {}

    def image_features(self, split, indices):
        return FEATURES[np.asarray(indices, dtype=int)]

    def score(self, image_features, captions):
        return image_features @ F.normalize(torch.stack([self.text.get(c, encode([c])[0]) for c in captions]), dim=-1).T


@pytest.fixture(scope="module")
def split():
    n = len(FEATURES)
    return CocoSplit(name="val", image_root=Path("."), image_ids=[100 + i for i in range(n)],
                     file_names=[f"{i}.png" for i in range(n)], objects=[frozenset(o) for o in OBJECTS],
                     captions=[[] for _ in range(n)], categories=CATEGORIES)


def gallery(query, correct=(100, 101), confusing=(102, 103)):
    return {"kind": "2C", "query": query, "positives": json.dumps(["dog"]), "negative": "cat",
            "correct_ids": json.dumps(list(correct)), "confusing_ids": json.dumps(list(confusing)),
            "n_correct": len(correct), "n_confusing": len(confusing)}


@pytest.fixture(scope="module")
def galleries():
    return pd.DataFrame([gallery(BLIND), gallery(REJECTING)])


def test_lemma1_prediction_equals_the_measured_gap_under_the_linear_model(split, galleries):
    check = lemma1_check(galleries, split, FixedImages(), encode, ConceptBank(encode)).set_index("query")
    beta = 0.5 / NORM
    assert check.loc[BLIND, "beta_c-(q)"] == pytest.approx(beta)
    assert check.loc[REJECTING, "beta_c-(q)"] == pytest.approx(-beta)
    # correct minus confusing: dog cancels (0.95 on both sides), cat differs by 0.8: gap = -0.8 beta
    assert check.loc[BLIND, "measured gap"] == pytest.approx(-0.8 * beta)
    assert check.loc[REJECTING, "measured gap"] == pytest.approx(0.8 * beta)
    assert np.allclose(check["predicted gap"], check["measured gap"], atol=1e-6)
    # blind query: scores 1.342 (2), 1.073 (3), 0.894 (0), 0.805 (1) -> positives at ranks 3 and 4
    assert check.loc[BLIND, "vanilla AP"] == pytest.approx((1 / 3 + 2 / 4) / 2)
    assert check.loc[REJECTING, "vanilla AP"] == pytest.approx(1.0)


def test_corollary1_the_in_kind_optimum_has_no_weight_on_the_negated_concept(split, galleries):
    check = lemma1_check(galleries, split, FixedImages(), encode, ConceptBank(encode))
    # satisfying images outside the gallery: 4 and 5; mu = dog + 0.5 bird
    assert (check["satisfying images"] == 2).all()
    assert np.allclose(check["beta*_c- (optimum)"], 0.0, atol=1e-7)
    assert np.allclose(check["beta*_c+ (optimum)"], 1 / NORM)
    # the optimum scores 1.118 (0, correct), 0.894 (2), then 0.805 for 1 (correct) and 3 (confusing) tied:
    # AP = 0.5 * 1 + 0.5 * 2/4
    assert np.allclose(check["optimum AP"], 0.75)


def test_a_gallery_without_satisfying_images_outside_it_has_no_optimum(split):
    wide = pd.DataFrame([gallery(BLIND, correct=(100, 101, 104, 105))])
    check = lemma1_check(wide, split, FixedImages(), encode, ConceptBank(encode))
    assert check["satisfying images"].tolist() == [0]
    assert "optimum AP" not in check or check["optimum AP"].isna().all()


def test_lemma1_summary(split, galleries):
    summary = lemma1_summary(lemma1_check(galleries, split, FixedImages(), encode, ConceptBank(encode)))
    assert summary["galleries"] == 2
    assert summary["share beta_c- > 0"] == 0.5
    assert summary["share measured gap < 0 (confusing above correct)"] == 0.5
    assert summary["corr(measured, predicted)"] == pytest.approx(1.0)
    assert summary["sign agreement"] == 1.0
    assert summary["median beta*_c- (optimum)"] == pytest.approx(0.0, abs=1e-7)
    assert summary["share beta*_c- < 0"] == 0.0
    assert summary["mean optimum AP"] == pytest.approx(0.75)
    assert summary["mean vanilla AP"] == pytest.approx(((1 / 3 + 2 / 4) / 2 + 1.0) / 2)


def test_lemma1_summary_on_disagreeing_signs():
    check = pd.DataFrame({"beta_c-(q)": [0.2, 0.3, -0.1, 0.4], "measured gap": [-0.1, 0.2, -0.05, -0.3],
                          "predicted gap": [-0.2, -0.1, 0.05, -0.4], "beta*_c- (optimum)": [0.01, -0.02, 0.0, 0.05],
                          "optimum AP": [0.5, 0.7, 0.9, np.nan], "vanilla AP": [0.4, 0.6, 0.8, 1.0]})
    summary = lemma1_summary(check)
    assert summary["sign agreement"] == 0.5 and summary["share beta_c- > 0"] == 0.75
    assert summary["share measured gap < 0 (confusing above correct)"] == 0.75
    assert summary["corr(measured, predicted)"] == pytest.approx(np.corrcoef([-0.1, 0.2, -0.05, -0.3],
                                                                              [-0.2, -0.1, 0.05, -0.4])[0, 1])
    assert summary["median beta*_c- (optimum)"] == pytest.approx(0.005)
    assert summary["share beta*_c- < 0"] == 0.25
    assert summary["mean optimum AP"] == pytest.approx(0.7) and summary["mean vanilla AP"] == pytest.approx(0.7)


def test_the_theory_feeds_chapter_04s_verdicts(split, galleries):
    """lemma1_summary's keys are what ktn_verdicts reads: on this world Lemma 1 and Corollary 1 hold
    exactly, and half the galleries have beta_c- > 0."""
    from negutils.benchmarks import results_frame
    from negutils.benchmarks.evaluate import result_row

    lemma = lemma1_summary(lemma1_check(galleries, split, FixedImages(), encode, ConceptBank(encode)))
    rows = [result_row("embedded", s, "toy", "test", t, {"method": m, metric: 0.5})
            for m in ("vanilla", "EC", "KTN", "KTN (projection only)")
            for t, metric, splits in (("confusion_2c", "mAP", ("val",)), ("confusion_3c", "mAP", ("val",)),
                                      ("mcq", "accuracy", ("val", "ood")), ("retrieval", "R@5", ("val",)),
                                      ("retrieval_negated", "R@5", ("val",))) for s in splits]
    verdicts = ktn_verdicts(results_frame(rows), lemma).set_index("claim")["verdict"]
    assert verdicts[verdicts.index.str.startswith("Lemma 1")].tolist() == [REPRODUCED]
    assert verdicts[verdicts.index.str.startswith("Corollary 1")].tolist() == [REPRODUCED]
    assert verdicts[verdicts.index.str.startswith("Vanilla text coefficients")].tolist() == [NOT_REPRODUCED]


@pytest.fixture(scope="module")
def scorers():
    return {"vanilla": FixedImages("vanilla"), "rejecting": FixedImages("rejecting", {BLIND: TEXT[REJECTING]})}


def test_score_separation_means_gaps_and_ap(split, scorers):
    frame = score_separation(scorers, pd.DataFrame([gallery(BLIND)]), split).set_index("method")
    assert list(frame.index) == ["vanilla", "rejecting"]
    # correct: (0.894 + 0.805) / 2 = 0.95 / NORM; confusing: (1.5 + 1.2) / 2 / NORM and (0.5 + 0.6) / 2 / NORM
    assert frame.loc["vanilla", "correct"] == pytest.approx(0.95 / NORM)
    assert frame.loc["rejecting", "correct"] == pytest.approx(0.95 / NORM)
    assert frame.loc["vanilla", "confusing"] == pytest.approx(1.35 / NORM)
    assert frame.loc["rejecting", "confusing"] == pytest.approx(0.55 / NORM)
    assert np.allclose(frame["gap"], frame["correct"] - frame["confusing"])
    assert frame.loc["vanilla", "gap"] < 0 < frame.loc["rejecting", "gap"]
    assert frame.loc["vanilla", "AP"] == pytest.approx(5 / 12) and frame.loc["rejecting", "AP"] == 1.0


def test_top_k_lists_each_methods_ranking(split, scorers):
    row = next(pd.DataFrame([gallery(BLIND)]).itertuples())
    top = top_k_scores(scorers, row, split, k=3)
    assert len(top) == 6 and list(top["rank"]) == [1, 2, 3, 1, 2, 3]
    vanilla, rejecting = top[top["method"] == "vanilla"], top[top["method"] == "rejecting"]
    assert vanilla["correct"].tolist() == [False, False, True]         # images 2, 3, 0
    assert rejecting["correct"].tolist() == [True, True, False]        # images 0, 1, 3
    assert np.allclose(vanilla["score"], np.array([1.5, 1.2, 1.0]) / NORM)
    assert np.allclose(rejecting["score"], np.array([1.0, 0.9, 0.6]) / NORM)
    assert (np.diff(vanilla["score"]) <= 0).all()


def test_showcase_is_the_gallery_where_ktn_gains_most_over_ec():
    separation = pd.DataFrame({"method": ["EC", "KTN"] * 3, "query": ["a", "a", "b", "b", "c", "c"],
                               "AP": [0.5, 0.6, 0.9, 0.8, 0.2, 0.7]})
    galleries = pd.DataFrame({"query": ["a", "b", "c"], "negative": ["x", "y", "z"]})
    assert pick_showcase_gallery(separation, galleries, "EC", "KTN").query == "c"


class SweepScorer(FixedImages):
    """KTN's interface for the sweep: ``pool_weight`` (None: 1/N) and ``rejection``. Rejection
    subtracts w_n alpha_cat(i) from captions that negate cat; N is the gallery size for a query
    and the number of options for a pairwise row."""

    def __init__(self, pool_weight=None, rejection=True):
        super().__init__("KTN")
        self.pool_weight, self.rejection = pool_weight, rejection
        self.seen = []

    def _penalised(self, feats, captions, n):
        self.seen.append((self.pool_weight, self.rejection))
        s = FixedImages.score(self, feats, captions)
        w = self.pool_weight if self.pool_weight is not None else 1.0 / n
        if self.rejection:
            negates = torch.tensor([float("no cat" in c) for c in captions])
            s = s - w * feats[:, 1:2] * negates[None, :]
        return s

    def score(self, image_features, captions):
        return self._penalised(image_features, captions, len(image_features))

    def score_rows(self, image_features, captions_per_row):
        k = len(captions_per_row[0])
        return torch.stack([self._penalised(image_features[j:j + 1], caps, k)[0]
                            for j, caps in enumerate(captions_per_row)])


def sweep_bench():
    # operator split: image 2 (dog and cat) with "A dog." (true) against the blind query (false);
    # the blind query scores 1.5 / NORM = 1.342 against 1.0, so w_n > 0.342 is needed to answer right.
    # An equivalence sample the sweep must ignore is answered right at every weight.
    factor = pd.DataFrame([
        {"split": "operator", "test": "NOT", "image_id": 102, "caption_0": BLIND, "caption_1": "A dog.", "correct": 1},
        {"split": "equivalence", "test": "De Morgan", "image_id": 100, "caption_0": "A dog.", "caption_1": BLIND,
         "correct": 0}])
    empty = pd.DataFrame(columns=list(gallery(BLIND)))
    return SimpleNamespace(factor=factor, confusion_2c=pd.DataFrame([gallery(BLIND)]), confusion_3c=empty)


def test_pool_weight_sweep_sets_and_restores_the_weight(split):
    scorer = SweepScorer(pool_weight=0.123, rejection=True)
    sweep = pool_weight_sweep(scorer, sweep_bench(), split, weights=(0.0, None, 0.25, 0.5, 1.0))
    assert sweep["w_n"].tolist() == [0.0, "1/N", 0.25, 0.5, 1.0]
    # 2C, blind query: correct images score 0.894 (0) and 0.805 (1); rejection of w alpha_cat moves the
    # confusing ones to 1.342 - w (2) and 1.073 - 0.6 w (3). w = 1/N = 1/4 (a 4-image gallery) or 0.25
    # leaves both on top; w = 0.5 puts image 2 between 0 and 1 (AP (1 + 2/3) / 2); w = 1 both below.
    assert sweep["Conf-2C"].tolist() == [41.7, 41.7, 41.7, 83.3, 100.0]
    assert sweep["FACTOR operator"].tolist() == [0.0, 100.0, 0.0, 100.0, 100.0]   # 1/N = 1/2 for two options
    assert sweep["Conf-3C"].isna().all()
    assert (scorer.pool_weight, scorer.rejection) == (0.123, True)
    assert set(scorer.seen) == {(0.0, False), (None, True), (0.25, True), (0.5, True), (1.0, True)}


def test_pool_weight_sweep_restores_the_scorer_when_evaluation_fails(split):
    scorer = SweepScorer(pool_weight=None, rejection=False)
    broken = sweep_bench()
    broken.confusion_2c = pd.DataFrame([gallery(BLIND, correct=(999,))])     # an image id not in the split
    with pytest.raises(KeyError):
        pool_weight_sweep(scorer, broken, split, weights=(0.5,))
    assert (scorer.pool_weight, scorer.rejection) == (None, False)
