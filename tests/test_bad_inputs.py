"""Inputs that would otherwise give a plausible wrong number: each is scored exactly (ties split) or
refused with an error that names it."""
import numpy as np
import pandas as pd
import pytest
import torch

from negutils.benchmarks.evaluate import evaluate_mcq, evaluate_pairwise
from negutils.benchmarks.evaluate import mcq_option_scores
from negutils.benchmarks.negbench import build_mcq, read_mcq_csv, write_mcq_csv
from negutils.benchmarks.suite import Benchmarks
from negutils.benchmarks.tokenisation import (IdenticalOptionsError, check_tokenisation, tokenisation_report,
                                              tokenisation_summary)
from negutils.core.metrics import NonFiniteScores, choice_credit, mcq_metrics, ranks_of_targets, tied_choices
from negutils.methods import build_scorer
from negutils.methods.training_data import mcq_accuracy
from negutils.models.backbone import load_backbone, save_checkpoint
from negutils.models.weights import NonFiniteWeightsError
from negutils.world.coco import load_split


class ConstantScorer:
    """Every image and caption scores the same: a model that cannot tell anything apart."""

    def __init__(self, value: float = 0.5, name: str = "constant"):
        self.value, self.name = value, name

    def image_features(self, split, indices):
        return torch.zeros(len(indices), 4)

    def score(self, image_features, captions):
        return torch.full((len(image_features), len(captions)), self.value)


@pytest.fixture(scope="module")
def val(tiny_world):
    return load_split(tiny_world / "val")


@pytest.fixture(scope="module")
def layouts(val):
    """The same questions in our layout (the answer at a seeded position) and in NegBench's
    published one (the answer always in column 0)."""
    ours = build_mcq(val)
    published = ours.copy()
    for q, row in ours.iterrows():
        options = [row[f"caption_{k}"] for k in range(4)]
        c = int(row["correct_answer"])
        order = [c] + [k for k in range(4) if k != c]
        for k, source in enumerate(order):
            published.loc[q, f"caption_{k}"] = options[source]
            published.loc[q, f"caption_{k}_type"] = row[f"caption_{source}_type"]
    published["correct_answer"] = 0
    assert ours["correct_answer"].nunique() > 1
    return {"ours": ours, "published": published}


def test_choice_credit_splits_ties_and_refuses_nan():
    scores = np.array([[0.9, 0.1, 0.2, 0.3], [0.5, 0.5, 0.1, 0.0], [0.4, 0.4, 0.4, 0.4], [0.1, 0.2, 0.2, 0.0]])
    assert choice_credit(scores, [0, 1, 2, 0]).tolist() == [1.0, 0.5, 0.25, 0.0]
    assert tied_choices(scores).tolist() == [False, True, True, True]
    metrics = mcq_metrics(scores, [0, 1, 2, 0], np.array(["positive"] * 4),
                          np.array([["correct", "negative", "hybrid", "positive"]] * 4))
    assert metrics["accuracy"] == pytest.approx(1.75 / 4) and metrics["tied_questions"] == 3
    # the wrong picks of row 1 (1/2 on option 0), row 2 (1/4 each on 0, 1, 3) and row 3 (1/2 on 1 and 2)
    assert metrics["wrong_pick_negative"] == pytest.approx((0.25 + 0.5) / 2.25)
    with pytest.raises(NonFiniteScores, match=r"1 non-finite values in 1 rows, first rows \[1\]"):
        choice_credit([[0.1, 0.2], [np.nan, 0.0]], [0, 0])


def test_a_constant_scorer_ranks_every_target_last_not_first():
    assert ranks_of_targets(np.zeros((3, 5)), [0, 2, 4]).tolist() == [4, 4, 4]
    assert ranks_of_targets(np.array([[0.9, 0.1, 0.5]]), [0]).tolist() == [0]


@pytest.mark.parametrize("layout", ["ours", "published"])
def test_a_constant_scorer_scores_at_chance_in_both_layouts(layouts, val, layout):
    metrics = evaluate_mcq(ConstantScorer(), layouts[layout], val)
    assert metrics["accuracy"] == pytest.approx(0.25) and metrics["tied_questions"] == len(layouts[layout])


