"""The ``coco`` dataset's training splits: COCO train2017 in seeded disjoint subsets (written from the world in
its published layout, JPEGs of varied sizes), NegBench's released CC12M-NegCap / NegMCQ read back as the
negation data they were written from, and the trained methods streaming those images batch by batch."""
import json

import numpy as np
import pandas as pd
import pytest
import torch

from negutils import session as session_module
from negutils.benchmarks.cc12m import (NEGCAP_FILE, NEGMCQ_FILE, read_cc12m_negations, write_cc12m_negations)
from negutils.benchmarks.negbench import BenchmarkFileError
from negutils.benchmarks.published import write_published_world
from negutils.config import get_profile
from negutils.methods.training_data import build_negation_data, check_truth, protocol_view, released_frames
from negutils.world.coco import CocoSplit, load_split
from negutils.world.published import TRAIN_SCALES, TrainSubsets, read_coco_train, write_coco_layout

OFFSET = 1_000_000


@pytest.fixture(scope="module")
def published(tiny_world, tmp_path_factory):
    """The tiny world's val and ood in COCO's and VOC's layouts, 64 of its pretrain images as train2017,
    and its pretrain split's negation data as NegBench's released CC12M files."""
    out = tmp_path_factory.mktemp("published")
    env = write_published_world({n: load_split(tiny_world / n) for n in ("val", "ood")}, out)
    write_coco_layout(load_split(tiny_world / "pretrain"), env["COCO_IMAGE_ROOT"], "train2017", id_offset=OFFSET,
                      varied_sizes_seed=0, limit=64)
    source = load_split(tiny_world / "pretrain")
    data = build_negation_data(source)
    env["CC12M_NEGATION_DIR"] = write_cc12m_negations(source, *released_frames(data), out / "cc12m", "/fsx/data")
    return env, data


def test_train2017_subsets_are_disjoint_seeded_sized_and_apart_from_val(published):
    env, _ = published
    coco = env["COCO_IMAGE_ROOT"]
    splits = read_coco_train(coco, TrainSubsets(pretrain_images=10, negtrain_images=20, seed=0))
    pre, neg = set(splits["pretrain"].image_ids), set(splits["negtrain"].image_ids)
    assert (len(pre), len(neg)) == (10, 20) and not pre & neg
    val = set(load_split(instances=coco / "annotations" / "instances_val2017.json").image_ids)
    assert min(pre | neg) > OFFSET and not (pre | neg) & val
    again = read_coco_train(coco, TrainSubsets(pretrain_images=10, negtrain_images=20, seed=0))
    assert again["negtrain"].image_ids == splits["negtrain"].image_ids
    other = read_coco_train(coco, TrainSubsets(pretrain_images=10, negtrain_images=20, seed=1))
    assert other["pretrain"].image_ids != splits["pretrain"].image_ids
    rest = read_coco_train(coco, TrainSubsets(pretrain_images=10))
    assert len(rest["negtrain"]) == 54 and splits["negtrain"].image_ids == sorted(splits["negtrain"].image_ids)
    with pytest.raises(ValueError, match=r"instances_train2017.json has 64 images; .*pretrain_images=60"):
        read_coco_train(coco, TrainSubsets(pretrain_images=60, negtrain_images=10))


def test_train2017_jpegs_vary_in_size_and_their_boxes_scale_with_them(published, tiny_world):
    env, _ = published
    train = read_coco_train(env["COCO_IMAGE_ROOT"], TrainSubsets(pretrain_images=4))["negtrain"]
    world = load_split(tiny_world / "pretrain")
    sizes = {train.load_image(i).size for i in range(len(train))}
    assert len(sizes) > 10 and train.pixels_path is None
    side = np.asarray(world.images([0])).shape[1]
    assert all(TRAIN_SCALES[0] * side - 1 <= s <= TRAIN_SCALES[1] * side + 1 for size in sizes for s in size)
    by_id = {image_id - OFFSET: k for k, image_id in enumerate(train.image_ids)}
    for k in list(by_id.values())[:10]:
        w, h = train.load_image(k).size
        assert all(x >= 0 and y >= 0 and x + bw <= w + 1e-6 and y + bh <= h + 1e-6
                   for _, (x, y, bw, bh) in train.boxes[k])
        assert train.objects[k] == world.objects[world.image_ids.index(train.image_ids[k] - OFFSET)]


