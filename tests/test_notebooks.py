"""The whole notebook suite on the smoke profile through papermill, then the offline book build.

The run writes under a temporary artifacts root (``NEGBOOK_ARTIFACTS``, which the notebook kernels
inherit), never into the repository's ``artifacts/``; every read below goes through the same root."""
import ast
import os
import re
import shutil
from collections import defaultdict
from html import unescape
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from negutils import run as runner
from negutils.config import REPO_ROOT, get_profile
from negutils.report.verdicts import NOT_MEASURED
from negutils.core.results import read_results

from background_books import BOOKS, SMOKE_LAST
from conftest import findings_box, injected_parameters_of_every_chapter


@pytest.fixture(scope="module")
def smoke_book(smoke_artifacts, dry_run_book, book_runs):
    """The smoke book, run in the session's background (background_books.BookRuns): its chapter 06, which adds
    the dry run's line of the real path beside the papers, after the dry run."""
    assert get_profile("smoke").artifacts_dir() == smoke_artifacts / "smoke"
    result, out = book_runs.result(BOOKS["smoke_book"])
    assert result["stage"].is_relative_to(smoke_artifacts)
    # nothing of the run lands in the repository's own artifacts folder
    started = book_runs.first_started("smoke")
    written = [p for p in (REPO_ROOT / "artifacts").rglob("*") if p.is_file() and p.stat().st_mtime >= started]
    assert not written, f"the smoke run wrote into {REPO_ROOT / 'artifacts'}: {written[:5]}"
    return result, out


def smoke_results(name):
    return read_results(get_profile("smoke"), name)


def verdicts_agree(written, recomputed, at_least):
    """A chapter's written verdict table against the library's verdict function re-applied to the
    chapter's written numbers. Claims whose recomputed numbers print a missing input ("nan": a
    measure the chapter does not write) are skipped; on every other claim the printed numbers and
    the verdict must be the same."""
    shown = "ours"
    assert list(written["claim"]) == list(recomputed["claim"])
    known = (recomputed["verdict"] != NOT_MEASURED) & ~recomputed[shown].astype(str).str.contains("nan")
    assert known.sum() >= at_least, recomputed.loc[~known, ["claim", shown]]
    assert written.loc[known, shown].tolist() == recomputed.loc[known, shown].tolist()
    assert written.loc[known, "verdict"].tolist() == recomputed.loc[known, "verdict"].tolist()


@pytest.mark.notebooks
def test_every_notebook_executes_without_errors(smoke_book):
    result, _ = smoke_book
    for chapter, injected in injected_parameters_of_every_chapter(result).items():
        assert 'profile = "smoke"' in injected, chapter


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
    # the chapter's closing summary counts the verdicts its table wrote
    counts = re.search(r"Verdicts: (\{[^}]*\})", unescape(chapter02))
    assert counts, "chapter 02 prints no verdict counts"
    assert ast.literal_eval(counts.group(1)) == smoke_results("02_verdicts")["verdict"].value_counts().to_dict()
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
    assert "ViT-B-32 (gpu-dryrun)" in chapter06          # the dry run's line beside the organism's
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
        # papermill's injected cell (tag and "# Parameters" comment) is in the notebook, not on the page
        assert runner.INJECTED_TAG not in html and "# Parameters" not in unescape(re.sub(r"<[^>]+>", "", html)), \
            f"{page.name} renders papermill's injected-parameters cell"


def _findings_text(box: str) -> str:
    """The text of a Findings admonition's HTML, code spans (profile and model names) left out."""
    return unescape(re.sub(r"<[^>]+>", " ", re.sub(r"<code.*?</code>", " ", box, flags=re.S)))


