"""Chapter 06's tables: which of our methods answers which paper row, and in which unit."""
import pandas as pd
import pytest

from negutils.methods.negfull import choose_alpha
from negutils.report import (BOOK_TABLES, NEGFULL, agreement_summary, beside_table, best_negfull,
                             highlight_differences, paper_numbers)
from negutils.report.paper_tables import differences, our_values


def _results():
    rows = []
    for method, mcq, neg in (("vanilla", 0.40, 0.06), ("NegFull alpha=0.5", 0.30, 0.20),
                             ("NegFull alpha=0.9", 0.35, 0.25), ("PeakPatch (joint)", 0.70, 0.60),
                             ("LCSE", 0.60, 0.5)):
        rows.append({"dataset": "embedded", "split": "val", "task": "mcq", "method": method, "accuracy": mcq,
                     "negative_accuracy": neg})
        rows.append({"dataset": "embedded", "split": "val", "task": "factor_operator", "method": method,
                     "accuracy": 0.5, "accuracy[NOT]": 0.3, "accuracy[NEITHER]": 0.6, "accuracy[BUT-NOT]": 0.9})
    return pd.DataFrame(rows)


def test_our_numbers_land_under_the_paper_rows_in_percent():
    table = beside_table("PeakPatch", "Table 1", {"organism": our_values(_results())})
    peak = table[(table.row == "PeakPatch") & (table.source == "organism")].iloc[0]
    assert peak["method"] == "PeakPatch (joint)" and peak["COCO Avg"] == pytest.approx(70.0)
    assert peak["COCO Neg"] == pytest.approx(60.0) and pd.isna(peak["VOC Avg"])
    # models the book does not train keep only the paper line
    assert list(table[table.row == "NegCLIP"]["source"]) == ["paper"]


def _selection():
    return choose_alpha(pd.DataFrame({"protocol": ["negbench"] * 2 + ["mixed"] * 2,
                                      "method": ["NegFull alpha=0.5", "NegFull alpha=0.9", "m0.5", "m0.9"],
                                      "held-out MCQ accuracy": [0.8, 0.6, 0.5, 0.7]}))


def test_clip_plus_negfull_is_the_alpha_chosen_on_held_out_data_not_on_val():
    selection = _selection()
    assert list(selection["chosen"]) == [True, False, False, True]
    # alpha=0.5 wins on held-out negtrain NegMCQ although alpha=0.9 has the better val MCQ
    assert best_negfull(selection) == "NegFull alpha=0.5" and best_negfull(selection, "mixed") == "m0.9"
    assert best_negfull(selection, "hard-negatives") is None
    ours = our_values(_results(), negfull=best_negfull(selection))
    assert ours[(ours.method == NEGFULL) & (ours.metric == "accuracy") & (ours.benchmark == "negbench_mcq_coco")][
        "value"].item() == 0.30
    ours = our_values(_results(), negfull="NegFull alpha=0.9")
    table = beside_table("PeakPatch", "Table 1", {"organism": ours})
    assert table[(table.row == "CLIP + NF") & (table.source == "organism")]["COCO Avg"].item() == pytest.approx(35.0)


def test_the_anti_monotone_average_is_over_its_three_operators():
    ours = our_values(_results())
    value = ours[(ours.method == "LCSE") & (ours.metric == "anti_monotone_accuracy")]["value"].item()
    assert value == pytest.approx((0.3 + 0.6 + 0.9) / 3)


def test_differences_and_highlighting():
    table = beside_table("PeakPatch", "Table 1", {"organism": our_values(_results(), negfull="NegFull alpha=0.9")})
    delta = differences(table)
    peak = table.index[(table.row == "PeakPatch") & (table.source == "organism")][0]
    assert delta.loc[peak, "COCO Avg"] == pytest.approx(70.0 - 74.3)
    assert delta[table.source == "paper"].isna().all().all()
    html = highlight_differences(table).to_html()
    assert "#d8f0d8" in html and "#f6c6c6" in html   # PeakPatch avg within 5 points; CLIP + NF far
    summary = agreement_summary({("PeakPatch", "Table 1"): table})
    assert summary["cells"].item() == (delta.notna().to_numpy().sum())


def test_every_book_table_has_paper_numbers():
    numbers = paper_numbers()
    for paper, table in BOOK_TABLES:
        assert len(numbers[(numbers.paper == paper) & (numbers.table == table)]), (paper, table)
    with pytest.raises(ValueError, match="no numbers for PeakPatch Table 99"):
        beside_table("PeakPatch", "Table 99", {})


def test_table_2s_trained_rows_take_the_lines_of_methods_trained_on_the_same_kind_of_data(tmp_path, monkeypatch):
    from negutils.config import get_profile
    from negutils.core.results import write_results
    from negutils.report import table2_pairs, training_domain

    retrieval = pd.DataFrame([{"dataset": "coco", "split": "val", "task": "retrieval_negated", "method": m,
                               "R@1": r1, "R@5": r5}
                              for m, r1, r5 in (("PeakPatch (joint)", 0.3, 0.6), ("NegFull alpha=0.5", 0.2, 0.5))])
    ours = our_values(pd.concat([_results(), retrieval], ignore_index=True), negfull="NegFull alpha=0.5")
    table = beside_table("PeakPatch", "Table 2", {"coco": ours, "cc12m": ours}, {"cc12m": "w/o COCO"})

    def lines(row):
        return set(table[table.row == row]["source"])
    assert lines("PeakPatch (COCO in-domain)") == {"paper", "coco"}
    assert lines("PeakPatch (w/o COCO)") == lines("CLIP + NF (w/o COCO)") == {"paper", "cc12m"}
    assert table[(table.row == "PeakPatch (w/o COCO)") & (table.source == "cc12m")]["COCO R@5"].item() == \
        pytest.approx(60.0)
    # chapter 03's pairs for the same rule: CLIP, then the rows of its training data
    assert table2_pairs("NegFull alpha=0.5", "in-domain") == [
        ("vanilla", "Table 10", "CLIP"), ("PeakPatch (joint)", "Table 2", "PeakPatch (COCO in-domain)")]
    assert table2_pairs("NegFull alpha=0.5", "w/o COCO")[1:] == [
        ("PeakPatch (joint)", "Table 2", "PeakPatch (w/o COCO)"),
        ("NegFull alpha=0.5", "Table 2", "CLIP + NF (w/o COCO)")]
    assert len(table2_pairs(None, "w/o COCO")) == 2
    monkeypatch.setenv("NEGBOOK_ARTIFACTS", str(tmp_path))
    profile = get_profile("smoke")
    for source, domain in (("NegBench's released CC12M-NegCap / CC12M-NegMCQ, 30 images", "w/o COCO"),
                           ("COCO train2017 (negtrain subset), 40 images", "in-domain")):
        write_results(pd.DataFrame({"part": ["NegMCQ questions"], "rows": [3], "images": [3], "source": [source]}),
                      profile, "03_training_data")
        assert training_domain(profile) == domain