@pytest.mark.parametrize("layout", ["ours", "published"])
def test_a_nan_scorer_is_refused_with_its_name_and_a_caption(layouts, val, layout):
    with pytest.raises(NonFiniteScores, match=r"scorer 'diverged' gave \d+ non-finite scores .* e.g. for \["):
        evaluate_mcq(ConstantScorer(float("nan"), "diverged"), layouts[layout], val)


def test_a_constant_scorer_is_at_chance_on_pairwise_tasks_and_in_training_selection(val):
    samples = pd.DataFrame({"image_id": val.image_ids[:6], "caption_0": ["a"] * 6, "caption_1": ["b"] * 6,
                            "correct": [0, 1, 0, 1, 1, 1]})
    assert evaluate_pairwise(ConstantScorer(), samples, val)["accuracy"] == 0.5
    assert mcq_accuracy(torch.zeros(8, 4), [0] * 8) == 0.25
    with pytest.raises(NonFiniteScores):
        mcq_accuracy(torch.full((2, 4), float("nan")), [0, 0])


def _collision_bench(val, tmp_path, correct: int) -> Benchmarks:
    """One question whose first two options differ only after the 32-token context of negbook-tiny."""
    head = "A photo of " + ", ".join(["a red star and a blue moon"] * 6)
    mcq = build_mcq(val).head(3).copy()
    mcq.loc[0, "caption_0"], mcq.loc[0, "caption_1"] = head + " and a cup.", head + " but no cup."
    mcq.loc[0, "correct_answer"] = correct
    root = tmp_path / f"layout-{correct}"
    write_mcq_csv(mcq, root / "mcq.csv")
    empty = {name: pd.DataFrame(columns=cols) for name, cols in
             {"retrieval_affirmative": ["query"], "retrieval_negated": ["query"], "confusion_2c": ["query"],
              "confusion_3c": ["query"], "factor": ["caption_0", "caption_1"],
              "existence": ["caption_0", "caption_1"]}.items()}
    for name, frame in empty.items():
        frame.to_csv(root / f"{name}.csv", index=False)
    return Benchmarks(split="val", root=root, mcq=read_mcq_csv(root / "mcq.csv"), **empty)


@pytest.mark.parametrize("correct", [0, 1])       # published layout (column 0) and ours
def test_options_identical_after_tokenisation_are_refused_or_scored_as_a_tie(val, tmp_path, correct):
    tiny = load_backbone("negbook-tiny")
    bench = _collision_bench(val, tmp_path, correct)
    report = tokenisation_report(bench, tiny)
    mcq_row = report.set_index("benchmark").loc["mcq"]
    assert mcq_row["over context"] == 2 and mcq_row["identical option sets"] == 1 and "row 0" in mcq_row["example"]
    assert "1 identical option sets" in tokenisation_summary(report)
    with pytest.raises(IdenticalOptionsError, match=rf"{bench.root / 'mcq.csv'}: 1 of its questions, e.g. row 0"):
        check_tokenisation(report)
    check_tokenisation(report, accept_identical_options=True)
    with pytest.warns(UserWarning, match="exceed the context length 32"):
        option_scores = mcq_option_scores(build_scorer("vanilla", tiny), bench.mcq, val)
    assert option_scores[0, 0] == option_scores[0, 1]            # the model saw one input twice
    credit = choice_credit(option_scores, bench.mcq["correct_answer"].to_numpy())[0]
    assert credit in (0.0, 0.5)          # 1/2 when the clashing pair is on top, never 1


def test_a_checkpoint_with_nan_weights_is_refused_with_the_tensor_names(tmp_path):
    model = load_backbone("negbook-tiny").model
    with torch.no_grad():
        model.ln_final.weight[0] = float("nan")
        model.text_projection[0, 0] = float("inf")
    path = save_checkpoint(model, tmp_path / "diverged.pt", "negbook-tiny")
    with pytest.raises(NonFiniteWeightsError, match=r"non-finite values \(NaN or inf\) in 2 tensors: "
                                                    r"\['text_projection', 'ln_final.weight'\]"):
        load_backbone(checkpoint=path)


# ----------------------------------------------------------------------------- inputs that change meaning