@pytest.mark.notebooks
def test_every_chapter_opens_with_findings_whose_numbers_are_all_in_its_results(smoke_book):
    from negutils.report import findings as fd

    _, out = smoke_book
    results_dir = get_profile("smoke").artifacts_dir() / "results"
    for source in runner.notebook_sources():
        html = (out / "_build" / "html" / "chapters" / f"{source.stem}.html").read_text()
        box = findings_box(html)
        assert box, f"{source.stem} has no findings box"
        text = _findings_text(box)
        # the box is the first thing under the chapter's title
        assert re.search(r"</h1>\s*<div class=\"[^\"]*\bfindings\b", html), source.stem
        assert "Smoke run" in text, source.stem
        # the box names what the chapter's run was given: only 06 and the appendix ran with the dry run's line
        assert ("real_profile=gpu-dryrun" in html) == (source.stem in SMOKE_LAST), source.stem
        assert 3 <= box.count("<li>") <= 6, (source.stem, box.count("<li>"))
        results = fd.chapter_results(results_dir, fd.chapter_of(source.stem))
        assert fd.numbers_not_in_results(text, results) == [], (source.stem, text)
    intro = (out / "_build" / "html" / "intro.html").read_text()
    assert "The headline of this build" in intro and 'href="chapters/06_benchmark_tables.html"' in intro
    assert 'href="chapters/07_negation_rate.html"' in intro
    by_paper = fd.verdicts_by_paper(results_dir)
    assert by_paper["claims"].sum() >= 20
    rows = {unescape(cells[0]): cells[1:] for cells in (re.findall(r"<td[^>]*>\s*(?:<p>)?(.*?)(?:</p>)?\s*</td>", row)
                                              for row in re.findall(r"<tr[^>]*>(.*?)</tr>", intro, re.S)) if cells}
    for _, r in by_paper.iterrows():
        assert rows[r["paper"]] == [str(r["claims"])] + [str(r[v]) for v in fd.VERDICTS], r["paper"]
    leaders = smoke_results("06_leaders")
    assert all(b in rows for b in leaders["benchmark"]), sorted(rows)


@pytest.mark.notebooks
def test_notebook_results_are_csv(smoke_book):
    retrieval = smoke_results("00_zero_shot_retrieval")
    assert {"dataset", "split", "model", "pretrained", "task", "t2i_R@5", "chance_R@5"} <= set(retrieval.columns)
    vanilla = smoke_results("01_vanilla")
    assert {"mcq", "retrieval_negated", "factor_operator", "valse_existence"} <= set(vanilla["task"])
    assert vanilla[vanilla.task == "mcq"]["questions"].gt(0).all()
    layers = smoke_results("02_layer_selection").iloc[0]
    assert 1 <= layers["l_a"] <= layers["l_p"] <= 12 and "argmax D_LCD" in layers["reason"]
    peakpatch = smoke_results("03_results")
    methods = set(peakpatch["method"])
    assert {"vanilla", "PeakPatch (joint)", "ECN only", "SCN only", "w/o anchor", "Detached SCN"} <= methods
    assert any(m.startswith("NegFull alpha=") for m in methods)
    assert {"PeakPatch (joint) [hard-negatives]", "SCN only [mixed]"} <= methods
    protocols = smoke_results("03_protocol_table")
    assert set(protocols["protocol"]) == {"frozen", "negbench", "hard-negatives", "mixed"}
    alphas = smoke_results("03_negfull_alphas")
    assert alphas.groupby("protocol")["chosen"].sum().eq(1).all()
    assert smoke_results("03_peakpatch_design")["chosen"].sum() == 1
    ktn = smoke_results("04_results")
    assert {"vanilla", "EC", "EC (direction)", "KTN", "KTN (projection only)", "KTN on PeakPatch ECN"} <= set(
        ktn["method"])
    assert {"confusion_2c", "factor_operator", "mcq"} <= set(ktn["task"])
    coverage = smoke_results("04_parser_coverage")
    assert coverage["unparsed"].between(0, 1).all() and "NegBench MCQ" in set(coverage["benchmark"])
    unified = smoke_results("06_unified")
    assert {"vanilla", "KTN", "LCSE", "PeakPatch (joint)"} <= set(unified["method"])
    assert (unified["low"] <= unified["value"] + 1e-9).all() and (unified["value"] <= unified["high"] + 1e-9).all()
    times = smoke_results("notebook_times")
    assert list(times["notebook"]) == [s.stem for s in runner.notebook_sources()]
    rates = smoke_results("07_measures")
    assert list(rates["rate"]) == list(get_profile("smoke").negation_rate.pilot_rates)
    assert smoke_results("07_captions")["false negations"].eq(0).all()
    lcse = smoke_results("05_results")
    retention = lcse[(lcse.task == "retention")].set_index("method")
    assert retention.loc["vanilla", "rho"] == 1.0
    # retention's R@5 is affirmative retrieval's R@5 (same queries, any satisfying image counts)
    retrieval = lcse[(lcse.task == "retrieval") & (lcse.split == "val")].set_index("method")
    assert retention["R@5"].to_dict() == retrieval.loc[retention.index, "R@5"].to_dict()


