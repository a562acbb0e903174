"""The embedded world in the published layouts (COCO val2017, VOC2007, NegBench's CSVs), read back
through the readers of real data: what the `coco` dataset path would read on a GPU runner."""
import json

import numpy as np
import pandas as pd
import pytest

from negutils.benchmarks.negbench import BenchmarkFileError, build_mcq, build_retrieval
from negutils.benchmarks.suite import ensure_benchmarks
from negutils.benchmarks.published import (MCQ_FILES, RETRIEVAL_FILES, read_published, read_published_mcq,
                                           read_published_retrieval, with_published, write_published_world)
from negutils.config import get_profile
from negutils.session import load_splits
from negutils.world.coco import load_split
from negutils.world.published import voc_category_name, voc_class_map


@pytest.fixture(scope="module")
def world_splits(tiny_world):
    return {name: load_split(tiny_world / name) for name in ("val", "ood")}


@pytest.fixture(scope="module")
def published(world_splits, tmp_path_factory):
    return write_published_world(world_splits, tmp_path_factory.mktemp("published"))


@pytest.fixture
def coco_splits(published, monkeypatch):
    for variable, path in published.items():
        monkeypatch.setenv(variable, str(path))
    return load_splits(get_profile("smoke", dataset="coco"), ("val", "ood"), progress=False)


def test_the_files_have_the_published_names(published):
    coco, voc, csv_dir = published["COCO_IMAGE_ROOT"], published["VOC_ROOT"], published["NEGBENCH_CSV_DIR"]
    assert (coco / "annotations" / "instances_val2017.json").exists()
    assert (coco / "annotations" / "captions_val2017.json").exists()
    assert sorted(p.name for p in (coco / "val2017").iterdir())[0] == "000000000001.jpg"
    assert voc.parts[-2:] == ("VOCdevkit", "VOC2007")
    assert (voc / "ImageSets" / "Main" / "test.txt").read_text().split()[0] == "000001"
    assert (voc / "Annotations" / "000001.xml").exists() and (voc / "JPEGImages" / "000001.jpg").exists()
    assert {p.name for p in csv_dir.iterdir()} == set(MCQ_FILES.values()) | set(RETRIEVAL_FILES["val"].values())
    mcq = pd.read_csv(csv_dir / MCQ_FILES["val"])
    assert list(mcq.columns) == ["image_path", "correct_answer", "caption_0", "caption_1", "caption_2", "caption_3",
                                 "correct_answer_template"]
    assert (mcq["correct_answer"] == 0).all() and mcq["image_path"].str.startswith("/fsx/").all()
    assert list(pd.read_csv(csv_dir / RETRIEVAL_FILES["val"]["retrieval_negated"]).columns) == ["filepath", "captions"]


def test_coco_val_reads_back_with_the_worlds_objects_and_affirmative_captions(world_splits, coco_splits):
    world, coco = world_splits["val"], coco_splits["val"]
    assert coco.image_ids == world.image_ids
    assert coco.objects == world.objects
    assert [[c["caption"] for c in caps] for caps in coco.captions] == \
        [[c["caption"] for c in caps if not c.get("negated")] for caps in world.captions]
    image = np.asarray(coco.load_image(0), dtype=float)        # the JPEG, found under val2017/
    original = np.asarray(world.images([0])[0], dtype=float)
    assert image.shape == original.shape and np.abs(image - original).mean() < 8     # JPEG at quality 95, 4:2:0


def test_voc_reads_back_with_voc_class_names(world_splits, coco_splits):
    world, voc = world_splits["ood"], coco_splits["ood"]
    classes = voc_class_map(world.categories)
    assert voc.image_ids == world.image_ids
    assert voc.objects == [frozenset(voc_category_name(classes[c]) for c in objs if c in classes)
                           for objs in world.objects]
    assert np.asarray(voc.load_image(0)).shape == np.asarray(world.images([0])[0]).shape


