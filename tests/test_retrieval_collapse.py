"""Chapter 03's account of PeakPatch's retrieval collapse: the split of Delta s over a gallery into image,
query and interaction parts, and the sentences read off the measurements."""
import numpy as np
import pandas as pd
import pytest
import torch

from negutils.methods.peakpatch.retrieval_collapse import CENTRED, centre_delta_per_image, collapse_findings, decompose


def test_an_image_offset_plus_a_query_shift_has_no_interaction_and_the_shares_are_their_variances():
    image = torch.tensor([0.3, -0.1, -0.2, 0.0], dtype=torch.float64)       # mean 0, mean square 0.035
    query = torch.tensor([0.1, -0.1], dtype=torch.float64)                  # mean 0, mean square 0.01
    parts = decompose(image[:, None] + query[None, :] + 0.05)
    assert parts["interaction share"] == pytest.approx(0.0, abs=1e-12)
    assert parts["image share"] == pytest.approx(0.035 / 0.045) and parts["query share"] == pytest.approx(0.01 / 0.045)


def test_the_three_shares_sum_to_one_and_a_constant_delta_is_refused():
    parts = decompose(torch.randn(50, 20, generator=torch.Generator().manual_seed(0), dtype=torch.float64))
    assert sum(parts[f"{p} share"] for p in ("image", "query", "interaction")) == pytest.approx(1.0)
    assert parts["interaction share"] > 0.8                                   # noise is mostly interaction
    with pytest.raises(ValueError, match="constant"):
        decompose(torch.full((3, 3), 0.2, dtype=torch.float64))


def test_the_findings_name_the_largest_part_the_ecn_alone_and_the_strongest_correlate():
    decomposition = pd.DataFrame([{"method": "PeakPatch (joint)", "mean |delta s|": 0.05, "image share": 0.7,
                                   "query share": 0.1, "interaction share": 0.2}])
    retrieval = pd.DataFrame({"scorer": ["vanilla", "PeakPatch (joint)", "its ECN alone (no Delta s)", CENTRED],
                              "R@5": [62.0, 27.0, 58.0, 30.1], "R-Neg@5": [43.0, 6.0, 40.0, 7.0]})
    correlates = pd.DataFrame({"image property": ["objects in the image", "mean frozen score over the queries"],
                               "Spearman rho with the offset": [0.1, -0.6], "images": [100, 100]})
    lines = collapse_findings(decomposition, retrieval, correlates, "PeakPatch (joint)")
    assert "image 70.0%" in lines[0] and "the image part is the largest" in lines[0]
    assert "R@5 58.0" in lines[1] and "62.0 and 43.0 for vanilla" in lines[1]
    assert lines[2] == ("Of the 35.0 points of R@5 PeakPatch (joint) loses against vanilla, dropping its Delta s wins "
                        "back 31.0; its ECN's corrected text accounts for the other 4.0.")
    assert lines[3] == ("Taking out only the image part (Delta s centred per image) gives R@5 30.1 and R-Neg@5 7.0: "
                        "+3.1 points of R@5 (10% of what dropping it wins).")
    assert "mean frozen score over the queries (Spearman rho -0.60 over 100 images)" in lines[4]
    # without the frozen model's row, no division of the loss, and the centred row is still read
    alone = collapse_findings(decomposition, retrieval.iloc[1:], correlates, "PeakPatch (joint)")
    assert alone[2] == "Dropping its Delta s raises R@5." and "+3.1 points" in alone[3]


def test_centring_delta_per_image_removes_exactly_the_image_offsets():
    """Scores = base + image offset + query shift + interaction: centring Delta s per image over the queries
    leaves base + query shift + interaction, less the interaction's per-image mean (zero here by construction)."""
    rng = np.random.default_rng(0)
    base = rng.normal(size=(6, 9))                       # [queries, images]
    offset, shift = rng.normal(size=(1, 9)), rng.normal(size=(6, 1))
    interaction = rng.normal(size=(6, 9))
    interaction -= interaction.mean(axis=0, keepdims=True)
    centred = centre_delta_per_image((base + offset + shift + interaction).astype(np.float32),
                                     base.astype(np.float32))
    expected = base + shift - shift.mean() + interaction
    assert np.allclose(centred, expected, atol=1e-5)
    # one query's ranking of the images is what an image-free Delta s would give: the offsets are gone
    assert (np.argsort(-centred, axis=1) == np.argsort(-expected, axis=1)).all()


def test_the_contrast_names_the_other_designs_numbers_and_its_largest_part():
    from negutils.methods.peakpatch.retrieval_collapse import contrast_finding

    contrast = pd.DataFrame([
        {"model": "joint", "MCQ val": 54.9, "R@5": 16.2, "R-Neg@5": 3.0, "image share": 0.09, "query share": 0.39,
         "interaction share": 0.52},
        {"model": "joint, SCN scale 10", "MCQ val": 50.0, "R@5": 41.8, "R-Neg@5": 19.3, "image share": 0.005,
         "query share": 0.758, "interaction share": 0.237}])
    assert contrast_finding(contrast) == (
        "Trained at the full budget, joint, SCN scale 10 scores MCQ 50.0, R@5 41.8 and R-Neg@5 19.3, against 54.9, "
        "16.2 and 3.0 for joint; 76% of its Delta s on the gallery is the query part (39% for the chosen design).")
