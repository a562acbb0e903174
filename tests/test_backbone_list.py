"""A backbone list (issue: every backbone the papers report, in one table): ``-p backbones`` parsed into
backbones, each backbone's run in its own folder so nothing overwrites, and chapter 06 putting each
backbone's line under the paper rows of that backbone only."""
import json

import numpy as np
import pandas as pd
import pytest

from negutils import run as runner
from negutils.config import BackboneSpec, get_profile, parse_backbones
from negutils.core.results import read_results, write_results
from negutils.report import backbone_table, beside_table
from negutils.report.paper_tables import line_label, our_values, result_profiles, row_method, serves
from negutils.report.unified import write_items


@pytest.fixture
def artifacts(tmp_path, monkeypatch):
    monkeypatch.setenv("NEGBOOK_ARTIFACTS", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("text, spec", [
    ("ViT-L-14:openai", BackboneSpec("ViT-L-14", pretrained="openai")),
    ("ViT-B-32:/data/negclip.pt", BackboneSpec("ViT-B-32", checkpoint="/data/negclip.pt")),
    ("ViT-B-32:negclip.safetensors", BackboneSpec("ViT-B-32", checkpoint="negclip.safetensors")),
    ("RN50", BackboneSpec("RN50")),
])
def test_a_backbone_is_written_as_open_clips_model_and_weights(text, spec):
    assert BackboneSpec.parse(text) == spec and str(spec) == text


@pytest.mark.parametrize("value, message", [
    ("ViT-L-14:openai,:openai", "write MODEL, MODEL:TAG or MODEL:PATH"),
    ("ViT-L-14:openai,ViT-B-32,ViT-L-14:openai", "ViT-L-14:openai named more than once"),
])
def test_a_bad_or_repeated_backbone_is_refused_by_name(value, message):
    with pytest.raises(ValueError, match=message):
        parse_backbones(value)


def test_each_backbone_has_its_own_results_folder_and_the_profiles_own_keeps_the_old_one(artifacts):
    gpu = get_profile("gpu")
    assert gpu.backbone_key() == "" and gpu.results_dir() == artifacts / "gpu" / "results"
    large = gpu.with_backbone(BackboneSpec.parse("ViT-L-14:openai"))
    assert large.results_dir() == artifacts / "gpu" / "backbones" / "ViT-L-14-openai" / "results"
    # two checkpoints of one architecture, even with one file name, are two backbones
    first = gpu.with_backbone(BackboneSpec.parse("ViT-B-32:/a/epoch_10.pt"))
    second = gpu.with_backbone(BackboneSpec.parse("ViT-B-32:/b/epoch_10.pt"))
    assert first.backbone_key().startswith("ViT-B-32-epoch_10-") and first.backbone_key() != second.backbone_key()
    # a dry run's checkpoint is the runner's random weights of the model: it does not name the backbone
    dry = get_profile("gpu-dryrun", checkpoint="/tmp/x/ViT-B-32-random.pt")
    assert dry.backbone_key() == "" and get_profile("cpu").backbone_key() == ""
    # a checkpoint on the organism's profile is not the organism
    assert get_profile("cpu", checkpoint="/a/model.pt").backbone_key().startswith("checkpoint-model-")
    assert line_label(large) == "ViT-L-14/openai" and line_label(get_profile("cpu")) == "organism (cpu)"


def test_two_backbones_results_never_overwrite_each_other_and_each_run_is_found(artifacts):
    gpu = get_profile("gpu")
    large = gpu.with_backbone(BackboneSpec.parse("ViT-L-14:openai"))
    for profile, accuracy in ((gpu, 0.4), (large, 0.7)):
        write_results(pd.DataFrame({"method": ["vanilla"], "task": ["mcq"], "accuracy": [accuracy]}), profile,
                      "04_results")
    large.record_backbone()
    assert read_results(gpu, "04_results")["accuracy"].item() == 0.4
    assert read_results(large, "04_results")["accuracy"].item() == 0.7
    assert [p.backbone_label() for p in gpu.backbone_runs()] == ["ViT-B-32/openai", "ViT-L-14/openai"]


def test_the_runner_takes_a_backbone_list_or_one_backbone_never_both():
    cpu = get_profile("cpu")
    params = {"backbones": "ViT-B-32:openai,ViT-L-14:openai", "full_sweep": True}
    runs = runner.backbone_runs(cpu, params)
    assert [(p.backbone, p.pretrained) for p in runs] == [("ViT-B-32", "openai"), ("ViT-L-14", "openai")]
    assert params == {"full_sweep": True}                   # the list is the runner's, not a chapter's
    assert runner.backbone_runs(cpu, {"backbone": "RN50"})[0].backbone == "RN50"
    assert runner.backbone_runs(cpu, {})[0] == cpu
    with pytest.raises(ValueError, match="drop -p backbone"):
        runner.backbone_runs(cpu, {"backbones": "ViT-L-14:openai", "backbone": "RN50"})
    assert set(runner.PER_BACKBONE_CHAPTERS) < {s.stem for s in runner.notebook_sources()}


def _values(mcq: float) -> pd.DataFrame:
    return our_values(pd.DataFrame([{"dataset": "coco", "split": "val", "task": "mcq", "method": m,
                                     "accuracy": mcq, "negative_accuracy": mcq}
                                    for m in ("vanilla", "KTN", "EC", "PeakPatch (joint)")]))


def test_a_backbones_line_stands_under_its_own_paper_rows_and_nowhere_else():
    assert row_method("Vanilla (CLIP ViT-L/14)") == "vanilla" and row_method("KTN (SigLIP2 So400m)") == "KTN"
    assert row_method("PeakPatch SigLIP ViT-B/16") == "PeakPatch (joint)"
    assert serves("KTN (CLIP ViT-L/14)", "ViT-L-14-quickgelu") and not serves("KTN (CLIP ViT-L/14)", None)
    assert serves("CLIP", None) and not serves("CLIP", "ViT-L-14")
    ours = {"organism (cpu)": _values(0.3), "ViT-L-14/openai": _values(0.6)}
    models = {"organism (cpu)": None, "ViT-L-14/openai": "ViT-L-14"}
    ktn = beside_table("KTN", "Table 2", ours, models=models)
    large = ktn[ktn["row"] == "KTN (CLIP ViT-L/14)"]
    assert list(large["source"]) == ["paper", "ViT-L-14/openai"]
    assert large.iloc[1]["MCQ COCO"] == pytest.approx(60.0)
    assert list(ktn[ktn["row"] == "KTN (CLIP ViT-H/14)"]["source"]) == ["paper"]     # not run: the paper's alone
    table1 = beside_table("KTN", "Table 1", ours, models=models)
    assert set(table1[table1["row"] == "KTN (ViT-B/32)"]["source"]) == {"paper", "organism (cpu)"}


def test_the_backbone_table_stacks_each_backbones_methods_with_intervals(artifacts):
    gpu = get_profile("gpu")
    runs = {"ViT-B-32/openai": gpu, "ViT-L-14/openai": gpu.with_backbone(BackboneSpec.parse("ViT-L-14:openai"))}
    for i, profile in enumerate(runs.values()):
        hits = np.array([1, 0, 1, 1] if i else [0, 0, 1, 0], dtype=float)
        for name in ("03_items", "04_items", "05_items"):
            write_items({("vanilla", "coco", "val", "mcq", "accuracy"): hits,
                         ("KTN [other protocol]", "coco", "val", "mcq", "accuracy"): hits}, profile, name)
    table = backbone_table(runs, n_boot=50)
    assert list(table["backbone"]) == list(runs) and set(table["method"]) == {"vanilla"}
    assert list(table["value"]) == [25.0, 75.0] and (table["low"] <= table["value"]).all()


def test_chapter_06_finds_every_backbone_with_results(artifacts):
    gpu = get_profile("gpu")
    large = gpu.with_backbone(BackboneSpec.parse("ViT-L-14:openai"))
    large.record_backbone()
    assert result_profiles([gpu]) == []                    # nothing has run yet
    for name in ("03_results", "04_results", "05_results"):
        write_results(pd.DataFrame({"method": ["vanilla"]}), large, name)
    assert [p.backbone for p in result_profiles([gpu])] == ["ViT-L-14"]
    assert json.loads((large.run_dir() / "backbone.json").read_text())["pretrained"] == "openai"


def test_a_missing_table_of_another_backbone_names_the_command_that_writes_it(artifacts):
    large = get_profile("gpu").with_backbone(BackboneSpec.parse("ViT-L-14:openai"))
    with pytest.raises(FileNotFoundError, match=r"--profile gpu -p backbone=ViT-L-14 -p pretrained=openai --only"):
        read_results(large, "04_results")


def test_a_damaged_backbone_record_is_refused_naming_the_file(artifacts):
    gpu = get_profile("gpu")
    large = gpu.with_backbone(BackboneSpec.parse("ViT-L-14:openai"))
    large.record_backbone()
    (large.run_dir() / "backbone.json").write_text('{"backbone": "ViT-L-14"')
    with pytest.raises(ValueError, match=r"backbones/ViT-L-14-openai/backbone.json is not a backbone record"):
        gpu.backbone_runs()