def test_published_csvs_read_back_as_the_benchmarks_built_on_the_published_annotations(published, coco_splits):
    val, ood = coco_splits["val"], coco_splits["ood"]
    frames = read_published(published["NEGBENCH_CSV_DIR"], "val", val)
    ours = build_mcq(val)
    mcq = frames["mcq"]
    assert mcq["image_id"].tolist() == ours["image_id"].tolist()
    correct = [row[f"caption_{row['correct_answer']}"] for _, row in ours.iterrows()]
    assert mcq["caption_0"].tolist() == correct
    for (_, theirs), (_, mine) in zip(mcq.iterrows(), ours.iterrows()):
        assert {theirs[f"caption_{k}"] for k in range(4)} == {mine[f"caption_{k}"] for k in range(4)}
        hybrid = next(mine[f"caption_{k}"] for k in range(4) if mine[f"caption_{k}_type"] == "hybrid")
        assert theirs["caption_1"] == hybrid and theirs["caption_1_type"] == "hybrid"
    assert all(str(p).startswith(str(published["COCO_IMAGE_ROOT"])) for p in mcq["image_path"])
    affirmative, negated = build_retrieval(val)
    for name, built in (("retrieval_affirmative", affirmative), ("retrieval_negated", negated)):
        read = frames[name]
        assert sorted(zip(read["image_id"], read["query"])) == sorted(zip(built["image_id"], built["query"]))
        assert all(json.loads(p) == [i] for p, i in zip(read["positives"], read["image_id"]))
    voc_mcq = read_published(published["NEGBENCH_CSV_DIR"], "ood", ood)
    assert set(voc_mcq) == {"mcq"} and voc_mcq["mcq"]["image_id"].tolist() == build_mcq(ood)["image_id"].tolist()


def test_a_published_row_that_is_no_image_of_the_split_names_file_and_row(published, coco_splits, tmp_path):
    mcq = pd.read_csv(published["NEGBENCH_CSV_DIR"] / MCQ_FILES["val"])
    mcq.loc[2, "image_path"] = "/fsx/negbench/data/coco/val2017/000000999999.jpg"
    bad = tmp_path / MCQ_FILES["val"]
    mcq.to_csv(bad, index=False)
    with pytest.raises(FileNotFoundError, match=f"{bad}: 1 of {len(mcq)} images are missing"):
        read_published_mcq(bad, coco_splits["val"])
    # an image that exists but belongs to another split (VOC's) is refused by name and row
    mcq.loc[2, "image_path"] = str(coco_splits["ood"].image_path(0))
    mcq.to_csv(bad, index=False)
    with pytest.raises(BenchmarkFileError, match=r"row 2's image_path .* is not an image of split 'val'"):
        read_published_mcq(bad, coco_splits["val"])


def test_a_retrieval_row_whose_captions_are_not_a_list_is_refused_by_row(published, coco_splits, tmp_path):
    source = published["NEGBENCH_CSV_DIR"] / RETRIEVAL_FILES["val"]["retrieval_negated"]
    frame = pd.read_csv(source)
    bad = tmp_path / source.name
    frame.loc[1, "captions"] = "There is no moon."
    frame.to_csv(bad, index=False)
    with pytest.raises(BenchmarkFileError, match=f"{bad}: row 1's captions .* not a list literal"):
        read_published_retrieval(bad, coco_splits["val"])
    frame.loc[1, "captions"] = "['fine', '']"
    frame.to_csv(bad, index=False)
    with pytest.raises(BenchmarkFileError, match="row 1's captions must be a list of non-empty strings"):
        read_published_retrieval(bad, coco_splits["val"])
    with pytest.raises(BenchmarkFileError, match=r"missing column\(s\) \['filepath'\]"):
        frame.drop(columns="filepath").to_csv(bad, index=False)
        read_published_retrieval(bad, coco_splits["val"])


def test_the_published_frames_replace_the_books_own_on_the_coco_dataset(published, coco_splits, tmp_path):
    val = coco_splits["val"]
    profile = get_profile("smoke", dataset="coco")
    built = ensure_benchmarks(val, profile.benchmarks, tmp_path, "published-dry-run")
    bench = with_published(built, published["NEGBENCH_CSV_DIR"], val)
    assert (bench.mcq["correct_answer"] == 0).all() and not (built.mcq["correct_answer"] == 0).all()
    assert list(bench.retrieval_negated.columns) == ["query", "image_id", "image_path", "positives"]
    assert "negated_object" in built.retrieval_negated
    assert bench.confusion_2c is built.confusion_2c and bench.factor is built.factor
