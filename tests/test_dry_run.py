"""The gpu profile's code path on CPU without a download (``gpu-dryrun``): ViT-B-32 with QuickGELU from
a random local checkpoint, the smoke world's val and ood splits written as COCO val2017, VOC2007 and
NegBench's published CSVs, every chapter executed by papermill and the book built."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from negutils import eval as negbook_eval
from negutils import run as runner
from negutils.benchmarks import results_frame
from negutils.benchmarks.published import MCQ_FILES
from negutils.config import BackboneSpec, get_profile
from negutils.core.results import read_results
from negutils.core.workers import torch_threads
from negutils.dry_run import dry_run_inputs
from negutils.models.backbone import load_backbone
from negutils.models.features import TextFeatures
from negutils.models.features import main as features_main

from background_books import DRY_RUN_BACKBONES
from conftest import findings_box, injected_parameters_of_every_chapter

PROFILE = get_profile("gpu-dryrun")
SECOND = PROFILE.with_backbone(BackboneSpec(DRY_RUN_BACKBONES[1]))     # the dry run's second backbone


def written_inputs(profile=PROFILE) -> dict:
    """What the dry run wrote for ``profile``'s backbone: the data's environment and the checkpoints."""
    env, parameters = dry_run_inputs(profile, progress=False)
    return {"env": env, "parameters": parameters}


@pytest.mark.notebooks
def test_every_chapter_executes_on_the_real_path(dry_run_book):
    result, _ = dry_run_book
    injected = injected_parameters_of_every_chapter(result)
    for source in runner.notebook_sources():
        declared = runner.declared_parameters(runner.read_notebook(source))
        assert 'profile = "gpu-dryrun"' in injected[source.stem], source.stem
        # each chapter receives the checkpoints it declares, and only those
        assert ("ViT-B-32-random.pt" in injected[source.stem]) == ("checkpoint" in declared), source.stem
        assert ("negfull_checkpoint" in injected[source.stem]) == ("negfull_checkpoint" in declared), source.stem


@pytest.mark.notebooks
def test_the_checkpoint_is_vit_b32_as_openai_weights_run(dry_run_chapters):
    inputs = written_inputs()
    checkpoint = inputs["parameters"]["checkpoint"]
    backbone = load_backbone("ViT-B-32", checkpoint=checkpoint)    # the loader that checks every key
    assert backbone.report.quick_gelu and backbone.report.n_tensors_loaded == len(backbone.model.state_dict())
    assert backbone.image_size == 224 and backbone.context_length == 77
    assert set(inputs["env"]) == {"COCO_IMAGE_ROOT", "VOC_ROOT", "NEGBENCH_CSV_DIR", "CC12M_NEGATION_DIR"}


@pytest.mark.notebooks
def test_the_chapters_read_coco_voc_and_the_published_csvs(dry_run_chapters):
    inputs = written_inputs()
    retrieval = read_results(PROFILE, "00_zero_shot_retrieval")
    assert set(retrieval["dataset"]) == {"coco"} and set(retrieval["model"]) == {"ViT-B-32"}
    assert set(retrieval["split"]) == {"val"}            # VOC2007 has no captions to retrieve with
    vanilla = read_results(PROFILE, "01_vanilla")
    published = {split: pd.read_csv(f"{inputs['env']['NEGBENCH_CSV_DIR']}/{name}") for split, name in MCQ_FILES.items()}
    mcq = vanilla[vanilla["task"] == "mcq"].set_index("split")["questions"]
    assert mcq.groupby(level=0).first().to_dict() == {split: len(f) for split, f in published.items()}
    assert not vanilla[(vanilla["split"] == "ood") & vanilla["task"].str.startswith("retrieval")].size
    assert {"retrieval", "retrieval_negated"} <= set(vanilla.loc[vanilla["split"] == "val", "task"])


@pytest.mark.notebooks
def test_chapter_03_evaluates_the_released_negfull_in_its_base_models_activation(dry_run_chapters):
    result, _ = dry_run_chapters
    inputs = written_inputs()
    released = torch.load(inputs["parameters"]["negfull_checkpoint"], weights_only=True)
    assert "negbook" not in released and next(iter(released["state_dict"])).startswith("module.")
    chapter = json.loads((result["stage"] / "chapters" / "03_peakpatch.ipynb").read_text())
    printed = "".join("".join(o.get("text", [])) for c in chapter["cells"]
                      if "negfull_checkpoint" in "".join(c["source"]) for o in c.get("outputs", []))
    assert f"checkpoint {inputs['parameters']['negfull_checkpoint']}" in printed and "activation QuickGELU" in printed
    results = read_results(PROFILE, "03_results")
    assert {"mcq", "retrieval"} <= set(results.loc[results["method"] == "NegFull (released)", "task"])


def printed_by(result, chapter: str) -> str:
    """Everything a chapter's cells printed in the dry run."""
    notebook = json.loads((result["stage"] / "chapters" / f"{chapter}.ipynb").read_text())
    return "".join("".join(o.get("text", [])) for c in notebook["cells"] for o in c.get("outputs", []))