def _write_split(root, images, annotations, categories, captions=None):
    import json

    root.mkdir(parents=True, exist_ok=True)
    (root / "instances.json").write_text(json.dumps({"images": images, "annotations": annotations,
                                                     "categories": categories}))
    if captions is not None:
        (root / "captions.json").write_text(json.dumps({"images": images, "annotations": captions}))
    return root


GOOD_IMAGES = [{"id": 1, "file_name": "1.png"}, {"id": 2, "file_name": "2.png"}]
GOOD_CATEGORIES = [{"id": 1, "name": "cat"}, {"id": 2, "name": "dog"}]
GOOD_ANNOTATION = {"id": 10, "image_id": 1, "category_id": 1, "bbox": [0, 0, 4, 4]}


@pytest.mark.parametrize("images,annotations,categories,captions,message", [
    ([{"id": 1, "file_name": "1.png"}, {"id": 1, "file_name": "b.png"}], [GOOD_ANNOTATION], GOOD_CATEGORIES, None,
     r"image id\(s\) \[1\] appear more than once"),
    ([{"id": 1}], [], GOOD_CATEGORIES, None, r"image 1 has no 'file_name'"),
    (GOOD_IMAGES, [GOOD_ANNOTATION], [{"id": 1, "name": "cat"}, {"id": 2, "name": "cat"}], None,
     r"category name\(s\) \['cat'\] appear more than once"),
    (GOOD_IMAGES, [{"id": 11, "image_id": 1, "category_id": 1}], GOOD_CATEGORIES, None,
     r"annotation 11 has no 'bbox'"),
    (GOOD_IMAGES, [{"id": 12, "category_id": 1, "bbox": [0, 0, 1, 1]}], GOOD_CATEGORIES, None,
     r"annotation 12 has no 'image_id'"),
    (GOOD_IMAGES, [{"id": 13, "image_id": 2, "category_id": 2, "bbox": [0, 0, -3, 4]}], GOOD_CATEGORIES, None,
     r"annotation 13 \(image 2\) has bbox \[0, 0, -3, 4\]"),
    (GOOD_IMAGES, [GOOD_ANNOTATION], GOOD_CATEGORIES, [{"id": 20, "image_id": 1, "caption": None}],
     r"caption 20 has no 'caption'"),
    (GOOD_IMAGES, [GOOD_ANNOTATION], GOOD_CATEGORIES, [{"id": 21, "image_id": 2, "caption": 42}],
     r"caption 21 of image 2 is 42, not a non-empty string"),
])
def test_coco_files_that_would_change_meaning_are_errors_naming_the_file_and_id(tmp_path, images, annotations,
                                                                                 categories, captions, message):
    root = _write_split(tmp_path / "split", images, annotations, categories, captions)
    with pytest.raises(ValueError, match=message) as err:
        load_split(root)
    assert str(root) in str(err.value)


def test_an_image_that_does_not_decode_names_the_file(tmp_path):
    root = _write_split(tmp_path / "split", GOOD_IMAGES[:1], [GOOD_ANNOTATION], GOOD_CATEGORIES)
    (root / "1.png").write_bytes(b"not a png at all")
    with pytest.raises(ValueError, match=rf"image {root / '1.png'} \(id 1\) cannot be decoded"):
        load_split(root).load_image(0)


def test_csvs_that_do_not_decode_name_the_file_and_hint_at_the_cause(tmp_path, val):
    from negutils.benchmarks.negbench import BenchmarkFileError

    good = tmp_path / "good.csv"
    write_mcq_csv(build_mcq(val).head(3), good)
    latin = tmp_path / "latin.csv"
    latin.write_bytes(good.read_text().replace("This image", "Cette \u00e9image", 1).encode("latin-1"))
    with pytest.raises(BenchmarkFileError, match=rf"{latin} is not UTF-8 text .* iconv"):
        read_mcq_csv(latin)
    semicolons = tmp_path / "semicolons.csv"
    semicolons.write_text(good.read_text().splitlines()[0].replace(",", ";") + "\n")
    with pytest.raises(BenchmarkFileError, match=rf"{semicolons}: missing column.*another character than a comma"):
        read_mcq_csv(semicolons)


