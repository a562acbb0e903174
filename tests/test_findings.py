"""The chapters' Findings boxes and the intro's headline: every number read from the results, every
claim linked to the section that shows it, refused when a number is not in the results."""
import re

import pandas as pd
import pytest

from negutils import run as runner
from negutils.experiments.negation_rate import RATE_CLAIMS
from negutils.report import findings as fd
from negutils.report.verdicts import COLLAPSE_CLAIMS, KTN_CLAIMS, LCSE_CLAIMS, PEAKPATCH_CLAIMS


def verdict_table(rows):
    return pd.DataFrame(rows, columns=["claim", "source", "paper", "ours", "rule", "verdict", "section"])


VERDICTS_03 = verdict_table([
    ("NegFull raises MCQ", "NegBench Table 1; PeakPatch Table 1", "39.2 -> 54.2", "36.9 -> 43.1", "r", "reproduced",
     "ch03-mcq"),
    ("Joint beats single modules", "PeakPatch Table 5", "74.3 vs 51.2", "55.4 vs 41.4", "r", "reproduced", None),
    ("Keeps retrieval with beta_c-*", "PeakPatch sec. 3.3", "small", "R@5 61.5 -> 25.3", "r", "not reproduced",
     "ch03-retrieval"),
    ("Neg template rises", "PeakPatch Table 1", "6.6 -> 33.2", "0.9 -> 0.5", "r", "partly", "ch03-mcq"),
    ("Tracks the peak", "PeakPatch sec. 3.2", "n/a", "missing: rho", "r", "not measured", "ch03-mcq"),
])


def test_a_number_is_in_the_results_only_as_a_cell_a_percentage_a_count_or_a_row_count():
    results = {"03_results": pd.DataFrame({"accuracy": [0.3685, 0.5536]}), "03_verdicts": VERDICTS_03}
    assert fd.numbers_not_in_results("36.9% and 55.4%, raw 0.3685", results) == []      # fractions as percentages
    assert fd.numbers_not_in_results("ours 36.9 -> 43.1, paper 74.3", results) == []    # numbers inside text cells
    assert fd.numbers_not_in_results("2 of 5 claims reproduced", results) == []        # a value count, a row count
    assert fd.numbers_not_in_results("R@5 61.5; 10,000 images", results) == ["10000"]
    # a typed number, a wrong rounding and a number no cell gives are all caught
    assert fd.numbers_not_in_results("40.0% and 36.8% and 7 claims", results) == ["40.0", "36.8", "7"]


TRAINING_03 = pd.DataFrame({"part": ["affirmative captions", "NegCap captions (true)",
                                     "present-object negations (false)", "NegMCQ questions",
                                     "counterpart MCQs (App. 0.J)"],
                            "rows": [10, 30, 4, 10, 4], "images": [10, 10, 4, 10, 4],
                            "source": "COCO train2017 (negtrain subset), 11 images"})


