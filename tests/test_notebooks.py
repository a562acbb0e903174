"""The whole notebook suite on the smoke profile through papermill, then the offline book build."""
import json
import re

import pytest

from negutils import run as runner


@pytest.fixture(scope="module")
def smoke_book(tmp_path_factory):
    out = tmp_path_factory.mktemp("book")
    return runner.run("smoke", book_out=out), out


@pytest.mark.notebooks
def test_every_notebook_executes_without_errors(smoke_book):
    result, _ = smoke_book
    executed = sorted((result["stage"] / runner.CHAPTER_DIR).glob("*.ipynb"))
    assert [p.stem for p in executed] == [s.stem for s in runner.notebook_sources()]
    for path in executed:
        nb = json.loads(path.read_text())
        errors = [o for c in nb["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
        assert not errors, f"{path.name}: {errors[0]['ename']}: {errors[0]['evalue']}"
        injected = [c for c in nb["cells"] if "injected-parameters" in c.get("metadata", {}).get("tags", [])]
        assert injected and "profile = \"smoke\"" in "".join(injected[0]["source"])


@pytest.mark.notebooks
def test_book_builds_offline_with_chapter_figures(smoke_book):
    result, out = smoke_book
    assert result["index"] == out / "_build" / "html" / "index.html" and result["index"].exists()
    chapter = out / "_build" / "html" / "chapters" / "00_world_and_backbone.html"
    html = chapter.read_text()
    assert len(re.findall(r"<img [^>]*src=\"[^\"]+\.png\"", html)) >= 4
    assert "Zero-shot retrieval" in html
    chapter01 = (out / "_build" / "html" / "chapters" / "01_data_construction.html").read_text()
    assert len(re.findall(r"<img [^>]*src=\"[^\"]+\.png\"", chapter01)) >= 4
    assert "Beside the papers" in chapter01
    chapter02 = (out / "_build" / "html" / "chapters" / "02_representational_collapse.html").read_text()
    assert len(re.findall(r"<img [^>]*src=\"[^\"]+\.png\"", chapter02)) >= 8
    assert "Verdicts" in chapter02 and "reproduced" in chapter02
    chapter03 = (out / "_build" / "html" / "chapters" / "03_peakpatch.html").read_text()
    assert len(re.findall(r"<img [^>]*src=\"[^\"]+\.png\"", chapter03)) >= 5
    assert "Ablations" in chapter03
    chapter04 = (out / "_build" / "html" / "chapters" / "04_ktn.html").read_text()
    assert len(re.findall(r"<img [^>]*src=\"[^\"]+\.png\"", chapter04)) >= 3 and "Verdicts" in chapter04
    chapter05 = (out / "_build" / "html" / "chapters" / "05_lcse.html").read_text()
    assert len(re.findall(r"<img [^>]*src=\"[^\"]+\.png\"", chapter05)) >= 2 and "closed forms" in chapter05
    chapter06 = (out / "_build" / "html" / "chapters" / "06_benchmark_tables.html").read_text()
    assert len(re.findall(r"<img [^>]*src=\"[^\"]+\.png\"", chapter06)) >= 1 and "One table no paper has" in chapter06
    assert "PeakPatch, Table 13" in chapter06 and ("#d8f0d8" in chapter06 or "#f6c6c6" in chapter06)
    chapter07 = (out / "_build" / "html" / "chapters" / "07_negation_rate.html").read_text()
    assert len(re.findall(r"<img [^>]*src=\"[^\"]+\.png\"", chapter07)) >= 3 and "Verdicts" in chapter07
    appendix = (out / "_build" / "html" / "chapters" / "90_performance.html").read_text()
    assert len(re.findall(r"<img [^>]*src=\"[^\"]+\.png\"", appendix)) >= 2 and "All ratios" in appendix
    bibliography = (out / "_build" / "html" / "bibliography.html").read_text()
    assert "vision-language models do not understand negation" in bibliography.lower()
    # every figure of every chapter carries a caption
    for page in sorted((out / "_build" / "html" / "chapters").glob("*.html")):
        html = page.read_text()
        images = len(re.findall(r"<img [^>]*src=\"[^\"]+\.png\"", html))
        captions = html.count("<figcaption")
        assert captions >= images, f"{page.name}: {images} figures, {captions} captions"


@pytest.mark.notebooks
def test_notebook_results_are_csv(smoke_book):
    from negutils.config import get_profile
    from negutils.core import read_results

    retrieval = read_results(get_profile("smoke"), "00_zero_shot_retrieval")
    assert {"dataset", "split", "model", "pretrained", "task", "t2i_R@5", "chance_R@5"} <= set(retrieval.columns)
    vanilla = read_results(get_profile("smoke"), "01_vanilla")
    assert {"mcq", "retrieval_negated", "factor_operator", "valse_existence"} <= set(vanilla["task"])
    assert vanilla[vanilla.task == "mcq"]["questions"].gt(0).all()
    layers = read_results(get_profile("smoke"), "02_layer_selection").iloc[0]
    assert 1 <= layers["l_a"] <= layers["l_p"] <= 12 and "argmax D_LCD" in layers["reason"]
    verdicts = read_results(get_profile("smoke"), "02_verdicts")
    assert set(verdicts["verdict"]) <= {"reproduced", "partly", "not reproduced"} and len(verdicts) >= 10
    peakpatch = read_results(get_profile("smoke"), "03_results")
    methods = set(peakpatch["method"])
    assert {"vanilla", "PeakPatch (joint)", "ECN only", "SCN only", "w/o anchor", "Detached SCN"} <= methods
    assert any(m.startswith("NegFull alpha=") for m in methods)
    assert {"PeakPatch (joint) [hard-negatives]", "SCN only [mixed]"} <= methods
    protocols = read_results(get_profile("smoke"), "03_protocol_table")
    assert set(protocols["protocol"]) == {"frozen", "negbench", "hard-negatives", "mixed"}
    alphas = read_results(get_profile("smoke"), "03_negfull_alphas")
    assert alphas.groupby("protocol")["chosen"].sum().eq(1).all()
    assert read_results(get_profile("smoke"), "03_peakpatch_design")["chosen"].sum() == 1
    assert set(read_results(get_profile("smoke"), "03_verdicts")["verdict"]) <= {"reproduced", "partly", "not reproduced"}
    ktn = read_results(get_profile("smoke"), "04_results")
    assert {"vanilla", "EC", "EC (direction)", "KTN", "KTN (projection only)", "KTN on PeakPatch ECN"} <= set(
        ktn["method"])
    assert {"confusion_2c", "factor_operator", "mcq"} <= set(ktn["task"])
    coverage = read_results(get_profile("smoke"), "04_parser_coverage")
    assert coverage["unparsed"].between(0, 1).all() and "NegBench MCQ" in set(coverage["benchmark"])
    unified = read_results(get_profile("smoke"), "06_unified")
    assert {"vanilla", "KTN", "LCSE", "PeakPatch (joint)"} <= set(unified["method"])
    assert (unified["low"] <= unified["value"] + 1e-9).all() and (unified["value"] <= unified["high"] + 1e-9).all()
    times = read_results(get_profile("smoke"), "notebook_times")
    assert list(times["notebook"]) == [s.stem for s in runner.notebook_sources()]
    rates = read_results(get_profile("smoke"), "07_measures")
    assert list(rates["rate"]) == list(get_profile("smoke").negation_rate.pilot_rates)
    assert read_results(get_profile("smoke"), "07_captions")["false negations"].eq(0).all()
    assert set(read_results(get_profile("smoke"), "07_verdicts")["verdict"]) <= {"reproduced", "partly", "not reproduced"}
    lcse = read_results(get_profile("smoke"), "05_results")
    retention = lcse[(lcse.task == "retention")].set_index("method")
    assert retention.loc["vanilla", "rho"] == 1.0 and retention["rho"].between(-1, 1).all()
    assert set(read_results(get_profile("smoke"), "05_verdicts")["verdict"]) <= {"reproduced", "partly", "not reproduced"}


def test_a_failing_cell_names_the_notebook_and_cell(tmp_path):
    source = tmp_path / "99_broken.md"
    source.write_text("---\njupytext:\n  text_representation:\n    format_name: myst\nkernelspec:\n"
                      "  name: python3\n  display_name: Python 3\n---\n\n# Broken\n\n"
                      "```{code-cell} ipython3\n:tags: [parameters]\n\nprofile = 'cpu'\n```\n\n"
                      "```{code-cell} ipython3\nraise ValueError('bad caption: \"\"')\n```\n")
    with pytest.raises(runner.NotebookFailed, match=r"99_broken\.md failed in cell \d+ .*ValueError: bad caption"):
        runner.execute_notebook(source, tmp_path / "out.ipynb", {"profile": "smoke"}, cwd=tmp_path)


def test_unknown_notebook_is_rejected():
    with pytest.raises(ValueError, match="no notebook named"):
        runner.notebook_sources(["42_missing"])


def test_parameters_parse_like_papermill():
    assert runner._parse_parameter("backbone=ViT-B-32") == ("backbone", "ViT-B-32")
    assert runner._parse_parameter("rate=0.01") == ("rate", 0.01)
    with pytest.raises(ValueError, match="name=value"):
        runner._parse_parameter("oops")


def test_a_notebook_without_a_parameters_cell_is_refused(tmp_path):
    source = tmp_path / "98_no_parameters.md"
    source.write_text("---\njupytext:\n  text_representation:\n    format_name: myst\n---\n\n# No parameters\n\n"
                      "```{code-cell} ipython3\nprofile = 'cpu'\n```\n")
    with pytest.raises(runner.NotebookFailed, match=r"98_no_parameters\.md has no code cell tagged 'parameters'"):
        runner.execute_notebook(source, tmp_path / "out.ipynb", {"profile": "smoke"}, cwd=tmp_path)


def test_every_chapter_has_exactly_one_parameters_cell_of_literals():
    import ast

    import jupytext

    for source in runner.notebook_sources():
        cells = [c for c in jupytext.read(source, fmt="md:myst").cells
                 if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]
        assert len(cells) == 1, f"{source.name}: {len(cells)} parameters cells"
        for node in ast.parse(cells[0].source).body:
            assert isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant), \
                f"{source.name}: parameters cell line {node.lineno} is not name = literal"


def test_an_only_run_keeps_the_other_staged_chapters(tmp_path):
    stage = tmp_path / "book_src"
    runner.stage_book(stage)
    (stage / runner.CHAPTER_DIR / "00_world_and_backbone.ipynb").write_text("{}")
    runner.stage_book(stage, keep_chapters=True)
    assert (stage / runner.CHAPTER_DIR / "00_world_and_backbone.ipynb").read_text() == "{}"
    assert (stage / "_toc.yml").exists()
    runner.stage_book(stage)
    assert not any((stage / runner.CHAPTER_DIR).iterdir())


def test_notebook_times_are_recorded_as_they_come(tmp_path):
    times_csv = tmp_path / "notebook_times.csv"
    runner._record_times(times_csv, [{"profile": "cpu", "notebook": "00_a", "seconds": 1.0},
                                     {"profile": "cpu", "notebook": "01_b", "seconds": 2.0}], keep_others=False)
    runner._record_times(times_csv, [{"profile": "cpu", "notebook": "01_b", "seconds": 5.0}], keep_others=True)
    import pandas as pd
    assert pd.read_csv(times_csv).set_index("notebook")["seconds"].to_dict() == {"00_a": 1.0, "01_b": 5.0}
    runner._record_times(times_csv, [{"profile": "cpu", "notebook": "00_a", "seconds": 3.0}], keep_others=False)
    assert pd.read_csv(times_csv)["notebook"].tolist() == ["00_a"]