def test_image_checks_reject_directories_and_empty_paths(tmp_path):
    from negutils.benchmarks.negbench import BenchmarkFileError, resolve_image_paths

    (tmp_path / "folder.jpg").mkdir()
    with pytest.raises(FileNotFoundError, match="1 of 1 images are missing \\(or not files\\)"):
        resolve_image_paths(["folder.jpg"], tmp_path, source="mcq.csv")
    with pytest.raises(BenchmarkFileError, match="mcq.csv: row 1 has an empty image path"):
        resolve_image_paths(["folder.jpg", "  "], tmp_path, source="mcq.csv")


# ----------------------------------------------------------------------------- runner and configuration

def test_a_parameter_no_notebook_declares_is_an_error_before_anything_runs(capsys):
    from negutils import run as runner

    assert runner.main(["--profile", "smoke", "-p", "profle=cpu", "--only", "06_benchmark_tables", "--no-book"]) == 1
    err = capsys.readouterr().err
    assert "parameter(s) ['profle'] are declared by no notebook run here" in err and "'profile'" in err


def test_each_notebook_receives_only_the_parameters_it_declares(tmp_path):
    import json

    from negutils import run as runner

    source = tmp_path / "tiny.md"
    source.write_text("---\njupytext:\n  text_representation:\n    format_name: myst\nkernelspec:\n  name: python3\n"
                      "  display_name: Python 3\n---\n\n```{code-cell} ipython3\n:tags: [parameters]\n\n"
                      "profile = \"smoke\"\n```\n\n```{code-cell} ipython3\nprint(profile)\n```\n")
    out = tmp_path / "tiny.ipynb"
    runner.execute_notebook(source, out, {"profile": "cpu", "negfull_checkpoint": "x.pt"}, cwd=tmp_path,
                            progress=False)
    cells = json.loads(out.read_text())["cells"]
    injected = "".join(next(c for c in cells if "injected-parameters" in c["metadata"].get("tags", []))["source"])
    assert 'profile = "cpu"' in injected and "negfull_checkpoint" not in injected


@pytest.mark.parametrize("value,error,message", [("", ValueError, "is set but blank"),
                                                 ("   ", ValueError, "is set but blank")])
def test_a_blank_artifacts_variable_is_an_error(monkeypatch, value, error, message):
    from negutils.config import get_profile

    monkeypatch.setenv("NEGBOOK_ARTIFACTS", value)
    with pytest.raises(error, match=rf"\$NEGBOOK_ARTIFACTS {message}"):
        get_profile("smoke").artifacts_dir()


def test_artifacts_and_dataset_locations_that_are_files_or_blank_name_the_variable(monkeypatch, tmp_path):
    from negutils.config import dataset_root, get_profile

    afile = tmp_path / "file.txt"
    afile.write_text("x")
    monkeypatch.setenv("NEGBOOK_ARTIFACTS", str(afile))
    with pytest.raises(NotADirectoryError, match=r"\$NEGBOOK_ARTIFACTS names .*file.txt, which is a file"):
        get_profile("smoke").artifacts_dir()
    monkeypatch.setenv("COCO_IMAGE_ROOT", " ")
    with pytest.raises(ValueError, match=r"\$COCO_IMAGE_ROOT for COCO_IMAGE_ROOT is blank"):
        dataset_root("COCO_IMAGE_ROOT")
    monkeypatch.setenv("VOC_ROOT", str(afile))
    with pytest.raises(NotADirectoryError, match=r"\$VOC_ROOT for VOC_ROOT points at .*file.txt, which is a file"):
        dataset_root("VOC_ROOT")
    with pytest.raises(ValueError, match="the notebook parameter for NEGBENCH_CSV_DIR is blank"):
        dataset_root("NEGBENCH_CSV_DIR", "")


# ----------------------------------------------------------------------------- caches prove they are whole