@pytest.mark.notebooks
def test_written_verdicts_follow_from_the_written_numbers(smoke_book):
    """Each chapter's verdict table is what the library's verdict function gives on the numbers the
    chapter wrote next to it."""
    from negutils.diagnosis import dilution_summary, lemma1_summary, load_layer_choice
    from negutils.diagnosis.collapse import LcdAnalysis
    from negutils.diagnosis import bag_of_concepts as boc
    from negutils.experiments import rate_verdicts
    from negutils.methods import DEFAULT_PROTOCOL
    from negutils.methods import method_label
    from negutils.report import (best_negfull, collapse_measures, collapse_verdicts, ktn_verdicts, lcse_measures,
                                 lcse_verdicts, peakpatch_verdicts)

    # chapter 02: every measure but the negation direction's (its summary is not written) is rebuilt
    untrained = smoke_results("02_lcd_vs_untrained")
    lcd = LcdAnalysis(curves=smoke_results("02_lcd_curves"), choice=load_layer_choice(get_profile("smoke")),
                      probe=untrained[["layer"]].assign(**{"probe accuracy": untrained["probe trained"]}))
    measures = collapse_measures(lcd, untrained, smoke_results("02_concept_polarity"),
                                 smoke_results("02_ranking_similarity"),
                                 boc.winner_shares(smoke_results("02_quadrants")),
                                 smoke_results("02_span_residual"), smoke_results("02_null_alignment"),
                                 defaultdict(lambda: float("nan")), dilution_summary(smoke_results("02_dilution")))
    verdicts_agree(smoke_results("02_verdicts"), collapse_verdicts(measures), at_least=12)

    results03 = smoke_results("03_results")
    negfull = best_negfull(smoke_results("03_negfull_alphas"), DEFAULT_PROTOCOL)
    verdicts_agree(smoke_results("03_verdicts"), peakpatch_verdicts(results03, negfull), at_least=4)

    lemma = lemma1_summary(smoke_results("04_lemma1"))
    verdicts_agree(smoke_results("04_verdicts"), ktn_verdicts(smoke_results("04_results"), lemma), at_least=8)

    # chapter 05: every measure but the fitted mu and the present-concept similarity (not written)
    table2 = smoke_results("05_table2").set_index("method")
    measures05 = lcse_measures(smoke_results("05_results"), smoke_results("05_evidence_strata"),
                               smoke_results("05_calibration_ablation"), mu=float("nan"),
                               median_present_similarity=float("nan"),
                               factor_oracle=table2.loc[method_label("lcse"), "FACTOR"],
                               factor_parser=table2.loc[method_label("lcse_parser"), "FACTOR"])
    verdicts_agree(smoke_results("05_verdicts"), lcse_verdicts(measures05), at_least=8)

    verdicts_agree(smoke_results("07_verdicts"),
                   rate_verdicts(smoke_results("07_measures"), smoke_results("07_methods")), at_least=3)


@pytest.mark.notebooks
def test_notebook_kernels_run_this_checkout_under_the_temporary_root(smoke_artifacts, tmp_path):
    source = tmp_path / "97_where.md"
    source.write_text("---\njupytext:\n  text_representation:\n    format_name: myst\n---\n\n# Where\n\n"
                      "```{code-cell} ipython3\n:tags: [parameters]\n\nprofile = 'cpu'\n```\n\n"
                      "```{code-cell} ipython3\nimport pathlib, negutils\nfrom negutils.config import get_profile\n"
                      "pathlib.Path('where.txt').write_text(negutils.__file__ + '\\n' + "
                      "str(get_profile(profile).artifacts_dir()))\n```\n")
    runner.execute_notebook(source, tmp_path / "out.ipynb", {"profile": "smoke"}, cwd=tmp_path, progress=False)
    module, artifacts = (tmp_path / "where.txt").read_text().splitlines()
    assert module == str(REPO_ROOT / "negutils" / "__init__.py") and artifacts == str(smoke_artifacts / "smoke")


def test_a_failing_cell_names_the_notebook_and_cell(tmp_path):
    source = tmp_path / "99_broken.md"
    source.write_text("---\njupytext:\n  text_representation:\n    format_name: myst\nkernelspec:\n"
                      "  name: python3\n  display_name: Python 3\n---\n\n# Broken\n\n"
                      "```{code-cell} ipython3\n:tags: [parameters]\n\nprofile = 'cpu'\n```\n\n"
                      "```{code-cell} ipython3\nraise ValueError('bad caption: \"\"')\n```\n")
    with pytest.raises(runner.NotebookFailed, match=r"99_broken\.md failed in cell \d+ .*ValueError: bad caption"):
        runner.execute_notebook(source, tmp_path / "out.ipynb", {"profile": "smoke"}, cwd=tmp_path)


