"""Know-Thy-Not and Embedding Correction on hand-built embeddings with a known answer."""
import numpy as np
import pytest
import torch

from negutils.core.stats import sigmoid
from negutils.methods.ktn import EmbeddingCorrectionScorer, KtnScorer, rejection_score, remove_directions

CONCEPTS = ("cat", "dog", "bird")
D = 5


def basis(k: int) -> torch.Tensor:
    return torch.eye(D)[k]


def bag_of_concepts_encoder(captions):
    """A text tower that dilutes instead of negating: a concept right after "no" keeps 0.2 of its
    weight; "a photo." alone is the neutral direction."""
    out = []
    for caption in captions:
        words = caption.lower().replace(".", " ").split()
        v = torch.zeros(D)
        for k, w in enumerate(words):
            if w in CONCEPTS:
                v += (0.2 if k and words[k - 1] == "no" else 1.0) * basis(CONCEPTS.index(w))
        out.append(v if v.norm() > 0 else basis(3))
    return torch.stack(out)


def images(*rows):
    return torch.nn.functional.normalize(torch.tensor(rows, dtype=torch.float32), dim=-1)


# correct: a cat (weakly) and a bird, no dog; confusing: a cat and a dog, equally strong
GALLERY = images([1.0, 0.0, 1.6, 0, 0], [1.0, 1.0, 0.0, 0, 0])
QUERY = "A cat is present but no dog."


def test_ec_leaves_the_confusing_image_on_top_and_ktn_ranks_the_correct_one_first():
    vanilla = GALLERY @ torch.nn.functional.normalize(bag_of_concepts_encoder([QUERY]), dim=-1).T
    ec = EmbeddingCorrectionScorer(None, bag_of_concepts_encoder).score(GALLERY, [QUERY])[:, 0]
    ktn = KtnScorer(None, bag_of_concepts_encoder, CONCEPTS).score(GALLERY, [QUERY])[:, 0]
    assert vanilla[1] > vanilla[0]          # the negation is ignored
    assert ec[1] > ec[0]                    # dilution lowers dog, not enough
    assert ktn[0] > ktn[1]                  # rejection: the dog in image 1 is penalised


def test_projection_only_ablation_has_no_penalty():
    dim1 = KtnScorer(None, bag_of_concepts_encoder, CONCEPTS, rejection=False)
    t = dim1.corrected([QUERY])[0]
    assert abs(float(t @ basis(1))) < 1e-6 and torch.isclose(t.norm(), torch.tensor(1.0))
    assert torch.allclose(dim1.score(GALLERY, [QUERY])[:, 0], GALLERY @ t)


def test_pool_weight_is_one_over_the_candidate_pool():
    ktn = KtnScorer(None, bag_of_concepts_encoder, CONCEPTS)
    gap_gallery = ktn.score(GALLERY, [QUERY])[:, 0]
    rows = ktn.score_rows(GALLERY, [[QUERY, "A cat."], [QUERY, "A cat."]])
    t = ktn.corrected([QUERY])[0]
    p = torch.from_numpy(ktn.penalty(GALLERY, ktn.parses([QUERY])[0])).float()
    assert torch.allclose(gap_gallery, GALLERY @ t - p / 2)              # gallery of 2 images: N = 2
    assert torch.allclose(rows[:, 0], GALLERY @ t - p / 2)               # two options per row: N = 2
    assert torch.allclose(rows[:, 1], GALLERY @ torch.nn.functional.normalize(basis(0), dim=0))


def test_rejection_score_matches_eq_13_by_hand():
    alpha = np.array([[0.30, 0.10, 0.25], [0.30, 0.35, 0.25]])     # columns: c+, c-, other
    p = rejection_score(alpha, neg=[1], pos=[0], tau_vocab=np.zeros(2), kappa=50)
    assert np.allclose(p, [sigmoid(50 * (0.10 - 0.30)) - 0.25, sigmoid(50 * (0.35 - 0.30)) - 0.25])
    no_affirmed = rejection_score(alpha, neg=[1], pos=[], tau_vocab=alpha.mean(axis=1), kappa=50)
    assert np.allclose(no_affirmed, sigmoid(50 * (alpha[:, 1] - alpha.mean(axis=1))))


def test_remove_directions_leaves_the_span():
    t = torch.nn.functional.normalize(torch.randn(D, generator=torch.Generator().manual_seed(0)), dim=0)
    directions = torch.randn(2, D, generator=torch.Generator().manual_seed(1))
    out = remove_directions(t, directions)
    assert (torch.allclose(out @ directions.T, torch.zeros(2), atol=1e-6) and
            torch.isclose(out.norm(), torch.tensor(1.0)))
    over = remove_directions(t, directions[:1], lam=1.9)
    assert float(over @ directions[0]) * float(t @ directions[0]) < 0      # lambda > 1 flips the sign


def test_unparsed_and_affirmative_captions_score_holistically():
    ktn = KtnScorer(None, bag_of_concepts_encoder, CONCEPTS)
    scores = ktn.score(GALLERY, ["", "a cat and a bird."])
    assert torch.allclose(scores[:, 1], GALLERY @ torch.nn.functional.normalize(basis(0) + basis(2), dim=0))
    assert "" in ktn.fallbacks and "a cat and a bird." not in ktn.fallbacks


def test_ktn_needs_a_vocabulary():
    with pytest.raises(ValueError, match="vocabulary"):
        KtnScorer(None, bag_of_concepts_encoder, [])


def test_a_second_query_on_a_gallery_encodes_only_its_own_text():
    encoded = []

    def counting_encoder(captions):
        encoded.extend(captions)
        return bag_of_concepts_encoder(captions)

    ktn = KtnScorer(None, counting_encoder, CONCEPTS)
    ktn.score(GALLERY, [QUERY])
    before = len(encoded)
    ktn.score(GALLERY, ["A dog is present but no cat."])
    assert sorted(encoded[before:]) == ["A dog is present", "A dog is present but no cat."]  # query, stripped view


def test_embedding_correction_follows_the_written_formula_and_keeps_the_direction_variant():
    import torch.nn.functional as F

    from negutils.methods.ktn import EmbeddingCorrectionScorer

    # e_c = (1, 0.2, 0, 0, 0) for the query, e_neg = the dog axis, a = the neutral axis (basis 3)
    formula = EmbeddingCorrectionScorer(None, bag_of_concepts_encoder, lam=1.9)
    e = F.normalize(torch.tensor([1.0, 0.2, 0, 0, 0]), dim=0)
    expected = F.normalize(e - 1.9 * (torch.tensor([0, float(e[1]), 0, 0, 0]) - basis(3)), dim=0)
    assert torch.allclose(formula.corrected([QUERY])[0], expected, atol=1e-5)
    direction = EmbeddingCorrectionScorer(None, bag_of_concepts_encoder, lam=1.9, variant="direction")
    d = F.normalize(basis(1) - basis(3), dim=0)
    expected = F.normalize(e - 1.9 * (e @ d) * d, dim=0)
    assert torch.allclose(direction.corrected([QUERY])[0], expected, atol=1e-5)
    with pytest.raises(ValueError, match="unknown Embedding Correction variant"):
        EmbeddingCorrectionScorer(None, bag_of_concepts_encoder, variant="both")