def _damage(path, how: str) -> None:
    data = path.read_bytes()
    if how == "cut":                       # at a row boundary for text, mid-array for binaries
        cut = data.rfind(b"\n", 0, len(data) // 2) + 1 if path.suffix == ".csv" else len(data) // 2
        path.write_bytes(data[:cut])
    elif how == "zeroed":
        path.write_bytes(b"\0" * len(data))
    else:                                  # truncated to nothing
        path.write_bytes(b"")


@pytest.mark.parametrize("how", ["cut", "zeroed", "emptied"])
def test_a_damaged_benchmark_file_is_rebuilt_to_the_same_bytes(val, tmp_path, how):
    from negutils.benchmarks.suite import BenchmarkConfig, ensure_benchmarks

    bench = ensure_benchmarks(val, BenchmarkConfig(), tmp_path, "k")
    clean = {p.name: p.read_bytes() for p in bench.root.glob("*.csv")}
    _damage(bench.root / "mcq.csv", how)
    with pytest.warns(UserWarning, match=r"mcq.csv has .* rebuilding it"):
        again = ensure_benchmarks(val, BenchmarkConfig(), tmp_path, "k")
    assert {p.name: p.read_bytes() for p in again.root.glob("*.csv")} == clean
    assert len(again.mcq) == len(bench.mcq)


@pytest.mark.parametrize("how", ["cut", "zeroed", "emptied"])
def test_a_damaged_feature_shard_is_extracted_again_to_the_same_arrays(tmp_path, how):
    from negutils.models.features import TextFeatures, extract_text_features

    tiny = load_backbone("negbook-tiny")
    captions = ["a dog", "no cat on the mat", "a red star and a blue moon"]
    folder = extract_text_features(tiny, captions, 6, 3, tmp_path, "tiny", progress=False)
    clean = np.array(TextFeatures(folder)["final"])
    _damage(folder / "shard-00000" / "final.npy", how)
    with pytest.raises(ValueError, match="feature cache .* is not whole"):
        TextFeatures(folder)
    with pytest.warns(UserWarning, match="is not whole .*extracting again"):
        again = extract_text_features(tiny, captions, 6, 3, tmp_path, "tiny", progress=False)
    assert np.array_equal(np.array(TextFeatures(again)["final"]), clean)


@pytest.mark.parametrize("how", ["cut", "zeroed"])
def test_damaged_image_features_are_encoded_again(val, tmp_path, how):
    from negutils.models.features import ensure_image_features

    tiny = load_backbone("negbook-tiny")
    clean = ensure_image_features(tiny, val, "tiny", tmp_path, progress=False)
    path = next(tmp_path.glob("images-*.npy"))
    _damage(path, how)
    with pytest.warns(UserWarning, match="are not whole .*encoding them again"):
        again = ensure_image_features(tiny, val, "tiny", tmp_path, progress=False)
    assert torch.equal(again, clean)


def test_two_builders_racing_on_one_benchmark_key_both_succeed(val, tmp_path):
    from concurrent.futures import ProcessPoolExecutor

    from negutils.benchmarks.suite import BenchmarkConfig, ensure_benchmarks

    with ProcessPoolExecutor(2) as pool:
        built = list(pool.map(ensure_benchmarks, [val, val], [BenchmarkConfig()] * 2, [tmp_path] * 2, ["k", "k"]))
    assert built[0].root == built[1].root and built[0].mcq.equals(built[1].mcq)
    assert ensure_benchmarks(val, BenchmarkConfig(), tmp_path, "k").mcq.equals(built[0].mcq)   # whole, no rebuild


def test_writes_are_flushed_to_disk_before_the_rename(tmp_path, monkeypatch):
    import os

    from negutils.core.cache import atomic_save
    from negutils.core.cache import atomic_write_text

    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real(fd))
    atomic_write_text(tmp_path / "a.txt", "x")
    atomic_save(tmp_path / "b.npy", lambda tmp: np.save(tmp, np.zeros(3)))
    assert len(synced) == 2 and (tmp_path / "a.txt").read_text() == "x"


def _extract(folder):
    from negutils.models.features import extract_text_features

    return extract_text_features(load_backbone("negbook-tiny"), ["a dog", "no cat on the mat", "a red star"] * 20,
                                 6, 3, folder, "tiny", progress=False)


def test_two_builders_racing_on_one_feature_cache_both_succeed(tmp_path):
    from negutils.core.workers import run_in_workers
    from negutils.models.features import TextFeatures

    # two processes (one thread each, as the package runs its workers) extracting the same key at once
    folders = run_in_workers(_extract, (), [tmp_path, tmp_path], 2, "race", False)
    assert folders[0] == folders[1]
    merged = TextFeatures(folders[0])                      # whole: its records match what is on disk
    assert merged["final"].shape == (60, 64) and not list(tmp_path.glob("*/.shard-*"))