@pytest.mark.notebooks
def test_peakpatch_negfull_and_lcse_learn_from_the_published_train2017(dry_run_chapters):
    result, _ = dry_run_chapters
    assert "PeakPatch and NegFull train on COCO train2017 (negtrain subset), 40 images" in printed_by(
        result, "03_peakpatch")
    assert read_results(PROFILE, "03_training_data")["source"].str.startswith("COCO train2017").all()
    alphas = read_results(PROFILE, "03_negfull_alphas").set_index("alpha")
    assert alphas.loc["1.0", "chosen"] and 0 <= float(alphas.loc["1.0", "held-out MCQ accuracy"]) <= 1
    assert not alphas.loc["released", "chosen"]       # the released weights are evaluated beside ours
    assert "calibration tests on pretrain (COCO train2017 (pretrain subset), 24 images)" in printed_by(
        result, "05_lcse")


@pytest.mark.notebooks
def test_the_dry_run_builds_its_book_with_a_real_backbone_line(dry_run_book):
    result, out = dry_run_book
    assert result["index"] == out / "_build" / "html" / "index.html" and result["index"].exists()
    chapter06 = (out / "_build" / "html" / "chapters" / "06_benchmark_tables.html").read_text()
    assert "ViT-B-32 (gpu-dryrun)" in chapter06
    # papermill's cell is hidden, so the findings box says which weights the chapter ran
    chapter03 = (out / "_build" / "html" / "chapters" / "03_peakpatch.html").read_text()
    box = findings_box(chapter03)
    assert "profile <code" in box and "checkpoint=ViT-B-32-random.pt" in box and "negfull_checkpoint=" in box


@pytest.mark.notebooks
def test_negbook_eval_gives_the_rows_the_chapters_computed(dry_run_chapters, tmp_path, monkeypatch):
    inputs = written_inputs()
    for variable in inputs["env"]:                # unset for the command, restored after the test
        monkeypatch.setenv(variable, "")
        monkeypatch.delenv(variable)
    out = tmp_path / "results.jsonl"
    export = PROFILE.artifacts_dir() / "peakpatch" / "export" / "peakpatch-joint-negbench.pt"    # chapter 03 writes it
    data_root = Path(inputs["env"]["COCO_IMAGE_ROOT"]).parent
    checkpoint = inputs["parameters"]["checkpoint"]
    assert negbook_eval.cli(["eval", "--model", "ViT-B-32", "--checkpoint", checkpoint, "--profile",
                             "gpu-dryrun", "--data-root", str(data_root), "--method", "vanilla", "ktn",
                             f"peakpatch:{export}", "--output", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {"dataset", "split", "model", "pretrained", "task", "source", "metrics", "method"} == set(rows[0])
    ours = results_frame([{k: v for k, v in r.items() if k != "method"} | {"metrics": {**r["metrics"],
                          "method": r["method"]}} for r in rows])
    assert {"mcq", "retrieval_negated", "confusion_2c", "valse_existence"} <= set(ours["task"])
    assert set(ours["split"]) == {"val", "ood"} and set(ours["method"]) == {"vanilla", "KTN", "PeakPatch (joint)"}
    key = ["method", "split", "task"]
    vanilla = read_results(PROFILE, "01_vanilla").query("pretrained != 'untrained'").assign(method="vanilla")
    chapters = pd.concat([vanilla, read_results(PROFILE, "04_results").query("method == 'KTN'"),
                          read_results(PROFILE, "03_results").query("method == 'PeakPatch (joint)'")],
                         ignore_index=True)
    both = ours.merge(chapters, on=key, suffixes=("", " (chapter)"))
    assert len(both) >= 15 and set(both["method"]) == set(ours["method"])
    assert (both["source"] == both["source (chapter)"]).all()          # the same items, from the same files
    source = ours.drop_duplicates(["split", "task"]).set_index(["split", "task"])["source"]
    assert source[("val", "mcq")] == "COCO_val_mcq_llama3.1_rephrased.csv"
    assert source[("val", "factor_operator")] == "built"
    for metric in ("accuracy", "R@5", "mAP"):
        measured = both.dropna(subset=[metric, f"{metric} (chapter)"])
        assert len(measured), metric
        chapter = f"{metric} (chapter)"
        assert (measured[metric] == measured[chapter]).all(), measured[key + [metric, chapter]]


@pytest.mark.notebooks
def test_negbook_eval_fits_lcse_on_train2017_as_chapter_05_does_and_says_so(dry_run_chapters, tmp_path, capsys,
                                                                            monkeypatch):
    from negutils.methods.lcse import fit_calibration

    inputs = written_inputs()
    for variable in inputs["env"]:
        monkeypatch.delenv(variable, raising=False)
    out, data_root = tmp_path / "results.jsonl", Path(inputs["env"]["COCO_IMAGE_ROOT"]).parent
    assert negbook_eval.cli(["eval", "--model", "ViT-B-32", "--checkpoint", inputs["parameters"]["checkpoint"],
                             "--profile", "gpu-dryrun", "--data-root", str(data_root),
                             "--method", "lcse", "--lcse-calibration", "fit", "--benchmark", "valse",
                             "--output", str(out)]) == 0
    chapter = fit_calibration(read_results(PROFILE, "05_calibration_grid"))
    printed = capsys.readouterr().out
    assert f"LCSE (mu, beta) = ({chapter.mu:g}, {chapter.beta:g}) from grid search" in printed
    assert "tests of COCO train2017 (pretrain subset), 24 images" in printed
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows and all(r["lcse_calibration"]["mu"] == chapter.mu for r in rows)


@pytest.mark.notebooks
def test_torchrun_extraction_from_the_checkpoint_equals_one_process(dry_run_chapters, tmp_path, capsys):
    """The multi-GPU runner's feature extraction (README) from a local checkpoint, two ranks on CPU, against the
    same command's one-process cache (run here: a third interpreter would only import torch again). On the dry
    run's second backbone, whose 12-layer text tower takes the same taps as ViT-B-32's at a fraction of the cost."""
    inputs = written_inputs(SECOND)
    captions = tmp_path / "captions.txt"
    captions.write_text("\n".join(["There is no dog.", "A cat and no chair.", "A red kite above a tree."] * 3) + "\n")
    args = ["-m", "negutils.models.features", str(captions), "--model", SECOND.backbone, "--checkpoint",
            inputs["parameters"]["checkpoint"], "--l-p", "8", "--l-a", "6", "--batch-size", "4"]
    # torchrun runs each rank on one thread; matrix products round differently on two, so the
    # one-process cache it must equal is computed on one thread too
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with torch_threads(1):
        assert features_main([*args[2:], "--out", str(tmp_path / "one")]) == 0
    one = capsys.readouterr().out.strip().splitlines()[-1]
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                          *args, "--out", str(tmp_path / "two")], capture_output=True, text=True, check=True, env=env)
    merged, single = TextFeatures(two.stdout.strip().splitlines()[-1]), TextFeatures(one)
    assert len(merged.index["shards"]) == 2 and merged["final"].shape == (9, 64)
    for name in ("final", "proj_lp", "eos_lp", "eos_la", "tokens", "offsets"):
        assert np.array_equal(merged[name], single[name]), name


