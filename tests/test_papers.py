from pathlib import Path

import pytest

from negutils.papers import beside_paper, paper_numbers

SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"


def test_every_number_appears_in_its_quote():
    frame = paper_numbers()
    assert len(frame) >= 20 and frame["value"].notna().all()
    for row in frame.itertuples():
        assert f"{row.value:.1f}" in row.quote or f"{row.value:g}" in row.quote, row
        assert row.unit in ("percent", "fraction", "layer", "z"), row


@pytest.mark.skipif(not SEEDS.exists(), reason="the seed documents live outside the repository")
def test_quotes_are_verbatim_in_the_seeds():
    for row in paper_numbers().itertuples():
        assert row.quote in (SEEDS / row.seed).read_text(), row


def test_beside_paper_converts_fractions():
    table = beside_paper({("negbench_mcq_coco", "accuracy"): 0.5})
    assert set(table["paper"]) == {"PeakPatch", "KTN", "LCSE"} and (table["organism"] == 50.0).all()


def test_beside_paper_keeps_fractions_where_the_paper_prints_fractions():
    table = beside_paper({("collapse", "detection_auc"): 0.7, ("collapse", "polarity_auc"): 0.4,
                          ("collapse", "l_p"): 3})
    shown = dict(zip(table["metric"], table["organism"]))
    assert shown == {"detection_auc": 0.7, "polarity_auc": 40.0, "l_p": 3}
