"""KTN and LCSE score a batch of queries with one array expression per parse shape over the
gallery's cached image x concept matrix. These tests recompute every score the way the methods
are written, one caption at a time (eq. 11-14 of KTN, LCSE's score edit), and require the batched
scores to match to 1e-6, on a gallery, on MCQ-style rows and on pairwise rows."""
import hashlib
import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from negutils.core.logic import literals
from negutils.diagnosis.concepts import ConceptBank
from negutils.methods import lcse_correction, parsed_scorer
from negutils.methods.ktn import KtnScorer, rejection_score
from negutils.methods.lcse import Calibration, LcseScorer

D = 48
VOCABULARY = ("cat", "dog", "bird", "kite", "car", "bicycle", "table", "cup")
CAPTIONS = [
    "A cat but no dog.", "There is no kite.", "A car is present but no bicycle.", "No cat.",
    "A dog and a bird, but no cat.", "Neither a cat nor a dog.", "A cup on a table.", "A kite or a bird.",
    "This image features a table, but no cup.", "A bicycle without a car.", "A dog is not present.",
    "A bird and a kite.", "There is a car but not a cup and not a table.", "No dog or cat is visible.",
    "A cup.", "A photo of a bird, without any kite.", "A table but not a cat.", "A cat and a dog and a bird.",
]


def hashed_encoder(captions):
    """A deterministic text tower: each caption's own pseudo-random direction."""
    rows = [torch.from_numpy(np.random.default_rng(int(hashlib.sha256(c.encode()).hexdigest()[:8], 16))
                             .standard_normal(D)).float() for c in captions]
    return torch.stack(rows)


def gallery(n: int, seed: int = 0) -> torch.Tensor:
    return F.normalize(torch.randn(n, D, generator=torch.Generator().manual_seed(seed)), dim=-1)


def ktn_by_caption(ktn: KtnScorer, feats: torch.Tensor, captions, pool: int) -> np.ndarray:
    """KTN one caption at a time: eq. 12's corrected text, then eq. 13-14 on that caption's columns."""
    scores = (feats @ ktn.corrected(captions).T).numpy().copy()
    for j, parse in enumerate(ktn.parses(captions)):
        if not (parse.parsed and parse.negated):
            continue
        affirmed = [n for n in parse.affirmed if n not in parse.negated]
        names = list(dict.fromkeys(parse.negated + affirmed))
        alpha = ktn.bank.similarities(feats, names).double().numpy()
        tau_vocab = ktn.bank.similarities(feats, list(VOCABULARY)).double().mean(1).numpy()
        p = rejection_score(alpha, [names.index(n) for n in parse.negated], [names.index(n) for n in affirmed],
                            None if affirmed else tau_vocab)
        scores[:, j] += (-p / pool).astype(np.float32)
    return scores


def lcse_by_caption(lcse: LcseScorer, feats: torch.Tensor, captions) -> np.ndarray:
    scores = (feats @ lcse.corrected(captions).T).numpy().copy()
    for j, parse in enumerate(lcse.parses(captions)):
        if parse.parsed:
            names = list(dict.fromkeys(c["name"] for c in literals(parse.parse)))
            sims = lcse.bank.similarities(feats, names).double().numpy()      # the cached similarities
            scores[:, j] += lcse_correction(parse.parse, {n: sims[:, k] for k, n in enumerate(names)},
                                            lcse.calibration.mu, lcse.calibration.beta).astype(np.float32)
    return scores


@pytest.fixture(scope="module")
def scorers():
    return (KtnScorer(None, hashed_encoder, VOCABULARY),
            LcseScorer(None, hashed_encoder, Calibration(0.05, 30.0)))


def test_the_captions_cover_several_shapes(scorers):
    ktn, lcse = scorers
    ktn_shapes = {p.shape for p in ktn._plans(CAPTIONS) if p}
    lcse_shapes = {p.shape for p in lcse._plans(CAPTIONS) if p}
    assert len(ktn_shapes) >= 3 and any(shape[1] == 0 for shape in ktn_shapes)    # C+ empty among them
    assert len(lcse_shapes) >= 4


@pytest.mark.parametrize("n", [7, 40000])
def test_gallery_scores_equal_the_per_caption_formulas(scorers, n):
    ktn, lcse = scorers
    feats = gallery(n)
    assert np.allclose(ktn.score(feats, CAPTIONS).numpy(), ktn_by_caption(ktn, feats, CAPTIONS, pool=n),
                       rtol=0, atol=1e-6)
    assert np.allclose(lcse.score(feats, CAPTIONS).numpy(), lcse_by_caption(lcse, feats, CAPTIONS),
                       rtol=0, atol=1e-6)


