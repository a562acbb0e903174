"""PeakPatch's learning curve in training data: which images each size trains on, and the sentences chapter 03
reads off the committed table."""
import pandas as pd
import pytest

from negutils.config import get_profile
from negutils.methods.peakpatch.learning_curve import curve_findings, negtrain_of_size


def curve(rows):
    frame = pd.DataFrame(rows, columns=["variant", "negtrain images", "benchmark", "value", "low", "high"])
    return frame.assign(profile="cpu")


def test_the_findings_follow_each_variant_from_the_book_size_to_the_largest_and_judge_the_collapse():
    book = get_profile("cpu").world.negtrain
    rows = [("frozen", 0, "R@5", 62.0, 60.0, 64.0), ("frozen", 0, "MCQ", 37.0, 35.0, 39.0),
            ("frozen", 0, "R-Neg@5", 43.0, 41.0, 45.0)]
    for n, (mcq, neg, r5) in {book: (54.5, 6.0, 16.0), 4 * book: (60.0, 9.0, 30.0)}.items():
        rows += [("PeakPatch (joint)", n, "MCQ", mcq, mcq - 2, mcq + 2),
                 ("PeakPatch (joint)", n, "R-Neg@5", neg, neg - 2, neg + 2),
                 ("PeakPatch (joint)", n, "R@5", r5, r5 - 2, r5 + 2)]
    lines = curve_findings(curve(rows))
    assert lines[0] == (f"PeakPatch (joint), {book} -> {4 * book} images: MCQ 54.5 -> 60.0, R-Neg@5 6.0 -> 9.0, "
                        "R@5 16.0 -> 30.0.")
    assert lines[1].startswith(f"At {4 * book} images the joint model's R@5 is 30.0 [28.0, 32.0] against the frozen "
                               "model's 62.0") and lines[1].endswith("persists with more data.")
    recovered = [r if r[1] != 4 * book or r[2] != "R@5" else (*r[:3], 61.0, 59.0, 63.0) for r in rows]
    assert curve_findings(curve(recovered))[1].endswith("is gone within the intervals.")
    short = curve([r for r in rows if r[1] <= book])
    assert "no more than the book's" in curve_findings(short)[0]


def test_a_size_must_be_positive():
    with pytest.raises(ValueError, match="positive number of images, got 0"):
        negtrain_of_size(get_profile("smoke"), 0)
