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
    ratios = ratio_summary(tmp_path).set_index("measure")["ratio"]
    assert ratios["m: dense fp32 vs ragged fp16 tokens"] == 4.7
    assert ratios["KTN vs holistic, 10,000 images"] == 12.5
    assert ratios["m: PeakPatch joint (cached features) vs NegFull"] == 42.0
    assert len(ratios) == 6   # the denominators themselves are not ratios


def test_a_missing_bench_names_its_script(tmp_path):
    with pytest.raises(FileNotFoundError, match="bench/peakpatch_training.py"):
        read_bench("peakpatch_training", tmp_path)
