"""Inputs of the reports that once read as a plausible answer: a benchmark no method leads, a result
written twice, a verdict table with a repeated claim or a verdict no rule gives, an empty results
file. Each is said, or refused naming the file, never printed as a number."""
import pandas as pd
import pytest

from negutils.config import Profile
from negutils.core.results import ResultsError, read_results, result_value, write_results
from negutils.report import findings as fd
from negutils.report.unified import leaders


def result_row(method: str, accuracy: float, split: str = "val") -> dict:
    return {"dataset": "embedded", "split": split, "model": "m", "pretrained": "p", "task": "mcq", "method": method,
            "accuracy": accuracy}


def verdict_rows(*claims: tuple[str, str, str]) -> pd.DataFrame:
    return pd.DataFrame([{"claim": c, "source": s, "paper": "1", "ours": "2", "rule": "r", "verdict": v,
                          "section": None} for c, s, v in claims])


@pytest.fixture
def profile(tmp_path, monkeypatch):
    monkeypatch.setenv("NEGBOOK_ARTIFACTS", str(tmp_path))
    return Profile(name="test")


@pytest.mark.parametrize("methods, leader", [(["a", "b", "c"], "no leader: a, b, c tie"),
                                             (["a"], "a (the only method)")])
def test_a_benchmark_no_method_leads_is_never_settled_and_the_headline_says_so(tmp_path, methods, leader):
    long = pd.DataFrame([{"method": m, "benchmark": "MCQ val", "value": 50.0, "low": 45.0, "high": 55.0}
                         for m in methods])
    leads = leaders(long)
    assert leads["settled"].tolist() == [False]
    leads.to_csv(tmp_path / "06_leaders.csv", index=False)        # the headline reads it back from CSV
    verdict_rows(("x holds", "KTN Table 1", "reproduced")).to_csv(tmp_path / "04_verdicts.csv", index=False)
    headline = fd.book_headline(tmp_path, "cpu")
    assert f"| MCQ val | {leader} | 50 \\[45.0, 55.0\\] | none | no |" in headline
    assert "nan" not in headline.lower()


def test_a_leaders_table_with_an_empty_settled_cell_is_not_read_as_settled(tmp_path):
    pd.DataFrame([{"benchmark": "VALSE", "best": "a", "value": 50.0, "interval": "[45.0, 55.0]", "tied": "b"}]).to_csv(
        tmp_path / "06_leaders.csv", index=False)
    verdict_rows(("x holds", "KTN Table 1", "reproduced")).to_csv(tmp_path / "04_verdicts.csv", index=False)
    headline = fd.book_headline(tmp_path, "cpu")
    assert "| VALSE | no leader: a, b tie | 50 \\[45.0, 55.0\\] | none | no |" in headline
    assert "nan" not in headline.lower()


def test_a_result_written_twice_is_refused_naming_the_file_the_key_and_both_values(profile):
    write_results(pd.DataFrame([result_row("vanilla", 0.90), result_row("vanilla", 0.3695)]), profile, "03_results")
    refused = r"03_results\.csv: 2 result rows share one key \(method='vanilla'.*task='mcq'\) on lines 2, 3: " \
              r"accuracy = \[0\.9, 0\.3695\]"
    with pytest.raises(ResultsError, match=refused):
        read_results(profile, "03_results")
    with pytest.raises(ResultsError, match=refused):      # the findings boxes read through the same check
        fd.chapter_results(profile.artifacts_dir() / "results", "03")
    # rows of one key in a frame (stacked, or changed after reading) that disagree are ambiguous, named by
    # the file they were read from when the frame still knows it; equal rows are not ambiguous
    write_results(pd.DataFrame([result_row("vanilla", 0.3695)]), profile, "04_results")
    read = read_results(profile, "04_results")
    with pytest.raises(ResultsError, match=r"04_results\.csv: 2 rows for method 'vanilla', task 'mcq', split 'val' "
                                           r"give accuracy = \[0\.3695, 0\.9\]"):
        result_value(pd.concat([read, read.assign(accuracy=0.9)]), "vanilla", "mcq", "accuracy")
    with pytest.raises(ResultsError, match=r"the results frame: 2 rows .* give accuracy = \[0\.9, 0\.3695\]"):
        result_value(pd.DataFrame([result_row("vanilla", 0.90), result_row("vanilla", 0.3695)]), "vanilla", "mcq",
                     "accuracy")
    same = pd.DataFrame([result_row("vanilla", 0.3695), result_row("vanilla", 0.3695)])
    assert result_value(same, "vanilla", "mcq", "accuracy") == 0.3695


@pytest.mark.parametrize("rows, refused", [
    ([("x holds", "PeakPatch Table 1", "reproduced"), ("y holds", "PeakPatch Table 5", "partly"),
      ("x holds", "PeakPatch Table 1", "reproduced")],
     r"03_verdicts\.csv: the claim 'x holds' is on lines 2, 4; each claim is judged once"),
    ([("x holds", "PeakPatch Table 1", "reproduced"), ("y holds", "PeakPatch Table 5", "Reproduced")],
     r"03_verdicts\.csv, line 3 \(claim 'y holds'\): verdict 'Reproduced' is not one of "
     r"\['reproduced', 'partly', 'not reproduced', 'not measured'\]"),
])
def test_a_verdict_table_with_a_repeated_claim_or_an_unknown_verdict_is_refused(tmp_path, rows, refused):
    verdict_rows(*rows).to_csv(tmp_path / "03_verdicts.csv", index=False)
    with pytest.raises(ResultsError, match=refused):
        fd.verdicts_by_paper(tmp_path)
    with pytest.raises(ResultsError, match=refused):
        fd.chapter_results(tmp_path, "03")


@pytest.mark.parametrize("name", ["03_results", "03_verdicts"])
def test_an_empty_results_file_is_refused_naming_it_and_the_chapter_that_writes_it(profile, name):
    folder = profile.artifacts_dir() / "results"
    folder.mkdir(parents=True)
    (folder / f"{name}.csv").write_bytes(b"")
    refused = (rf"{name}\.csv is empty .* chapter 03 writes it .* rerun that chapter "
               r"\(python -m negutils\.run --profile test --only <its notebook>\)")
    with pytest.raises(ResultsError, match=refused):
        read_results(profile, name)
    with pytest.raises(ResultsError, match=refused):
        fd.chapter_results(folder, "03")
    if name.endswith("_verdicts"):
        with pytest.raises(ResultsError, match=refused):
            fd.verdicts_by_paper(folder)