# ----------------------------------------------------------------------------- caches keyed by content

def test_corrected_captions_or_another_dataset_of_the_same_size_get_other_benchmarks(val, tmp_path):
    """The coco dataset's benchmark and feature caches are keyed by the splits' content: a caption corrected
    in captions_val2017.json, or another dataset with as many images, is a new key, never the old cache."""
    import json

    from negutils.benchmarks.suite import BenchmarkConfig, ensure_benchmarks
    from negutils.session import split_content_key
    from negutils.world.published import read_coco_val, write_coco_layout

    root = write_coco_layout(val, tmp_path / "coco")
    before = read_coco_val(root)
    captions_file = root / "annotations" / "captions_val2017.json"
    captions = json.loads(captions_file.read_text())
    captions["annotations"][0]["caption"] = "a corrected caption of the first image."
    captions_file.write_text(json.dumps(captions))
    after = read_coco_val(root)
    assert len(after) == len(before) and split_content_key(after) != split_content_key(before)
    other = read_coco_val(write_coco_layout(val, tmp_path / "other", id_offset=1_000))
    assert len(other) == len(before) and split_content_key(other) != split_content_key(before)
    assert split_content_key(read_coco_val(root)) == split_content_key(after)        # and stable when unchanged
    config = BenchmarkConfig()
    old = ensure_benchmarks(before, config, tmp_path / "cache", split_content_key(before))
    new = ensure_benchmarks(after, config, tmp_path / "cache", split_content_key(after))
    assert old.root != new.root
    assert "a corrected caption of the first image." in set(new.retrieval_affirmative["query"])
    assert "a corrected caption of the first image." not in set(old.retrieval_affirmative["query"])


# ----------------------------------------------------------------------------- nothing substituted silently

_PUBLISHED_VAL = ["COCO_val_mcq_llama3.1_rephrased.csv", "COCO_val_retrieval.csv",
                  "COCO_val_negated_retrieval_llama3.1_rephrased_affneg_true.csv"]


@pytest.mark.parametrize("files,message", [
    (_PUBLISHED_VAL[1:], r"lacks the published files of split 'val': COCO_val_mcq_llama3.1_rephrased.csv\. "
                         r"It holds 2 files"),
    (_PUBLISHED_VAL[:2] + ["COCO_val_negated_retrieval_llama3.1_rephrased_affneg_false.csv"],
     r"affneg_true.csv \(there is COCO_val_negated_retrieval_llama3.1_rephrased_affneg_false.csv\)"),
    ([_PUBLISHED_VAL[0].lower()] + _PUBLISHED_VAL[1:], r"rephrased.csv \(there is coco_val_mcq_llama3.1"),
    ([], r"lacks the published files of split 'val': COCO_val_mcq.*It holds 0 files\. Name the published files"),
])
def test_a_published_folder_missing_a_file_is_an_error_not_the_books_own_benchmark(tmp_path, files, message):
    from negutils.benchmarks.published import published_files

    for name in files:
        (tmp_path / name).write_text("")
    with pytest.raises(FileNotFoundError, match=message):
        published_files(tmp_path, "val")
    for name in _PUBLISHED_VAL:
        (tmp_path / name).write_text("")
    assert sorted(p.name for p in published_files(tmp_path, "val").values()) == sorted(_PUBLISHED_VAL)


def test_every_result_row_names_the_source_of_its_items(val, tmp_path):
    """A row scored on a published file names the file; a row on the book's own construction says ``built``,
    so a table never passes one off as the other."""
    from pathlib import Path

    from negutils.benchmarks.suite import BenchmarkConfig, ensure_benchmarks, evaluate_methods

    bench = ensure_benchmarks(val, BenchmarkConfig(), tmp_path, "tiny-world")
    bench.files = {"mcq": Path("/data/negbench/COCO_val_mcq_llama3.1_rephrased.csv")}
    scorer = ConstantScorer()
    results = evaluate_methods({"constant": scorer}, {"val": bench}, {"val": val}, "embedded", "toy", "test",
                               retention_reference=scorer)
    source = results.set_index("task")["source"]
    assert source["mcq"] == "COCO_val_mcq_llama3.1_rephrased.csv"
    assert results["source"].notna().all() and len(results) > 5
    assert set(source.drop("mcq")) == {"built"}


