"""Chapter 03's account of PeakPatch's retrieval collapse: the split of Delta s over a gallery into image,
query and interaction parts, and the sentences read off the measurements."""
import pandas as pd
import pytest
import torch

from negutils.methods.peakpatch.retrieval_collapse import collapse_findings, decompose


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
    retrieval = pd.DataFrame({"scorer": ["vanilla", "PeakPatch (joint)", "its ECN alone (no Delta s)"],
                              "R@5": [62.0, 27.0, 58.0], "R-Neg@5": [43.0, 6.0, 40.0]})
    correlates = pd.DataFrame({"image property": ["objects in the image", "mean frozen score over the queries"],
                               "Spearman rho with the offset": [0.1, -0.6], "images": [100, 100]})
    lines = collapse_findings(decomposition, retrieval, correlates, "PeakPatch (joint)")
    assert "image 70.0%" in lines[0] and "the image part is the largest" in lines[0]
    assert "R@5 58.0" in lines[1] and "62.0 and 43.0 for vanilla" in lines[1]
    assert lines[2] == ("Of the 35.0 points of R@5 PeakPatch (joint) loses against vanilla, dropping its Delta s wins "
                        "back 31.0; its ECN's corrected text accounts for the other 4.0.")
    assert "mean frozen score over the queries (Spearman rho -0.60 over 100 images)" in lines[3]