def test_the_injected_parameters_cell_is_kept_but_hidden_from_the_book(tmp_path):
    """papermill's ``# Parameters`` cell stays in the executed notebook (it records what the run was
    given) and carries ``remove-cell``, so the page does not show the setting twice."""
    import nbformat

    source = tmp_path / "97_tiny.md"
    source.write_text("---\njupytext:\n  text_representation:\n    format_name: myst\nkernelspec:\n"
                      "  name: python3\n  display_name: Python 3\n---\n\n# Tiny\n\n"
                      "```{code-cell} ipython3\n:tags: [parameters]\n\nprofile = 'cpu'\n```\n\n"
                      "```{code-cell} ipython3\nprint(profile)\n```\n")
    out = tmp_path / "out.ipynb"
    runner.execute_notebook(source, out, {"profile": "smoke"}, cwd=tmp_path, progress=False)
    cells = nbformat.read(out, as_version=4).cells
    injected = [c for c in cells if runner.INJECTED_TAG in c.metadata.get("tags", [])]
    assert len(injected) == 1 and "profile = \"smoke\"" in injected[0].source
    assert runner.HIDDEN_TAG in injected[0].metadata["tags"]
    shown = [c for c in cells if runner.HIDDEN_TAG not in c.metadata.get("tags", [])]
    assert [c.metadata.get("tags", []) for c in shown if c.cell_type == "code"] == [["parameters"], []]
    assert shown[-1].outputs[0]["text"] == "smoke\n"      # the injected value, not the default, was used


def test_unknown_notebook_is_rejected():
    with pytest.raises(ValueError, match="no notebook named"):
        runner.notebook_sources(["42_missing"])


def test_a_parameter_splits_at_its_first_equals_sign_and_keeps_its_text_for_typing():
    assert runner._parse_parameter("backbone=ViT-B-32") == ("backbone", "ViT-B-32")
    assert runner._parse_parameter("rate=0.01") == ("rate", "0.01")      # typed by its parameters cell later
    with pytest.raises(ValueError, match="name=value"):
        runner._parse_parameter("oops")


def test_a_notebook_without_a_parameters_cell_is_refused(tmp_path):
    source = tmp_path / "98_no_parameters.md"
    source.write_text("---\njupytext:\n  text_representation:\n    format_name: myst\n---\n\n# No parameters\n\n"
                      "```{code-cell} ipython3\nprofile = 'cpu'\n```\n")
    with pytest.raises(runner.NotebookFailed, match=r"98_no_parameters\.md has no code cell tagged 'parameters'"):
        runner.execute_notebook(source, tmp_path / "out.ipynb", {"profile": "smoke"}, cwd=tmp_path)


MAX_CODE_LINE = 100     # what the book's code box shows on a wide screen (book/_static/negbook.css)


def test_notebook_code_lines_fit_the_book_code_box():
    """A longer line wraps in the book (or runs out of the box where CSS cannot reach): readers of
    the built book see every code line whole."""
    long = []
    for source in runner.notebook_sources():
        for number, cell in enumerate(runner.read_notebook(source).cells):
            if cell.cell_type == "code":
                long += [f"{source.name} cell {number}: {len(line)} characters: {line[:60]}..."
                         for line in cell.source.splitlines() if len(line) > MAX_CODE_LINE]
    assert not long, "\n".join(long)


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


def test_progress_line_estimates_the_rest_from_the_last_recorded_times(tmp_path):
    times_csv = tmp_path / "notebook_times.csv"
    assert runner.last_recorded_times(times_csv) == {}
    runner._record_times(times_csv, [{"profile": "cpu", "notebook": n, "seconds": s}
                                     for n, s in [("00_a", 600.0), ("01_b", 30.0), ("02_c", 90.0)]], keep_others=False)
    last = runner.last_recorded_times(times_csv)
    line = runner.progress_line("00_a", 612.0, 615.0, ["01_b", "02_c", "03_new"], last)
    assert "00_a done in 10.2 min" in line and "elapsed 10.2 min" in line
    assert "3 to go, about 2.0 min" in line and "no recorded time for 03_new" in line
    assert runner.progress_line("02_c", 45.0, 700.0, [], last).endswith("all chapters executed")
    first_run = runner.progress_line("00_a", 612.0, 615.0, ["01_b"], {})
    assert first_run.endswith("1 to go, none timed before, so no estimate yet") and "about" not in first_run