def test_a_released_object_named_in_two_cases_is_one_category(tmp_path):
    """CC12M-NegCap's object lists are an LLM's extractions: "Dog" beside "dog" is one object, so an image
    holding a dog never counts "Dog" among the objects it lacks (what its negations would name)."""
    from negutils.benchmarks.cc12m import NEGCAP_FILE, NEGMCQ_FILE, read_cc12m_negations
    from PIL import Image

    (tmp_path / "images" / "00000").mkdir(parents=True)
    for k in range(2):
        Image.new("RGB", (8, 8), (40 * k, 0, 0)).save(tmp_path / "images" / "00000" / f"00000000{k}.jpg")
    paths = [f"/fsx/cc12m/images/00000/00000000{k}.jpg" for k in range(2)]
    pd.DataFrame({"filepath": paths, "caption": ["A dog on a sofa.", "A cat."],
                  "negative_captions": ["['A sofa without a cat.']", "['A cat, no dog.']"],
                  "extracted_objects": ["['Dog', 'sofa']", "['cat']"],
                  "negative_objects": ["['cat']", "['dog']"]}).to_csv(tmp_path / NEGCAP_FILE, index=False)
    pd.DataFrame({"image_path": paths[:1], "correct_answer": [0], "caption_0": ["A dog."], "caption_1": ["No dog."],
                  "caption_2": ["A cat."], "caption_3": ["No sofa."], "correct_answer_template": ["positive"]}
                 ).to_csv(tmp_path / NEGMCQ_FILE, index=False)
    split = read_cc12m_negations(tmp_path)
    assert split.categories == ["cat", "dog", "sofa"]
    assert split.objects[0] == {"dog", "sofa"} and split.absent_categories(0) == ["cat"]


def test_a_layer_or_design_choice_made_on_another_backbone_is_refused(tmp_path, monkeypatch):
    """Chapter 02's layers and chapter 03's design are measured on one backbone; a run on another backbone
    under the same profile must not pick them up (PeakPatch would train at the wrong layers and score)."""
    from negutils.config import get_profile
    from negutils.core.results import ResultsError, write_results
    from negutils.diagnosis import load_layer_choice
    from negutils.methods.peakpatch.train import load_design

    monkeypatch.setenv("NEGBOOK_ARTIFACTS", str(tmp_path))
    prof = get_profile("smoke")
    write_results(pd.DataFrame([{"backbone": "ViT-B-32", "pretrained": "openai", "l_a": 6, "l_p": 8, "ascent": 1,
                                 "reason": "peak"}]), prof, "02_layer_selection")
    design = pd.DataFrame([{"candidate": 0, "identity_init": True, "scn_logit_scale": 100.0, "delta_penalty": 1.0,
                            "chosen": True, "backbone": "ViT-B-32", "pretrained": "openai"}])
    write_results(design, prof, "03_peakpatch_design")
    assert load_layer_choice(prof, "ViT-B-32", "openai").l_p == 8
    assert load_design(prof, "ViT-B-32", "openai")["scn_logit_scale"] == 100.0
    with pytest.raises(ResultsError, match=r"02_layer_selection.csv was measured on ViT-B-32 \(openai\), not on "
                                           r"ViT-L-14 \(openai\).*chapter 02 writes it"):
        load_layer_choice(prof, "ViT-L-14", "openai")
    with pytest.raises(ResultsError, match=r"03_peakpatch_design.csv was measured on ViT-B-32 \(openai\), not on "
                                           r"ViT-B-32 \(laion2b_s34b_b79k\)"):
        load_design(prof, "ViT-B-32", "laion2b_s34b_b79k")
    write_results(design.drop(columns=["backbone", "pretrained"]), prof, "03_peakpatch_design")
    with pytest.raises(ResultsError, match="does not record the backbone its choice was made on: chapter 03"):
        load_design(prof, "ViT-B-32", "openai")