def test_the_coco_dataset_reads_every_split_from_real_layouts_and_never_the_glyph_world(published, monkeypatch):
    env, _ = published
    for variable, path in env.items():
        monkeypatch.setenv(variable, str(path))

    def no_world(*args, **kwargs):
        raise AssertionError("the coco dataset read the glyph world")

    monkeypatch.setattr(session_module, "ensure_world", no_world)
    profile = get_profile("smoke", dataset="coco", train2017=TrainSubsets(pretrain_images=16))
    splits = session_module.load_splits(profile, progress=False)
    assert list(splits) == ["pretrain", "negtrain", "val", "ood"]
    assert (len(splits["pretrain"]), len(splits["negtrain"])) == (16, 48)
    assert all(s.pixels_path is None and s.released is None for s in splits.values())
    assert splits["negtrain"].image_root == env["COCO_IMAGE_ROOT"] / "train2017"
    released = session_module.load_splits(get_profile("smoke", dataset="coco", negation_data="negbench-cc12m",
                                                      train2017=TrainSubsets(pretrain_images=16)), progress=False)
    assert released["negtrain"].released is not None and len(released["pretrain"]) == 16
    with pytest.raises(ValueError, match="negation_data 'cc12m'"):
        get_profile("gpu", negation_data="cc12m")


def test_negation_data_on_train2017_is_built_by_the_worlds_code_and_checks_out(published):
    env, _ = published
    negtrain = read_coco_train(env["COCO_IMAGE_ROOT"], TrainSubsets(pretrain_images=8))["negtrain"]
    data = build_negation_data(negtrain)
    assert len(data.negcap) > len(data.affirmative) > 40 and len(data.negmcq) == len(data.affirmative)
    assert set(check_truth(data).values()) == {0}
    assert set(data.negmcq["template"]) == {"positive", "negative", "hybrid"}


def test_the_released_cc12m_files_have_negbenchs_columns_and_read_back_as_the_data_written(published):
    env, data = published
    folder = env["CC12M_NEGATION_DIR"]
    negcap, mcq = pd.read_csv(folder / NEGCAP_FILE), pd.read_csv(folder / NEGMCQ_FILE)
    assert list(negcap.columns) == ["filepath", "caption", "extracted_objects", "negative_objects",
                                    "negative_captions"]
    assert list(mcq.columns) == ["correct_answer", "caption_0", "caption_1", "caption_2", "caption_3",
                                 "correct_answer_template", "image_path"]
    assert negcap["filepath"].str.startswith("/fsx/data/cc12m/00000/").all()
    assert (folder / "images" / "00000" / "000000000.jpg").is_file()
    split = read_cc12m_negations(folder)
    released = build_negation_data(split)
    assert sorted(released.captions[c] for c in released.negcap["caption"]) == \
        sorted(data.captions[c] for c in data.negcap["caption"])

    def questions(d):
        return sorted((tuple(d.captions[getattr(q, f"option_{k}")] for k in range(4)), q.correct, q.template)
                      for q in d.negmcq.itertuples())
    assert questions(released) == questions(data)
    assert set(json.loads(c) for c in released.negmcq["claims_0"]) == {None}
    checked = check_truth(released)
    assert all("not checkable" in name for name in checked) and sum(checked.values()) > 0
    view = protocol_view(released, "negbench")
    assert len(view.images) == len(released.train_images) and (view.mcq_correct >= 0).all()