def test_a_fresh_clone_estimates_from_the_committed_measurement_and_says_so():
    measured = runner.measured_times("cpu")
    chapters = [p.stem for p in runner.notebook_sources(None)]
    assert set(measured) == set(chapters) and all(s > 0 for s in measured.values())   # every chapter measured
    line = runner.progress_line(chapters[0], 600.0, 600.0, chapters[1:], measured,
                                "bench/results/main_job_notebooks.csv's run")
    rest = sum(measured[c] for c in chapters[1:])
    assert f"about {rest / 60:.1f} min by bench/results/main_job_notebooks.csv's run" in line
    assert runner.measured_times("no-such-profile") == {}


def _internal_link_problems(links: list[str], html_root: Path) -> list[str]:
    """Links into the built book whose file is missing or whose #anchor no element of that page carries."""
    problems = []
    for link in links:
        url = urlparse(link)
        if url.scheme != "file" or not unquote(url.path).startswith(str(html_root)):
            continue
        target = Path(unquote(url.path))
        if target.is_dir():
            target = target / "index.html"
        if not target.exists():
            problems.append(f"{link}: no such file")
        elif url.fragment and f'id="{unquote(url.fragment)}"' not in target.read_text(errors="replace"):
            problems.append(f"{link}: no element with id {unquote(url.fragment)!r}")
    return problems


@pytest.mark.notebooks
def test_every_page_of_the_book_loads_in_a_real_browser(smoke_book):
    """Readers meet the book in a browser: every page in headless Chromium (Debian's package, which
    .ci/run installs when missing), no script error, every image decoded, every internal link and
    anchor resolved; a screenshot of chapter 06 is kept under the profile's artifacts. A machine
    without Chromium skips it with the reason in pytest's summary; under CI=true it must run."""
    from playwright.sync_api import sync_playwright      # the [dev] extra; drives the system's Chromium

    chromium = shutil.which("chromium")
    if not chromium:
        missing = "no chromium on PATH: apt-get install chromium (as root) to run the browser test"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"{missing}; CI=true requires it (.ci/run installs it)")
        pytest.skip(missing)
    _, out = smoke_book
    html_root = out / "_build" / "html"
    pages = sorted(html_root.glob("*.html")) + sorted((html_root / "chapters").glob("*.html"))
    problems = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        for path in pages:
            forward = re.search(r'http-equiv="Refresh" content="0; url=([^"]+)"', path.read_text())
            if forward:                        # index.html only forwards to the first page
                problems += [f"{path.name}: {p}" for p in _internal_link_problems(
                    [(path.parent / forward.group(1)).as_uri()], html_root)]
                continue
            errors.clear()
            page.goto(path.as_uri(), wait_until="load")
            broken = page.evaluate("Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0))"
                                   ".map(i => i.getAttribute('src'))")
            links = page.evaluate("Array.from(document.querySelectorAll('a[href]')).map(a => a.href)")
            problems += [f"{path.name}: script error {e}" for e in errors]
            problems += [f"{path.name}: image {src} does not decode" for src in broken]
            problems += [f"{path.name}: {p}" for p in _internal_link_problems(links, html_root)]
            # code fits its box: no visible code line runs past the right edge (inputs or printed outputs)
            cut = page.evaluate("Array.from(document.querySelectorAll('div.cell_input pre, div.cell_output pre'))"
                                ".filter(p => p.offsetParent !== null && p.scrollWidth > p.clientWidth + 1)"
                                ".map(p => p.innerText.split('\\n')[0].slice(0, 60))")
            problems += [f"{path.name}: code cut at the right edge: {c!r}" for c in cut]
            if path.parent.name == "chapters":
                findings = page.evaluate("(() => { const b = document.querySelector('div.findings');"
                                         " return b && b.offsetParent !== null ? b.innerText : ''; })()")
                if "Findings" not in findings:
                    problems.append(f"{path.name}: no visible findings box")
            if path.stem == "06_benchmark_tables":
                shot = get_profile("smoke").artifacts_dir() / "screenshots" / "06_benchmark_tables.png"
                shot.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(shot), full_page=True)
        browser.close()
    assert len(pages) >= 10
    assert not problems, "\n".join(problems[:20])
    assert shot.stat().st_size > 50_000
