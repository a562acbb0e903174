"""The performance appendix's ratio table, built from bench CSVs."""
import pandas as pd
import pytest

from negutils.report import ratio_summary, read_bench


def test_ratio_summary_collects_every_bench(tmp_path):
    pd.DataFrame([{"model": "m", "taps_ratio": 1.05, "taps_plus_tokens_ratio": 1.1}]).to_csv(tmp_path / "tap_overhead.csv")
    pd.DataFrame([{"model": "m", "dense fp32 / ragged": 4.7, "dense fp16 / ragged": 2.35}]).to_csv(
        tmp_path / "feature_cache.csv")
    pd.DataFrame([{"model": "m", "method": "NegFull (whole CLIP)", "x NegFull": 1.0},
                  {"model": "m", "method": "PeakPatch joint (cached features)", "x NegFull": 42.0}]).to_csv(
        tmp_path / "peakpatch_training.csv")
    pd.DataFrame([{"gallery": 10000, "method": "vanilla", "x vanilla": 1.0},
                  {"gallery": 10000, "method": "KTN", "x vanilla": 12.5}]).to_csv(tmp_path / "training_free_overhead.csv")
    pd.DataFrame([{"work": "w", "setting": "1 process, 2 threads", "x 1 process, 2 threads": 1.0},
                  {"work": "w", "setting": "2 processes", "x 1 process, 2 threads": 1.14}]).to_csv(
        tmp_path / "thread_scaling.csv")
    ratios = ratio_summary(tmp_path).set_index("measure")["ratio"]
    assert ratios["m: dense fp32 vs ragged fp16 tokens"] == 4.7
    assert ratios["KTN vs holistic, 10,000 images"] == 12.5
    assert ratios["m: PeakPatch joint (cached features) vs NegFull"] == 42.0
    assert ratios["w: 2 processes vs 1 process, 2 threads"] == 1.14
    assert len(ratios) == 7   # the denominators themselves are not ratios


def test_a_missing_bench_names_its_script(tmp_path):
    with pytest.raises(FileNotFoundError, match="bench/peakpatch_training.py"):
        read_bench("peakpatch_training", tmp_path)


def _executed(path, durations):
    import nbformat

    nb = nbformat.v4.new_notebook()
    for k, seconds in enumerate(durations):
        cell = nbformat.v4.new_code_cell(f"# why\nstep_{k}()\n")
        if seconds is not None:
            cell.metadata["papermill"] = {"duration": seconds}
        nb.cells.append(cell)
    nb.cells.insert(1, nbformat.v4.new_markdown_cell("text"))
    nbformat.write(nb, path)
    return path


def test_main_job_profile_reads_papermill_cell_durations(tmp_path):
    from negutils.report.performance import cell_times, main_job_profile

    a = _executed(tmp_path / "00_a.ipynb", [1.0, 6.0, 3.0])
    b = _executed(tmp_path / "01_b.ipynb", [10.0])
    cells = cell_times(a)
    assert cells["cell"].tolist() == [1, 2, 3] and cells["first line"].tolist() == ["step_0()", "step_1()", "step_2()"]
    notebooks, ranked = main_job_profile([a, b])
    per = notebooks.set_index("notebook")
    assert per.loc["00_a", "seconds"] == 10.0 and per.loc["00_a", "slowest cell"] == 2
    assert per["share"].sum() == pytest.approx(1.0) and per.loc["01_b", "share"] == pytest.approx(0.5)
    assert ranked["seconds"].tolist() == [10.0, 6.0, 3.0, 1.0]
    with pytest.raises(ValueError, match="code cell 2 has no papermill duration"):
        cell_times(_executed(tmp_path / "02_c.ipynb", [1.0, None]))