def test_a_malformed_release_is_refused_by_file_row_and_column(published, tmp_path):
    env, _ = published
    folder = tmp_path / "cc12m"
    folder.mkdir()
    (folder / "images").symlink_to(env["CC12M_NEGATION_DIR"] / "images")
    mcq = pd.read_csv(env["CC12M_NEGATION_DIR"] / NEGMCQ_FILE)
    mcq.loc[0, "correct_answer_template"] = "modified_positive"        # CC12M-NegMCQ's fourth template
    mcq.to_csv(folder / NEGMCQ_FILE, index=False)
    negcap = pd.read_csv(env["CC12M_NEGATION_DIR"] / NEGCAP_FILE)
    negcap.to_csv(folder / NEGCAP_FILE, index=False)
    assert read_cc12m_negations(folder).released["negmcq"]["template"].iloc[0] == "modified_positive"
    negcap.loc[2, "negative_captions"] = "no dog here"
    negcap.to_csv(folder / NEGCAP_FILE, index=False)
    with pytest.raises(BenchmarkFileError, match=r"CC12M-NegCap.csv: row 2's negative_captions .* list literal"):
        read_cc12m_negations(folder)
    (folder / NEGMCQ_FILE).unlink()
    with pytest.raises(FileNotFoundError, match=r"CC12M-NegMCQ.csv does not exist: \$CC12M_NEGATION_DIR"):
        read_cc12m_negations(folder)


@pytest.mark.parametrize("source", ["coco-train2017", "negbench-cc12m"])
def test_negfull_and_peakpatch_train_on_either_source_streaming_variable_size_jpegs(published, tmp_path, source,
                                                                                    monkeypatch):
    from negutils.methods.negfull import NegFullConfig, finetune_negfull
    from negutils.methods.peakpatch.train import PeakPatchConfig, train_peakpatch
    from negutils.methods.training_data import prepare_negation_data
    from negutils.models.backbone import load_backbone
    from negutils.models.features import TextFeatures, extract_text_features

    env, _ = published
    split = read_coco_train(env["COCO_IMAGE_ROOT"], TrainSubsets(pretrain_images=8))["negtrain"] \
        if source == "coco-train2017" else read_cc12m_negations(env["CC12M_NEGATION_DIR"])

    def whole_split(self):
        raise AssertionError(f"split {self.name!r} was read whole")

    monkeypatch.setattr(CocoSplit, "pixels", whole_split)
    backbone = load_backbone("negbook-tiny")
    data = prepare_negation_data(backbone, split, f"tiny:{source}", tmp_path, held_out=0.2, progress=False)
    tuned, history = finetune_negfull(backbone, data, NegFullConfig(alpha=0.5, batch_size=8, lr=1e-3, images=16),
                                      progress=False)
    assert len(history) == 2 and np.isfinite(history["loss"]).all() and (history["loss MCQ"] > 0).all()
    assert any(not torch.equal(a, b) for a, b in zip(backbone.model.parameters(), tuned.model.parameters()))
    features = TextFeatures(extract_text_features(backbone, data.captions, 6, 3, tmp_path, f"tiny:{source}",
                                                  progress=False))
    model, trained = train_peakpatch(features, data, PeakPatchConfig(epochs=2, batch_size=16, lr_ecn=1e-3,
                                                                     lr_scn=1e-3, dropout=0.0), progress=False)
    assert list(trained["epoch"]) == [0, 1, 2] and np.isfinite(trained["loss total"].iloc[1:]).all()  # 0: at init


def test_chapters_00_to_06_reach_data_only_through_their_session():
    """With the coco dataset's loader proven above never to build or read the glyph world, this closes the
    proof for chapters 00-06 on the gpu profile and its dry run: none of them opens a split another way."""
    import re

    from negutils.run import NOTEBOOK_DIR

    chapters = sorted(NOTEBOOK_DIR.glob("0[0-6]_*.md"))
    assert len(chapters) == 7
    for chapter in chapters:
        found = re.findall(r"ensure_world|build_world|load_split\b|organism_session|world_root", chapter.read_text())
        assert not found, (chapter.name, found)
