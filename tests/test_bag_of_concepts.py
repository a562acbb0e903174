"""Bag-of-concepts analyses and the dilution measurement on a perfectly bag-of-words encoder.

The fake encoder embeds a caption as the normalised sum of the one-hot vectors of the concepts it
names, ignoring every other word; images are the normalised sum of their concepts. So detection
is perfect, negation is invisible, and each analysis has a hand-derivable answer.
"""
import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from negutils.diagnosis import bag_of_concepts as boc
from negutils.core.metrics import roc_auc
from negutils.diagnosis import concept_pairs, dilution_summary, text_coefficients
from negutils.diagnosis.concepts import concept_embeddings
from negutils.report import collapse_verdicts
from negutils.report.verdicts import NOT_MEASURED, NOT_REPRODUCED, PARTLY, REPRODUCED, Claim, judge

CATEGORIES = ["cat", "dog", "star", "boat", "cup"]
NOT_DIRECTION = len(CATEGORIES)        # an extra axis some encoders add for "no"/"not"


def bag_encoder(negation_weight: float = 0.0, subtract_negated: bool = False):
    def encode(captions):
        out = torch.zeros(len(captions), len(CATEGORIES) + 1)
        for row, caption in enumerate(captions):
            words = caption.lower().replace(".", "").replace(",", "").split()
            negated_next = False
            for w in words:
                if w in ("no", "not", "without"):
                    out[row, NOT_DIRECTION] += negation_weight
                    negated_next = True
                if w in CATEGORIES:
                    out[row, CATEGORIES.index(w)] += -1.0 if (subtract_negated and negated_next) else 1.0
                    negated_next = False
        return F.normalize(out, dim=-1)
    return encode


@pytest.fixture(scope="module")
def world():
    rng = np.random.default_rng(0)
    presence = rng.random((200, len(CATEGORIES))) < 0.4
    presence[presence.sum(axis=1) == 0, 0] = True
    images = F.normalize(torch.cat([torch.as_tensor(presence, dtype=torch.float32),
                                    torch.zeros(len(presence), 1)], dim=1), dim=-1)
    return presence, images


def test_separable_scores_give_auc_one():
    assert roc_auc([0, 0, 1, 1], [0.1, 0.2, 0.3, 0.9]) == 1.0
    assert roc_auc([1, 1, 0, 0], [0.1, 0.2, 0.3, 0.9]) == 0.0


def test_concept_polarity_of_a_bag_of_words_encoder(world):
    presence, images = world
    table = boc.concept_polarity(bag_encoder(), images, presence, CATEGORIES)
    assert (table["detection AUC"] == 1.0).all()
    assert (table["polarity AUC"] == 0.0).all()          # "no X" = "a X": fully inverted
    assert np.allclose(table["rho(a X, no X)"], 1.0)


def test_ranking_similarity_kinds(world):
    _, images = world
    frame = boc.ranking_similarity(bag_encoder(), images, CATEGORIES, n_pairs=10, seed=1)
    rho = frame.groupby("kind")["rho"].mean()
    assert set(rho.index) == set(boc.RANKING_KINDS)
    assert rho["negation"] == pytest.approx(1.0) and rho["operator swap"] == pytest.approx(1.0)
    assert rho["rephrase"] == pytest.approx(1.0) and rho["unrelated"] < rho["concept replacement"] < 1.0
    pd.testing.assert_frame_equal(frame, boc.ranking_similarity(bag_encoder(), images, CATEGORIES, 10, seed=1))


def test_quadrant_preference_of_a_bag_of_words_encoder(world):
    presence, images = world
    pairs = boc.eligible_pairs(presence, CATEGORIES, min_per_quadrant=5)
    assert pairs and all(a != b for a, b in pairs)
    shares = boc.winner_shares(boc.quadrant_preference(bag_encoder(), images, presence, CATEGORIES, pairs))
    assert list(shares.columns) == list(boc.QUADRANTS) and list(shares.index) == list(boc.OPERATORS)
    assert shares.loc["¬A∧¬B", "Both"] == 1.0 and shares.loc["A∧B", "Both"] == 1.0
    assert shares.loc["¬A", ["Both", "A-only"]].sum() == 1.0


def test_expected_quadrants_follow_the_oracle():
    assert boc.expected_quadrants("¬A∧¬B") == ["Neither"]
    assert boc.expected_quadrants("A∨B") == ["Both", "A-only", "B-only"]
    assert boc.expected_quadrants("A∧¬B") == ["A-only"]
    assert boc.expected_quadrants("¬A") == ["B-only", "Neither"]