def test_plan_columns_computed_in_blocks_equal_one_block(monkeypatch):
    """A plan's column is computed a block of images at a time; the blocks only bound its temporaries, so
    the scores are the same bit for bit whatever the block size."""
    feats = gallery(1000, seed=13)

    def scores():
        return [scorer.score(feats, CAPTIONS) for scorer in (
            KtnScorer(None, hashed_encoder, VOCABULARY), LcseScorer(None, hashed_encoder, Calibration(0.05, 30.0)))]
    whole = scores()
    monkeypatch.setattr(parsed_scorer, "SCORE_BLOCK_VALUES", 1)      # 256 images a block: four blocks
    assert parsed_scorer.rows_per_block(3) == 256
    for blocked, one in zip(scores(), whole):
        assert torch.equal(blocked, one)


def test_a_changed_setting_works_the_queries_out_again(scorers):
    """The scorer keeps what each caption adds per gallery; ``pool_weight_sweep`` changes w_n on the
    scorer between calls, and each call must score with the weight (and kappa) it is given."""
    feats = gallery(200, seed=6)
    swept = KtnScorer(None, hashed_encoder, VOCABULARY)
    swept.score(feats, CAPTIONS)
    for weight in (0.5, None):
        swept.pool_weight = weight
        fresh = KtnScorer(None, hashed_encoder, VOCABULARY, pool_weight=weight)
        assert torch.equal(swept.score(feats, CAPTIONS), fresh.score(feats, CAPTIONS))
    swept.kappa = 20.0                  # the folded columns (C+ empty) are sigmoids of kappa
    assert torch.equal(swept.score(feats, CAPTIONS),
                       KtnScorer(None, hashed_encoder, VOCABULARY, kappa=20.0).score(feats, CAPTIONS))
    swept.kappa = 50.0
    assert not torch.equal(swept.score(feats, CAPTIONS),
                           KtnScorer(None, hashed_encoder, VOCABULARY, pool_weight=0.5).score(feats, CAPTIONS))


def test_lcse_where_the_sigmoids_saturate_takes_the_float64_expression():
    """beta = 120 puts |beta (s - mu)| past the closed form's range, so the blocks fall back; the
    scores still equal the per-caption formula, clipping included."""
    lcse = LcseScorer(None, hashed_encoder, Calibration(-0.1, 120.0))
    feats = gallery(500, seed=4)
    low, high = lcse.bank.column_range(lcse.bank.columns(feats, list(VOCABULARY)))
    assert 120 * (high.max() + 0.1) > 20                                   # saturated somewhere
    assert np.allclose(lcse.score(feats, CAPTIONS).numpy(), lcse_by_caption(lcse, feats, CAPTIONS),
                       rtol=0, atol=1e-6)