@pytest.mark.notebooks
def test_a_second_architecture_runs_into_its_own_folder_and_chapter_06_tables_both(dry_run_chapters, tmp_path,
                                                                                   monkeypatch):
    """``-p backbones=ViT-B-32,negbook-tiny-rn``: the second backbone's chapters 00-05 write under
    ``backbones/<key>/``, every row names its model, the first backbone's files are untouched, and chapter 06
    puts both in one backbone x method x benchmark table; negbook eval scores the second one as its chapters did."""
    assert SECOND.backbone_key() == "negbook-tiny-rn" and SECOND.results_dir() != PROFILE.results_dir()
    mine, first = read_results(SECOND, "04_results"), read_results(PROFILE, "04_results")
    assert set(mine["model"]) == {"negbook-tiny-rn"} and set(first["model"]) == {"ViT-B-32"}
    assert [p.backbone for p in PROFILE.backbone_runs()] == list(DRY_RUN_BACKBONES)
    layers = read_results(SECOND, "02_layer_selection")      # its own layer choice, made on itself
    assert set(layers["backbone"]) == {"negbook-tiny-rn"}
    table = read_results(PROFILE, "06_backbones")
    assert set(table["backbone"]) == {"ViT-B-32 (gpu-dryrun)", "negbook-tiny-rn (gpu-dryrun)"}
    for _, block in table.groupby("backbone"):
        assert {"vanilla", "KTN", "LCSE"} <= set(block["method"]) and (block["low"] <= block["high"]).all()
    inputs = written_inputs(SECOND)
    for variable in inputs["env"]:
        monkeypatch.delenv(variable, raising=False)
    out = tmp_path / "second.jsonl"
    data_root = Path(inputs["env"]["COCO_IMAGE_ROOT"]).parent
    assert negbook_eval.cli(["eval", "--model", SECOND.backbone, "--checkpoint", inputs["parameters"]["checkpoint"],
                             "--profile", "gpu-dryrun", "--data-root", str(data_root),
                             "--method", "vanilla", "ktn", "--benchmark", "negbench-mcq", "negbench-retrieval",
                             "--output", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    ours = {(r["method"], r["task"]): r["metrics"] for r in rows if r["split"] == "val"}
    chapter = mine[(mine["split"] == "val") & (mine["method"] == "KTN")].set_index("task")
    assert ours[("KTN", "mcq")]["accuracy"] == chapter.loc["mcq", "accuracy"]
    assert ours[("KTN", "retrieval_negated")]["R@5"] == chapter.loc["retrieval_negated", "R@5"]