def test_a_verdict_chapters_box_counts_its_verdicts_and_links_each_claim_to_its_section():
    evidence = {"03_retrieval_without_delta": pd.DataFrame({"scorer": ["vanilla", "PeakPatch (joint)",
                                                                       "its ECN alone (no Delta s)"],
                                                            "R@5": [62.1, 26.7, 55.0], "R-Neg@5": [42.9, 5.9, 30.0]}),
                "03_delta_decomposition": pd.DataFrame({"method": ["SCN only", "PeakPatch (joint)"],
                                                        "image share": [0.5, 0.25]})}
    findings = fd.chapter_findings("03_peakpatch", {"03_verdicts": VERDICTS_03, "03_training_data": TRAINING_03,
                                                    **evidence})
    # chapter 03's box says first what PeakPatch and NegFull learned from and what its retrieval measurements
    # found, then one claim held and one not
    assert (findings[0].text, findings[0].section) == (
        "PeakPatch and NegFull trained on COCO train2017 (negtrain subset), 11 images (10 images with training "
        "data: 30 NegCap captions, 10 NegMCQ questions).", "ch03-data")
    assert findings[1].text == ("PeakPatch (joint) retrieves at R@5 26.7 with its Delta s and 55.0 with its ECN "
                                "alone; the image part is 25.0% of Delta s's variance on the gallery.")
    assert findings[1].section == "ch03-retrieval-collapse"
    findings = findings[2:]
    assert findings[0].text == ("Of the 5 claims tested on this backbone: 2 reproduced, 1 partly, 1 not reproduced, "
                                "1 not measured.")
    assert findings[0].section == "ch03-verdicts"
    shown = [(f.text.split(":*")[0], f.section) for f in findings[1:]]
    # two that hold, then the failures, not-reproduced before partly; a claim without a section links
    # to the verdict table
    assert shown == [("*Reproduced", "ch03-mcq"), ("*Not reproduced", "ch03-retrieval")]
    assert r"beta\_c-\*" in findings[2].text          # markup in a claim is printed, not interpreted
    box = fd.findings_markdown(findings, "cpu")
    assert box.startswith("```{admonition} Findings") and box.count("{ref}`details <") == len(findings)
    assert "profile `cpu`" in box and "Smoke run" not in box
    smoke = fd.findings_markdown(findings, "smoke", smoke=True)
    assert "Smoke run" in smoke and "not the papers' claims" in smoke
    plain = fd.findings_markdown(findings, "cpu", myst=False)
    assert plain.startswith("**Findings**") and "{ref}" not in plain


def test_a_box_with_a_number_that_is_not_in_the_results_is_refused(monkeypatch):
    typed = [fd.Finding("The vanilla model scores 39.2% on MCQ.", "ch01-vanilla"),
             fd.Finding("The organism scores 36.9%.", "ch01-vanilla")]
    monkeypatch.setitem(fd.CHAPTER_FINDINGS, "01", lambda read, profile: typed)
    results = {"01_vanilla": pd.DataFrame({"accuracy": [0.3685]})}
    with pytest.raises(fd.FindingsError, match=r"print numbers that are in none of its results files: \['39.2'\]"):
        fd.checked_findings("01_data_construction", results)
    assert fd.checked_findings("01_data_construction", {**results, "01_papers": pd.DataFrame({"v": [39.2]})}) == typed


def test_a_chapter_whose_results_table_is_missing_is_named():
    with pytest.raises(fd.FindingsError, match=r"chapter 06's findings need its results table '06_leaders'"):
        fd.chapter_findings("06_benchmark_tables", {"06_unified": pd.DataFrame()})
    with pytest.raises(fd.FindingsError, match="not a chapter name"):
        fd.chapter_findings("peakpatch", {})


def test_the_headline_tables_leaders_and_counts_verdicts_per_paper_named_in_their_source(tmp_path):
    assert "run `make book`" in fd.book_headline(tmp_path, "cpu")          # nothing run yet: said, not invented
    pd.DataFrame([{"benchmark": "MCQ val", "best": "LCSE", "value": 82.1, "interval": "[80.3, 83.8]",
                   "runner-up": "EC", "settled": False},
                  {"benchmark": "R-Neg@5", "best": "KTN", "value": 56.3, "interval": "[54.4, 58.5]",
                   "runner-up": "LCSE", "settled": True}]).to_csv(tmp_path / "06_leaders.csv", index=False)
    VERDICTS_03.to_csv(tmp_path / "03_verdicts.csv", index=False)
    verdict_table([("LCSE helps", "LCSE Table 2", "1", "2", "r", "reproduced", None)]).to_csv(
        tmp_path / "05_verdicts.csv", index=False)
    counts = fd.verdicts_by_paper(tmp_path).set_index("paper")
    assert counts.loc["PeakPatch", "claims"] == 5 and counts.loc["PeakPatch", "reproduced"] == 2
    assert counts.loc["NegBench", "claims"] == 1 and counts.loc["LCSE", "reproduced"] == 1
    assert counts.loc["KTN", "claims"] == 0
    headline = fd.book_headline(tmp_path, "cpu")
    assert "| MCQ val | LCSE | 82.1 \\[80.3, 83.8\\] | EC | no |" in headline
    assert "| R-Neg@5 | KTN | 56.3 \\[54.4, 58.5\\] | LCSE | yes |" in headline
    assert "| PeakPatch | 5 | 2 | 1 | 1 | 1 |" in headline
    assert "chapters/06_benchmark_tables" in headline and "chapters/07_negation_rate" in headline
    assert "Chapters 02, 04, 07 have not run" in headline


