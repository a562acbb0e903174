import re
from pathlib import Path

import pytest

from negutils.report import beside_paper, paper_numbers

SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"


NUMBER = re.compile(r"(?<![A-Za-z0-9_.])-?(?:\d+\.\d+|\.\d+|\d+)(?![A-Za-z0-9_])")


def test_every_number_is_a_whole_number_of_its_quote():
    # a whole token, so 5.2 cannot pass by hiding inside 65.2
    frame = paper_numbers()
    assert len(frame) >= 600 and frame["value"].notna().all()
    for row in frame.itertuples():
        assert row.value in {float(n) for n in NUMBER.findall(row.quote)}, row
        assert row.unit in ("percent", "fraction", "layer", "z"), row


def test_every_table_the_book_reproduces_is_there():
    frame = paper_numbers()
    tables = set(zip(frame["paper"], frame["table"]))
    wanted = {("PeakPatch", f"Table {n}") for n in (1, 2, 4, 5, 6, 12, 13)} | \
        {("KTN", f"Table {n}") for n in (1, 2, 3)} | {("LCSE", f"Table {n}") for n in (1, 2, 3, 4, 5)}
    assert wanted <= tables, wanted - tables
    assert (frame["paper"] == "NegBench").sum() >= 5
    assert not frame.duplicated(["paper", "table", "row", "column"]).any()


def test_a_sample_of_cells_reads_as_the_seed_prints_it():
    # spot checks typed from the seeds, independent of the quotes the file carries
    frame = paper_numbers().set_index(["paper", "table", "row", "column"])["value"]
    assert frame["PeakPatch", "Table 1", "NegCLIP", "VOC Hyb"] == 42.3
    assert frame["PeakPatch", "Table 13", "PeakPatch (joint)", "Near-tie"] == 62.3
    assert frame["PeakPatch", "Table 6", "PeakPatch (ECN)", "MSCOCO 5K R@5"] == 57.0
    assert frame["KTN", "Table 2", "KTN (SigLIP ViT-B/16)", "MCQ VOC2007"] == 82.9
    assert frame["KTN", "Table 1", "NegationCLIP", "Conf-2C mAP"] == 72.9
    assert frame["LCSE", "Table 2", "DCSM", "Retention COCO rho"] == 0.63
    assert frame["LCSE", "Table 5", "Holistic (CLIP-NegFull)", "Holistic"] == 75.1
    assert frame["LCSE", "Table 3", "CLIP-NegFull", "A or B"] == 19.3


@pytest.mark.skipif(not SEEDS.exists(), reason="the seed documents live outside the repository")
def test_quotes_are_verbatim_in_the_seeds():
    for row in paper_numbers().itertuples():
        assert row.quote in (SEEDS / row.seed).read_text(), row


def test_beside_paper_converts_fractions():
    table = beside_paper({("negbench_mcq_coco", "accuracy"): 0.5})
    assert set(table["paper"]) == {"PeakPatch", "KTN", "LCSE", "NegBench"} and (table["organism"] == 50.0).all()


def test_beside_paper_keeps_fractions_where_the_paper_prints_fractions():
    table = beside_paper({("collapse", "detection_auc"): 0.7, ("collapse", "polarity_auc"): 0.4,
                          ("collapse", "l_p"): 3})
    shown = dict(zip(table["metric"], table["organism"]))
    assert shown == {"detection_auc": 0.7, "polarity_auc": 40.0, "l_p": 3}


def test_paper_metric_finds_one_number_and_refuses_ambiguity():
    from negutils.report import paper_metric

    assert paper_metric("collapse", "l_p") == 8 and paper_metric("collapse", "l_a") == 6
    assert paper_metric("collapse", "polarity_auc", row="CLIP") == 11.2
    with pytest.raises(KeyError, match="rows for benchmark 'collapse' metric 'polarity_auc'.*exactly one"):
        paper_metric("collapse", "polarity_auc")     # every model of LCSE Table 1 reports one


def test_methods_beside_paper_pairs_each_method_with_its_paper_row():
    from negutils.benchmarks import results_frame
    from negutils.benchmarks.evaluate import result_row
    from negutils.report import methods_beside_paper

    results = results_frame([result_row("embedded", split, "m", "p", task, {"method": method, **metrics})
                             for method, split, task, metrics in (
                                 ("KTN", "val", "confusion_2c", {"mAP": 0.9}), ("KTN", "val", "mcq", {"accuracy": 0.5}),
                                 ("KTN", "ood", "mcq", {"accuracy": 0.25}),
                                 ("EC", "val", "confusion_2c", {"mAP": 0.7}))])
    table = methods_beside_paper(results, [("KTN", "Table 1", "KTN (ViT-B/32)"), ("EC", "Table 1", "EC (ViT-B/32)")])
    ktn = table[table["method"] == "KTN"].set_index("benchmark")
    assert ktn.loc["coco_confusion_2c", "paper value"] == 82.8 and ktn.loc["coco_confusion_2c", "ours"] == 90.0
    assert ktn.loc["negbench_mcq_voc", "ours"] == 25.0 and ktn.loc["negbench_mcq_coco", "ours"] == 50.0
    assert list(table[table["method"] == "EC"]["benchmark"]) == ["coco_confusion_2c"]   # only what EC has
