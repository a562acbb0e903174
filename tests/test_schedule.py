"""Which chapters run side by side (negutils.schedule) and the runner that executes them two at a time:
the needs table against the book's chapters, the start order, the replayed estimate, the kernels'
wait policy, and a failure that stops new chapters while the running one finishes."""
from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from negutils import run as runner
from negutils import schedule
from negutils.schedule import chapter_needs, chapters_to_start, estimate_seconds, may_share_cores

BOOK = [s.stem for s in runner.notebook_sources()]


def test_every_chapter_waits_only_for_earlier_chapters_so_book_order_is_a_valid_schedule():
    needs = chapter_needs(BOOK)
    assert set(schedule.CHAPTER_NEEDS) <= set(BOOK), "CHAPTER_NEEDS names a chapter the book does not have"
    for chapter, before in needs.items():
        assert all(b < chapter for b in before), f"{chapter} waits for a later chapter: {sorted(before)}"
    assert needs["90_performance"] == set(BOOK) - {"90_performance"}     # unlisted: every earlier chapter
    assert needs["03_peakpatch"] == {"01_data_construction", "02_representational_collapse"}


def test_an_only_run_waits_only_for_the_chapters_it_runs():
    assert chapter_needs(["04_ktn", "06_benchmark_tables"]) == {"04_ktn": set(), "06_benchmark_tables": {"04_ktn"}}
    assert chapter_needs(["99_new", "03_peakpatch"]) == {"03_peakpatch": set(), "99_new": {"03_peakpatch"}}


def test_a_chapter_reads_what_it_waits_for_in_the_whole_book_even_in_an_only_run():
    assert schedule.chapter_reads("05_lcse", BOOK) == {"00_world_and_backbone", "01_data_construction",
                                                       "02_representational_collapse", "03_peakpatch", "05_lcse"}
    assert "04_ktn" not in schedule.chapter_reads("07_negation_rate", BOOK)     # a sibling, not a need


def test_only_chapters_that_can_overlap_another_get_passive_waits():
    needs = chapter_needs(BOOK)
    assert may_share_cores(needs, jobs=1) == set()
    alone = set(BOOK) - may_share_cores(needs, jobs=2)
    assert alone == {"00_world_and_backbone", "03_peakpatch", "90_performance"}


def test_the_longest_chain_behind_a_ready_chapter_starts_first():
    needs = chapter_needs(BOOK)
    done = {"00_world_and_backbone", "01_data_construction", "02_representational_collapse", "03_peakpatch"}
    waiting = [c for c in BOOK if c not in done]
    times = {"04_ktn": 80.0, "05_lcse": 57.0, "06_benchmark_tables": 12.0, "07_negation_rate": 330.0,
             "90_performance": 12.0}
    assert chapters_to_start(waiting, done, 2, needs, times) == ["07_negation_rate", "04_ktn"]
    # untimed: book order; nothing ready before its needs are done; no free slot, nothing starts
    assert chapters_to_start(waiting, done, 2, needs, {}) == ["04_ktn", "05_lcse"]
    assert chapters_to_start(["06_benchmark_tables"], done, 2, needs, times) == []
    assert chapters_to_start(waiting, done, 0, needs, times) == []


def test_the_estimate_replays_the_schedule():
    needs = {"a": set(), "b": {"a"}, "c": {"a"}, "d": {"b", "c"}}
    times = {"a": 10.0, "b": 5.0, "c": 7.0, "d": 1.0}
    assert estimate_seconds(["a", "b", "c", "d"], {}, times, needs, jobs=1) == 23.0     # the sum, one at a time
    assert estimate_seconds(["a", "b", "c", "d"], {}, times, needs, jobs=2) == 18.0     # b beside c
    assert estimate_seconds(["d"], {"b": 4.0, "c": 1.0}, times, needs, jobs=2) == 7.0   # c's 6 s left, then d
    assert estimate_seconds(["d"], {"b": 9.0}, times, needs, jobs=2) == 1.0           # overran: 0 s left, not less
    with pytest.raises(ValueError, match=r"\['d'\] wait for chapters that are not in the run"):
        estimate_seconds(["d"], {}, times, {"d": {"x"}}, jobs=2)