def _labels(notebook: str) -> set[str]:
    return set(re.findall(r"^\(([\w-]+)\)=$", (runner.NOTEBOOK_DIR / f"{notebook}.md").read_text(), re.M))


def test_every_claim_links_to_a_section_its_chapter_defines():
    chapters = {"02": COLLAPSE_CLAIMS, "03": PEAKPATCH_CLAIMS, "04": KTN_CLAIMS, "05": LCSE_CLAIMS, "07": RATE_CLAIMS}
    notebooks = {s.stem[:2]: s.stem for s in runner.notebook_sources()}
    for chapter, claims in chapters.items():
        labels = _labels(notebooks[chapter])
        assert f"ch{chapter}-verdicts" in labels, chapter
        missing = [(c.text, c.section) for c in claims if c.section not in labels]
        assert not missing, f"{notebooks[chapter]}: {missing}"


def test_every_chapter_opens_with_the_pasted_box_and_computes_it_in_its_last_cell():
    for source in runner.notebook_sources():
        cells = runner.read_notebook(source).cells
        first = next(c for c in cells if c.cell_type == "markdown")
        assert first.source.startswith("# ") or first.source.startswith("(")
        assert f"```{{glue:md}} {fd.GLUE_KEY}\n:format: myst\n```" in first.source, source.name
        last = cells[-1]
        assert last.cell_type == "code" and "remove-cell" in last.metadata.get("tags", []), source.name
        assert f'show_findings("{source.stem}", prof)' in last.source, source.name


def test_the_appendix_names_the_slowest_chapter_of_its_own_profile():
    times = pd.DataFrame({"profile": ["cpu", "cpu", "gpu-dryrun"], "notebook": ["00_world", "03_peakpatch", "03_x"],
                          "seconds": [691.6, 451.7, 900.0]})
    ratios = pd.DataFrame(columns=["area", "measure", "ratio", "ratio of"])
    results = {"90_notebook_times": times, "90_ratios": ratios}
    first = fd.chapter_findings("90_performance", results, "cpu")[0]
    assert "`00_world` at 692 s" in first.text and first.section == "ch90-times"
    assert "`03_x` at 900 s" in fd.chapter_findings("90_performance", results, "gpu-dryrun")[0].text


def test_the_latency_sentence_gives_each_method_its_costliest_ratio_at_the_largest_gallery():
    measures = ("EC", "KTN", "LCSE")
    ratios = pd.DataFrame({"area": "query latency", "ratio of": "seconds over holistic cosine's",
                           "measure": [f"{m} vs holistic, {n:,} images" for n in (10000, 500000, 500000)
                                       for m in measures],
                           "ratio": [1.4, 1.5, 1.6, 1.01, 1.2, 1.05, 0.99, 1.1, 1.08]})
    results = {"90_notebook_times": pd.DataFrame(columns=["profile", "notebook", "seconds"]), "90_ratios": ratios}
    (latency,) = [f for f in fd.chapter_findings("90_performance", results, "cpu") if f.section == "ch90-latency"]
    assert "At 500,000 images" in latency.text and "EC 1.01, KTN 1.20, LCSE 1.08." in latency.text