def test_row_scores_equal_the_per_caption_formulas(scorers):
    ktn, lcse = scorers
    feats = gallery(len(CAPTIONS) // 4 * 4, seed=1)
    rows = [CAPTIONS[4 * q:4 * q + 4] for q in range(len(feats) // 4)]
    images = feats[::4]
    got_ktn, got_lcse = ktn.score_rows(images, rows).numpy(), lcse.score_rows(images, rows).numpy()
    for q, options in enumerate(rows):
        one = images[q:q + 1]
        assert np.allclose(got_ktn[q], ktn_by_caption(ktn, one, options, pool=4)[0], rtol=0, atol=1e-6)
        assert np.allclose(got_lcse[q], lcse_by_caption(lcse, one, options)[0], rtol=0, atol=1e-6)


def test_edits_change_scores_and_the_bank_caches_one_matrix_per_gallery(scorers):
    ktn, _ = scorers
    feats = gallery(50, seed=2)
    edited = ktn.score(feats, CAPTIONS).numpy()
    holistic = (feats @ ktn.corrected(CAPTIONS).T).numpy()
    negated = [j for j, p in enumerate(ktn.parses(CAPTIONS)) if p.parsed and p.negated]
    assert negated and (np.abs(edited[:, negated] - holistic[:, negated]).max(axis=0) > 1e-4).all()
    matrix = ktn.bank.matrix
    ktn.score(feats, CAPTIONS)
    assert ktn.bank.matrix is matrix                  # nothing recomputed for the same gallery


def test_a_replaced_vector_invalidates_its_column():
    bank = ConceptBank(hashed_encoder)
    feats = gallery(5, seed=3)
    bank.add_vector("probe", torch.ones(D))
    first = bank.similarities(feats, ["probe"]).clone()
    bank.add_vector("probe", -torch.ones(D))
    assert torch.allclose(bank.similarities(feats, ["probe"]), -first)


def test_single_concept_edits_ride_in_the_cosines_matrix_product(scorers, monkeypatch):
    """KTN with C+ empty and LCSE's "not A" are folded into the holistic product; only edits that
    combine concepts per query (KTN with C+, LCSE over several literals) are computed elementwise."""
    ktn, lcse = scorers
    feats = gallery(300, seed=5)
    blocks = []
    for cls in (KtnScorer, LcseScorer):
        elementwise = cls._block_edit
        monkeypatch.setattr(cls, "_block_edit", lambda self, shape, *rest, _f=elementwise:
                            blocks.append((self.name, shape)) or _f(self, shape, *rest))
    single = ["There is no kite.", "No cat.", "A dog is not present.", "Neither a cat nor a dog."]
    assert {p.shape for p in ktn._plans(single)} == {(1, 0), (2, 0)}
    for scorer, by_caption in ((ktn, lambda: ktn_by_caption(ktn, feats, single, pool=300)),
                               (lcse, lambda: lcse_by_caption(lcse, feats, single[:3]))):
        captions = single if scorer is ktn else single[:3]
        assert np.allclose(scorer.score(feats, captions).numpy(), by_caption(), rtol=0, atol=1e-6)
    assert blocks == []
    ktn.score(feats, CAPTIONS)
    lcse.score(feats, CAPTIONS)
    assert {name for name, _ in blocks} == {"KTN", "LCSE"}
    assert all(shape[1] > 0 for name, shape in blocks if name == "KTN")
    assert all(len(literals(json.loads(shape))) > 1 for name, shape in blocks if name == "LCSE")


def test_each_plans_edit_is_computed_once_per_gallery(monkeypatch):
    """An edit that does not fold is a column of the gallery: computed by ``_block_edit`` on the first
    call that needs it, read back by later calls and by other captions with the same plan, and
    computed again for a new gallery."""
    calls = []
    elementwise = KtnScorer._block_edit
    monkeypatch.setattr(KtnScorer, "_block_edit", lambda self, shape, slot_columns, pool:
                        calls.append(len(slot_columns)) or elementwise(self, shape, slot_columns, pool))
    ktn = KtnScorer(None, hashed_encoder, VOCABULARY)
    feats = gallery(3000, seed=7)
    first = ["A cat but no dog.", "A table but not a cat."]
    ktn.score(feats, first)
    assert calls == [2]                                      # one shape, its two plans in one call
    same_plan = "This image features a cat, but no dog."
    assert ktn._plans([same_plan]) == ktn._plans(first[:1])
    scores = ktn.score(feats, [same_plan, *first])
    assert calls == [2]
    assert np.allclose(scores.numpy(), ktn_by_caption(ktn, feats, [same_plan, *first], pool=3000), rtol=0, atol=1e-6)
    ktn.score(gallery(3000, seed=8), first)
    assert calls == [2, 2]


def test_scores_stay_right_while_later_calls_add_columns_to_the_gallery():
    """The gallery with its derived columns appended, and the queries' weights on them, are kept between
    calls; a call whose captions add columns must rebuild both, so an earlier caption list scored again
    (same captions, more columns) still equals the per-caption formulas, in either order."""
    feats = gallery(500, seed=11)
    first, second = CAPTIONS[:6], CAPTIONS[6:]
    for scorer, by_caption in ((KtnScorer(None, hashed_encoder, VOCABULARY),
                                lambda s, c: ktn_by_caption(s, feats, c, pool=len(feats))),
                               (LcseScorer(None, hashed_encoder, Calibration(0.05, 30.0)),
                                lambda s, c: lcse_by_caption(s, feats, c))):
        before = scorer.score(feats, first).numpy()
        columns = scorer.edit_columns(feats)
        assert np.allclose(scorer.score(feats, second).numpy(), by_caption(scorer, second), rtol=0, atol=1e-6)
        assert scorer.edit_columns(feats) > columns > 0
        again = scorer.score(feats, first).numpy()
        assert np.allclose(again, by_caption(scorer, first), rtol=0, atol=1e-6)
        assert np.allclose(again, before, rtol=0, atol=1e-6)
        assert scorer.edit_columns(gallery(500, seed=12)) == 0          # a gallery it has not scored