def test_the_progress_line_names_what_runs_and_estimates_two_at_a_time():
    times = {"03_peakpatch": 600.0, "04_ktn": 60.0, "05_lcse": 120.0}
    line = runner.progress_line("03_peakpatch", 600.0, 900.0, ["05_lcse"], times, running={"04_ktn": 30.0}, jobs=2)
    assert "2 to go (04_ktn running), about 2.0 min" in line    # 05 starts beside 04: 120 s, not 30 + 120
    serial = runner.progress_line("03_peakpatch", 600.0, 900.0, ["05_lcse"], times, running={"04_ktn": 30.0})
    assert "about 2.5 min" in serial


def _chapter(folder, name: str, body: str):
    (folder / f"{name}.md").write_text(
        "---\njupytext:\n  text_representation:\n    format_name: myst\n---\n\n# Chapter\n\n"
        "```{code-cell} ipython3\n:tags: [parameters]\n\nprofile = 'cpu'\n```\n\n"
        f"```{{code-cell}} ipython3\n{body}\n```\n")


@pytest.mark.notebooks
def test_two_at_a_time_a_failure_stops_new_chapters_and_the_running_one_finishes(tmp_path, monkeypatch):
    """00 first; then 01 (fails after 4 s) beside 02, which starts while 01 runs, sleeps past 01's
    failure and still completes; 03 (after 02) never starts. Each kernel records its OpenMP wait
    policy: passive for 01 and 02, which share the cores, unset for 00, which runs alone."""
    notebooks, log = tmp_path / "notebooks", tmp_path / "log"
    notebooks.mkdir()
    log.mkdir()
    record = f"import os, pathlib, time\npathlib.Path({str(log)!r}, '{{}}.json').write_text("
    for name, extra in [("00_a", ""), ("01_b", "time.sleep(4)\nraise ValueError('bad caption')"),
                        ("02_c", "time.sleep(10)"),
                        ("03_d", "")]:
        _chapter(notebooks, name, f"{record.format(name)}__import__('json').dumps([time.time(), "
                                  f"os.environ.get('OMP_WAIT_POLICY'), os.environ['NEGBOOK_CHAPTER'], "
                                  f"os.environ['NEGBOOK_CHAPTER_READS']]))\n{extra}")
    monkeypatch.setattr(runner, "NOTEBOOK_DIR", notebooks)
    monkeypatch.setattr(schedule, "CHAPTER_NEEDS", {"00_a": (), "01_b": ("00_a",), "02_c": ("00_a",),
                                                    "03_d": ("02_c",)})
    monkeypatch.setenv("NEGBOOK_ARTIFACTS", str(tmp_path / "artifacts"))
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    with pytest.raises(runner.NotebookFailed, match=r"01_b\.md failed in cell \d+ .*bad caption(.|\n)*"
                                                    r"not started: 03_d"):
        runner.run("smoke", build=False, jobs=2)
    seen = {p.stem: json.loads(p.read_text()) for p in log.glob("*.json")}
    assert sorted(seen) == ["00_a", "01_b", "02_c"]
    assert {k: policy for k, (_, policy, _, _) in seen.items()} == {"00_a": None, "01_b": "PASSIVE",
                                                                     "02_c": "PASSIVE"}
    # what each writes to the shared memos carries its name; it reads its own and its needs' (models.memo)
    assert {k: (writer, reads) for k, (_, _, writer, reads) in seen.items()} == {
        "00_a": ("00_a", "00_a"), "01_b": ("01_b", "00_a,01_b"), "02_c": ("02_c", "00_a,02_c")}
    assert seen["02_c"][0] < seen["01_b"][0] + 4                # started while 01 ran, not after it
    times = pd.read_csv(tmp_path / "artifacts" / "smoke" / "results" / "notebook_times.csv")
    assert times["notebook"].tolist() == ["00_a", "02_c"]      # what finished is recorded, the failure is not
    assert os.environ.get("OMP_WAIT_POLICY") is None           # the runner's own environment is left as it was


def test_jobs_below_one_are_refused():
    with pytest.raises(ValueError, match="jobs must be at least 1"):
        runner.run("smoke", build=False, jobs=0)