def test_span_residual_reconstructs_the_full_score_exactly():
    torch.manual_seed(0)
    V, basis, t = torch.randn(50, 16), torch.randn(2, 16), torch.randn(16)
    split = boc.span_residual(t, basis, V)
    assert np.allclose(split.z_full, (V.double() @ t.double()).numpy(), atol=1e-12)
    inside = boc.span_residual(0.3 * basis[0] - 2.0 * basis[1], basis, V)
    assert np.allclose(inside.coefficients, [0.3, -2.0], atol=1e-6)
    assert np.allclose(inside.z_perp, 0, atol=1e-5) and inside.gain < 1e-10
    orthogonal = torch.randn(16)
    orthogonal -= basis.T @ torch.linalg.lstsq(basis.T, orthogonal[:, None]).solution[:, 0]
    assert boc.span_residual(orthogonal, basis, V).gain == pytest.approx(1.0)


def test_span_residual_analysis_on_a_negation_aware_encoder(world):
    presence, images = world
    pairs = boc.eligible_pairs(presence, CATEGORIES, min_per_quadrant=5, max_pairs=6)
    span = boc.span_residual_analysis(bag_encoder(subtract_negated=True), images, presence, CATEGORIES, pairs)
    not_a = span[span["operator"] == "¬A"]
    # "no X" = -e_X lies in the span of t_X: no residual, and holistic scoring is already correct
    assert (not_a["holistic AUC"] == 1.0).all() and (not_a["gain"] < 1e-10).all()
    both = span[span["operator"] == "A∧B"]
    assert np.allclose(both["span weight A"], 0.5) and (both["rho with mean"] > 0.99).all()


def test_negation_direction_is_shared_and_correct_in_polarity(world):
    presence, images = world
    table, summary = boc.negation_direction(bag_encoder(negation_weight=1.0), images, presence, CATEGORIES)
    assert (table["delta AUC"] == 1.0).all()
    assert summary["pairwise cosine"] > summary["random pairwise cosine"] + 0.3


def absence_world(presence, sign):
    """Images carry an "X is absent" axis per concept beside the concept axes (and 30 axes of noise
    no caption uses), and "no X" embeds as t_X + sign * (absent-X axis): its residual off t_X reads
    absence exactly (sign +1) or presence (-1)."""
    C, noise = len(CATEGORIES), 30
    images = F.normalize(torch.cat([torch.as_tensor(presence, dtype=torch.float32),
                                    torch.as_tensor(~presence, dtype=torch.float32),
                                    torch.randn(len(presence), noise, generator=torch.Generator().manual_seed(0))],
                                   dim=1), dim=-1)

    def encode(captions):
        out = torch.zeros(len(captions), 2 * C + noise)
        for row, caption in enumerate(captions):
            words = caption.lower().replace(".", "").split()
            k = next(CATEGORIES.index(w) for w in words if w in CATEGORIES)
            out[row, k] = 1.0
            if {"no", "not"} & set(words):
                out[row, C + k] = sign
        return F.normalize(out, dim=-1)
    return encode, images


@pytest.mark.parametrize("sign, alignment, percentile", [(1.0, 1.0, 1.0), (-1.0, 0.0, 0.0)])
def test_null_alignment_ranks_a_residual_against_random_directions(world, sign, alignment, percentile):
    presence, _ = world
    encode, images = absence_world(presence, sign)
    null = boc.null_alignment(encode, images, presence, CATEGORIES, n_directions=50)
    assert null["concept"].tolist() == CATEGORIES
    # the residual separates images without X perfectly (or inverts them); random directions orthogonal
    # to t_X mostly read noise, so the residual sits at the top (bottom) of the null
    assert (null["alignment"] == alignment).all() and (null["percentile"] == percentile).all()
    assert ((null["null mean"] - 0.5).abs() < 0.15).all()
    assert (np.sign(null["z"]) == sign).all() and (null["z"].abs() > 3).all()


def test_concept_embeddings_are_unit_norm():
    e = concept_embeddings(bag_encoder(), CATEGORIES)
    assert torch.allclose(e.norm(dim=1), torch.ones(len(CATEGORIES)))
    assert torch.allclose(e[:, :len(CATEGORIES)], torch.eye(len(CATEGORIES)))
    with pytest.raises(ValueError, match="empty concept"):
        concept_embeddings(bag_encoder(), ["cat", " "])


