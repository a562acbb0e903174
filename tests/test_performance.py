"""The performance appendix's ratio table, built from bench CSVs."""
import pandas as pd
import pytest

from negutils.report import ratio_summary, read_bench


def test_ratio_summary_collects_every_bench(tmp_path):
    pd.DataFrame([{"model": "m", "taps_ratio": 1.05, "taps_plus_tokens_ratio": 1.1}]).to_csv(
        tmp_path / "tap_overhead.csv")
    pd.DataFrame([{"model": "m", "dense fp32 / ragged": 4.7, "dense fp16 / ragged": 2.35}]).to_csv(
        tmp_path / "feature_cache.csv")
    pd.DataFrame([{"model": "m", "method": "NegFull (whole CLIP)", "x NegFull": 1.0},
                  {"model": "m", "method": "PeakPatch joint (cached features)", "x NegFull": 42.0}]).to_csv(
        tmp_path / "peakpatch_training.csv")
    pd.DataFrame([{"gallery": 10000, "method": "vanilla", "x vanilla": 1.0},
                  {"gallery": 10000, "method": "KTN", "x vanilla": 12.5}]).to_csv(
        tmp_path / "training_free_overhead.csv")
    pd.DataFrame([{"work": w, "setting": setting, "x 1 process, 2 threads": ratio}
                  for w, base in (("w", 1.14), ("v", 1.28))
                  for setting, ratio in (("1 process, 2 threads", 1.0), ("2 processes", base))]).to_csv(
        tmp_path / "thread_scaling.csv")
    pd.DataFrame([{"profile": "smoke", "mode": mode, "wall x serial": ratio}
                  for mode, ratio in (("one at a time", 1.0), ("two at a time", 0.72))]).to_csv(
        tmp_path / "chapter_concurrency.csv")
    pd.DataFrame([{"implementation": name, "x for-loop": ratio, "training steps compared": 6,
                   "max abs weight difference": apart}
                  for name, ratio, apart in (("for-loop (CPU default)", 1.0, 0.0), ("foreach", 0.91, 0.0),
                                             ("fused", 0.27, 9.5e-4))]).to_csv(tmp_path / "optimizer_step.csv")
    pd.DataFrame([{"embed dim": 256, "images": 2000, "tiling": tiling, "x whole columns": ratio}
                  for tiling, ratio in (("whole columns", 1.0), ("tiles of 256 images", 0.82))]).to_csv(
        tmp_path / "scn_pairwise.csv")
    pd.DataFrame([{"torch threads": 2, "variant": name, "steps timed": 12, "x version 2": ratio,
                   "max abs weight difference from version 2": apart}
                  for name, ratio, apart in (("version 2", 1.0, 0.0), ("channels-last", 0.99, 0.0),
                                             ("math attention", 0.79, 3.3e-3))]).to_csv(tmp_path / "pretrain_step.csv")
    ratios = ratio_summary(tmp_path).set_index("measure")["ratio"]
    pretraining = "one pretraining step of the organism on 2 threads: {} vs version 2's ({} after 12 steps)"
    assert ratios[pretraining.format("channels-last", "the same weights")] == 0.99
    assert ratios[pretraining.format("math attention", "weights 3e-03 apart")] == 0.79
    step = "one AdamW step of the organism: {} vs for-loop ({} after 6 training steps)"
    assert ratios[step.format("foreach", "the same weights")] == 0.91
    assert ratios[step.format("fused", "weights 9e-04 apart")] == 0.27
    assert ratios["SCN pairwise, d = 256, 2,000 images: tiles of 256 images vs whole columns"] == 0.82
    assert ratios["m: dense fp32 vs ragged fp16 tokens"] == 4.7
    assert ratios["KTN vs holistic, 10,000 images"] == 12.5
    assert ratios["m: PeakPatch joint (cached features) vs NegFull"] == 42.0
    assert ratios["w: 2 processes vs 1 process, 2 threads"] == 1.14
    assert ratios["v: 2 processes vs 1 process, 2 threads"] == 1.28
    assert ratios["smoke chapters: two at a time vs one at a time"] == 0.72
    assert len(ratios) == 14   # the denominators themselves are not ratios


def test_the_sweep_summary_gives_the_wall_time_of_the_run_that_made_the_table():
    from negutils.report import sweep_summary
    from negutils.report.performance import SWEEP_PRETRAINING_WALL

    side_by_side = pd.DataFrame({"samples": [1000, 1000], "pretrain s": [900.0, 900.0], "measure s": [60.0, 60.0],
                                 SWEEP_PRETRAINING_WALL: [960.0, 960.0], "measure wall s (this run)": [30.0, 30.0]})
    assert sweep_summary(side_by_side) == ("2 rates at 1,000 pretraining pairs each: 17.0 min wall on this machine: "
                                           "16.0 min pretraining every rate side by side, then 1.0 min measuring")
    in_turn = side_by_side.drop(columns=[SWEEP_PRETRAINING_WALL, "measure wall s (this run)"])
    assert sweep_summary(in_turn) == ("2 rates at 1,000 pretraining pairs each: 32.0 min on this machine, one rate "
                                      "after the other (30.0 of pretraining)")


def test_a_missing_bench_names_its_script(tmp_path):
    with pytest.raises(FileNotFoundError, match="bench/peakpatch_training.py"):
        read_bench("peakpatch_training", tmp_path)


def _executed(path, durations, span=("2026-01-01T00:00:00+00:00", "2026-01-01T00:00:20+00:00")):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["papermill"] = {"start_time": span[0], "end_time": span[1]}
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
    b = _executed(tmp_path / "01_b.ipynb", [10.0], ("2026-01-01T00:00:05+00:00", "2026-01-01T00:00:17.5+00:00"))
    cells = cell_times(a)
    assert cells["cell"].tolist() == [1, 2, 3] and cells["first line"].tolist() == ["step_0()", "step_1()", "step_2()"]
    notebooks, ranked = main_job_profile([a, b])
    per = notebooks.set_index("notebook")
    assert per.loc["00_a", "seconds"] == 10.0 and per.loc["00_a", "slowest cell"] == 2
    assert per["share"].sum() == pytest.approx(1.0) and per.loc["01_b", "share"] == pytest.approx(0.5)
    assert ranked["seconds"].tolist() == [10.0, 6.0, 3.0, 1.0]
    # the spans from the first start: 01_b ran beside 00_a
    assert per[["started s", "ended s"]].to_dict("index") == {"00_a": {"started s": 0.0, "ended s": 20.0},
                                                              "01_b": {"started s": 5.0, "ended s": 17.5}}
    with pytest.raises(ValueError, match="code cell 2 has no papermill duration"):
        cell_times(_executed(tmp_path / "02_c.ipynb", [1.0, None]))
    with pytest.raises(ValueError, match="03_d.ipynb: no papermill start and end time"):
        main_job_profile([a, _executed(tmp_path / "03_d.ipynb", [1.0], ("", ""))])