def test_the_opening_words_of_chapter_00_follow_its_numbers():
    def world(r5, untrained_r5):
        retrieval = pd.DataFrame({"split": ["val", "val"], "pretrained": ["negbook-pretrain", "untrained"],
                                  "gallery": [1973, 1973], "t2i_R@5": [r5, untrained_r5],
                                  "chance_R@5": [0.0025, 0.0025]})
        recognition = pd.DataFrame({"pretrained": ["negbook-pretrain"], "mean detection AUC": [0.88],
                                    "zero-shot accuracy": [0.86], "chance accuracy": [0.0417]})
        targets = pd.DataFrame({"measure": ["a", "b"], "met": [True, False]})
        cosines = pd.DataFrame({"pair": ["a X vs no X", "a X vs a Y"], "cosine": [0.95, 0.80]})
        return fd.chapter_findings("00_world", {"00_zero_shot_retrieval": retrieval, "00_object_recognition":
                                                recognition, "00_organism_targets": targets,
                                                "00_negation_cosines": cosines})
    assert world(0.62, 0.002)[0].text.startswith("Pretraining lifts retrieval")
    assert world(0.063, 0.047)[0].text.startswith("Pretraining barely lifts retrieval")
    assert "1 of 2 of the targets" in world(0.62, 0.002)[1].text


def test_the_run_line_names_the_parameters_the_runner_gave(monkeypatch):
    findings = [fd.Finding("One.", "a"), fd.Finding("Two.", "b")]
    monkeypatch.delenv(fd.RUN_PARAMETERS_VARIABLE, raising=False)
    assert fd.run_parameters() == {}                                    # papermill without the runner
    monkeypatch.setenv(fd.RUN_PARAMETERS_VARIABLE, '{"checkpoint": "/data/w/ViT-B-32-random.pt", "backbone": null}')
    given = fd.run_parameters()
    box = fd.findings_markdown(findings, "gpu", parameters=given)
    # a file is named by its name, and every parameter is shown, so the hidden papermill cell hides nothing
    assert box.endswith("Run with `backbone=None`, `checkpoint=ViT-B-32-random.pt`.\n```")
    assert "*Run:* profile `gpu`" in box
    assert "claims. Run with `backbone=None`" in fd.findings_markdown(findings, "smoke", smoke=True, parameters=given)
    monkeypatch.setenv(fd.RUN_PARAMETERS_VARIABLE, "checkpoint=x")
    with pytest.raises(fd.FindingsError, match="NEGBOOK_RUN_PARAMETERS is not a JSON object"):
        fd.run_parameters()


def test_the_glued_box_is_recorded_exactly_as_myst_nb_glue_records_it(monkeypatch):
    """show_findings glues without importing myst_nb (whose import every chapter would wait for); what
    the book build reads back must stay what myst-nb's own ``glue(..., display=False)`` writes."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.display import Markdown
    from myst_nb import glue

    shell = InteractiveShell.instance()
    published = []
    monkeypatch.setattr(shell.display_pub, "publish",
                        lambda data, metadata=None, **kwargs: published.append((data, metadata)))
    box = "```{admonition} Findings\n- 3 of 5 claims reproduced\n```"
    glue(fd.GLUE_KEY, Markdown(box), display=False)
    fd.glue_markdown(fd.GLUE_KEY, box)
    assert len(published) == 2
    assert published[0] == published[1]
    data, metadata = published[1]
    assert data[fd.GLUE_MIME_PREFIX + "text/markdown"] == box
    assert metadata["scrapbook"] == {"name": "findings", "mime_prefix": fd.GLUE_MIME_PREFIX}


def test_chapter_02s_box_reads_the_lcd_through_pretraining_when_the_run_had_snapshots():
    formed = pd.DataFrame({"step": [0, 440, 880], "D_LCD peak layer": [3, 1, 1], "interior peak": [True, False, False]})
    findings = fd.chapter_findings("02_representational_collapse", {"02_verdicts": VERDICTS_03,
                                                                     "02_lcd_formation": formed})
    assert findings[0].text == ("Through pretraining (steps 0 to 880), D_LCD's peak moves from layer 3 to layer 1; "
                                "an interior peak appears at 1 of 3 snapshots.")
    assert findings[0].section == "ch02-formation" and len(findings) == 5      # one claim fewer
    without = fd.chapter_findings("02_representational_collapse", {"02_verdicts": VERDICTS_03})
    assert without[0].text.startswith("Of the 5 claims") and len(without) == 5