def test_dilution_when_negation_is_ignored_and_when_it_rejects():
    ignored = dilution_summary(text_coefficients(bag_encoder(), CATEGORIES))
    assert ignored["pairs"] == len(CATEGORIES) * (len(CATEGORIES) - 1)
    assert ignored["median survival ratio"] == pytest.approx(1.0)       # "no c-" counts as "a c-"
    assert ignored["share negated below control"] == 0.0
    rejecting = dilution_summary(text_coefficients(bag_encoder(subtract_negated=True), CATEGORIES))
    assert rejecting["median beta_c- negated"] < 0 and rejecting["share negated below control"] == 1.0
    with pytest.raises(KeyError, match="not in the list"):
        text_coefficients(bag_encoder(), CATEGORIES, pairs=[("cat", "zebra")])


def test_a_profiles_dilution_pairs_are_a_seeded_sample_of_the_ordered_pairs():
    every = concept_pairs(CATEGORIES)
    assert len(every) == len(set(every)) == len(CATEGORIES) * (len(CATEGORIES) - 1)
    assert all(a != b for a, b in every) and concept_pairs(CATEGORIES, len(every) + 5) == every
    some = concept_pairs(CATEGORIES, 10, seed=1)
    assert len(set(some)) == 10 and set(some) <= set(every)
    assert some == sorted(some, key=every.index)                       # listed in the whole set's order
    assert some == concept_pairs(CATEGORIES, 10, seed=1) != concept_pairs(CATEGORIES, 10, seed=2)
    assert dilution_summary(text_coefficients(bag_encoder(), CATEGORIES, some))["pairs"] == 10
    with pytest.raises(ValueError, match="limit must be at least 1"):
        concept_pairs(CATEGORIES, 0)


PAPER_LIKE = dict(
    lcd_shape="rise-and-fall", random_shape="rising", minimal_shape="rise-and-fall", minimal_max=0.1,
    minimal_peak_layer=8, retained_peak=0.9, retained_final=0.4, retained_min_layer=12, l_p=8, l_a=6, ascent=7,
    n_layers=12, lcd_max=0.2,
    lcd_final=0.05, paraphrase_max=0.01, alignment_first=0.1, alignment_final=0.3, probe_first_layer=0.876,
    probe_peak=0.94, probe_peak_layer=5, probe_final_layer=0.879, detection_auc=0.88, rho_negation=0.94,
    rho_rephrase=0.95, rho_operator_swap=0.94, rho_concept_replacement=0.47, rho_unrelated=0.27,
    polarity_auc=0.112, quadrant_not_a_prefers_a=0.91, quadrant_nor_neither=0.0, rho_and_mean=0.82,
    rho_and_min=0.74, alignment_not=0.68, holistic_auc_not=0.12, amplified_auc_not=0.66, amplification=16,
    alignment_nor=0.17, delta_cosine=0.62, random_cosine=0.0, delta_auc=0.70, dilution_pull=0.0,
    dilution_share_below=0.0, survival_ratio=0.0)


def test_the_papers_own_numbers_reproduce_every_claim():
    verdicts = collapse_verdicts(PAPER_LIKE)
    assert (verdicts["verdict"] == REPRODUCED).all(), verdicts[verdicts["verdict"] != REPRODUCED]
    assert verdicts["rule"].str.startswith("reproduced:").all()


def test_a_falling_lcd_is_not_reproduced_and_a_rising_one_is_partly():
    falling = collapse_verdicts({**PAPER_LIKE, "lcd_shape": "flat/falling", "l_p": 1})
    assert falling.loc[0, "verdict"] == NOT_REPRODUCED
    assert collapse_verdicts({**PAPER_LIKE, "lcd_shape": "rising"}).loc[0, "verdict"] == PARTLY


def test_a_claim_prefers_reproduced_over_partly_and_prints_the_rule_it_evaluates():
    claim = Claim("gain", "paper", "{v:.1f}", "{x:.1f}", "x >= 5", "x > 0",
                  {"v": ("KTN", "Table 1", "KTN (ViT-B/32)", "Conf-2C mAP")})
    verdicts = [judge((claim,), {"x": x}).iloc[0] for x in (7.0, 2.0, -1.0, float("nan"))]
    assert [v["verdict"] for v in verdicts] == [REPRODUCED, PARTLY, NOT_REPRODUCED, NOT_MEASURED]
    assert verdicts[0]["rule"] == "reproduced: x >= 5; partly: x > 0"
    assert verdicts[0]["paper"] == "82.8" and verdicts[0]["ours"] == "7.0"   # looked up, not typed
    assert verdicts[3]["ours"] == "missing: x"


def test_a_rule_naming_an_unknown_measure_is_refused_with_the_claim_named():
    claim = Claim("gain", "paper", "", "", "y >= 5")
    with pytest.raises(KeyError, match="gain.*needs measures \\['y'\\]"):
        judge((claim,), {"x": 1.0})
