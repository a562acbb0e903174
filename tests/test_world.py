import json
import math
from pathlib import Path

import numpy as np
import pytest
from pycocotools.coco import COCO

from negutils.world import alt_text
from negutils.world.coco import load_split
from negutils.world.generate import (IN_DOMAIN_BACKGROUNDS, OOD_BACKGROUNDS, SPLITS, WorldConfig, build_world,
                                     generate_split)
from negutils.world.glyphs import CATEGORY_NAMES
from negutils.world.coco import CocoSplit


def test_at_least_twenty_noun_categories():
    assert len(CATEGORY_NAMES) >= 20
    assert all(name.isalpha() and name.islower() for name in CATEGORY_NAMES)


def test_same_seed_gives_byte_identical_files_whether_splits_are_built_in_turn_or_side_by_side(
        tmp_path, tiny_world_config):
    a = build_world(tiny_world_config, tmp_path / "a", progress=False, workers=1)
    b = build_world(tiny_world_config, tmp_path / "b", progress=False, workers=2)
    for split in SPLITS:
        for name in ("instances.json", "captions.json", "pixels.npy"):
            assert (a / split / name).read_bytes() == (b / split / name).read_bytes(), (split, name)
        first = sorted((a / split / "images").iterdir())[0].name
        assert (a / split / "images" / first).read_bytes() == (b / split / "images" / first).read_bytes()


def test_another_seed_gives_another_world(tmp_path):
    cfg = dict(pretrain=8, negtrain=4, val=4, ood=4)
    a = build_world(WorldConfig(seed=1, **cfg), tmp_path / "a", progress=False)
    b = build_world(WorldConfig(seed=2, **cfg), tmp_path / "b", progress=False)
    assert (a / "val" / "instances.json").read_bytes() != (b / "val" / "instances.json").read_bytes()


def test_instances_load_with_pycocotools_and_boxes_lie_inside(tiny_world, tiny_world_config):
    coco = COCO(str(tiny_world / "val" / "instances.json"))
    assert len(coco.getImgIds()) == tiny_world_config.val
    assert len(coco.getCatIds()) == len(CATEGORY_NAMES)
    size = tiny_world_config.image_size
    for ann in coco.loadAnns(coco.getAnnIds()):
        x, y, w, h = ann["bbox"]
        assert 0 <= x and 0 <= y and x + w <= size + 1e-6 and y + h <= size + 1e-6 and w > 0 and h > 0


def test_one_to_four_objects_and_split_backgrounds(tiny_world):
    for split in SPLITS:
        s = load_split(tiny_world / split)
        assert all(1 <= len(o) <= 4 for o in s.objects)
        backgrounds = {im["background"]
                       for im in json.loads((tiny_world / split / "instances.json").read_text())["images"]}
        expected = OOD_BACKGROUNDS if split == "ood" else IN_DOMAIN_BACKGROUNDS
        assert backgrounds <= set(expected)


def test_ood_has_more_objects_per_image(tmp_path):
    root = build_world(WorldConfig(pretrain=4, negtrain=4, val=300, ood=300), tmp_path / "w", progress=False)
    mean = {s: np.mean([len(o) for o in load_split(root / s).objects]) for s in ("val", "ood")}
    assert mean["ood"] > mean["val"] + 0.5


def test_pixels_match_png_files(tiny_world):
    s = load_split(tiny_world / "val")
    assert np.array_equal(np.asarray(s.load_image(3)), s.pixels()[3])


def test_captions_are_true_of_their_image(tiny_world):
    for split in SPLITS:
        s = load_split(tiny_world / split)
        for objects, caps in zip(s.objects, s.captions):
            assert caps[0]["mentioned"] and set(caps[0]["mentioned"]) == objects  # first names everything
            for c in caps:
                assert set(c["mentioned"]) <= objects, c
                assert not set(c["negated"]) & objects, f"negated caption names a present object: {c}"
                for name in c["mentioned"] + c["negated"]:
                    assert name in c["caption"]


@pytest.mark.parametrize("rate", [0.0, 0.01, 0.2])
def test_negation_rate_is_what_was_asked(tmp_path, rate):
    cfg = WorldConfig(pretrain=500, negtrain=4, val=4, ood=4, negation_rate=rate, seed=7)
    generate_split(cfg, "pretrain", tmp_path / "pretrain", progress=False)
    caps = [c for per in load_split(tmp_path / "pretrain").captions for c in per]
    observed = sum(bool(c["negated"]) for c in caps) / len(caps)
    sigma = math.sqrt(max(rate * (1 - rate), 1e-12) / len(caps))
    assert abs(observed - rate) <= 4 * sigma + 1e-12, (observed, rate)


def test_at_least_five_phrasings_each():
    assert len(alt_text.AFFIRMATIVE_PHRASINGS) >= 5 and len(alt_text.NEGATED_PHRASINGS) >= 5


def test_benchmark_templates_are_held_out_of_pretraining_negations():
    for template in alt_text.NEGATED_PHRASINGS:
        for held_out in ("does not feature", "but not", "There is no"):
            assert held_out not in template


def test_cooccurring_pairs_appear_together_more_than_chance(tmp_path):
    generate_split(WorldConfig(pretrain=800, negtrain=4, val=4, ood=4, cooccurrence=0.8), "pretrain",
                   tmp_path / "p", progress=False)
    objs = load_split(tmp_path / "p").objects
    with_house = [o for o in objs if "house" in o and len(o) > 1]
    assert np.mean(["tree" in o for o in with_house]) > 0.5


def test_bad_config_is_rejected():
    with pytest.raises(ValueError, match="negation_rate"):
        WorldConfig(negation_rate=1.5)
    with pytest.raises(ValueError, match="unknown split"):
        WorldConfig().split_spec("test")


def test_split_is_named_after_its_directory(tiny_world):
    assert load_split(tiny_world / "val").name == "val"
    assert load_split(instances=tiny_world / "ood" / "instances.json", name="voc").name == "voc"


def test_absent_categories_keep_the_category_order(tiny_world):
    split = CocoSplit("hand", Path("."), [1, 2], ["a.png", "b.png"], [frozenset({"dog", "cat"}), frozenset()],
                      [[], []], ["cat", "bird", "dog", "apple"])
    assert split.absent_categories(0) == ["bird", "apple"]
    assert split.absent_categories(1) == ["cat", "bird", "dog", "apple"]
    val = load_split(tiny_world / "val")
    for i in range(len(val)):
        absent = val.absent_categories(i)
        assert set(absent).isdisjoint(val.objects[i]) and set(absent) | val.objects[i] == set(val.categories)
        assert absent == sorted(absent, key=val.categories.index)


@pytest.mark.parametrize("content, message", [
    ("[1, 2]", r"bad\.json is not COCO format: the top level is a list"),
    ('{"images": []}', r"bad\.json is not COCO format: it has no 'annotations' key"),
    ("{oops", r"bad\.json is not JSON"),
    ('{"images": [{"id": 1, "file_name": "a.png"}], "annotations": [{"id": 7, "image_id": 1, "category_id": 9, '
     '"bbox": [0, 0, 1, 1]}], "categories": [{"id": 1, "name": "cup"}]}', r"annotation 7 has category_id 9"),
])
def test_non_coco_annotation_files_are_named(tmp_path, content, message):
    (tmp_path / "bad.json").write_text(content)
    with pytest.raises(ValueError, match=message):
        load_split(instances=tmp_path / "bad.json")


def test_a_missing_image_file_is_named(tiny_world, tmp_path):
    split = load_split(instances=tiny_world / "val" / "instances.json", image_root=tmp_path)
    split.pixels_path = None
    with pytest.raises(FileNotFoundError, match=r"split 'instances': image .*val_000001\.png \(id 1\) is missing"):
        split.load_image(0)


def test_objects_mostly_wear_their_category_colour(tmp_path):
    from negutils.world.generate import typical_colour

    generate_split(WorldConfig(pretrain=400, negtrain=4, val=4, ood=4, colour_prior=0.7), "pretrain", tmp_path / "p",
                   progress=False)
    data = json.loads((tmp_path / "p" / "instances.json").read_text())
    names = {c["id"]: c["name"] for c in data["categories"]}
    typical = np.mean([a["colour"] == typical_colour(names[a["category_id"]]) for a in data["annotations"]])
    assert 0.65 < typical < 0.8  # 0.7 plus the 1-in-10 random draws that land on it anyway: 0.73


def test_an_extra_split_extends_its_own_stream_and_draws_new_images_from_another(tiny_world, tiny_world_config,
                                                                                   tmp_path):
    """The split's own stream grows it (its first images are the world's, byte for byte); another stream
    draws images the world does not hold, under other file names; neither changes the world's key."""
    from negutils.world.coco import load_split
    from negutils.world.generate import ensure_extra_split

    world = np.load(tiny_world / "negtrain" / "pixels.npy")
    grown = ensure_extra_split(tiny_world_config, "negtrain", "negtrain", 40, tmp_path)
    assert np.array_equal(np.load(grown / "pixels.npy")[:len(world)], world)
    assert load_split(grown).file_names[:len(world)] == load_split(tiny_world / "negtrain").file_names
    fresh = ensure_extra_split(tiny_world_config, "negtrain", "negtrain-decision", 16, tmp_path)
    pixels = np.load(fresh / "pixels.npy")
    assert len(pixels) == 16 and not any(np.array_equal(p, w) for p in pixels for w in world)
    assert not set(load_split(fresh).file_names) & set(load_split(tiny_world / "negtrain").file_names)
    assert ensure_extra_split(tiny_world_config, "negtrain", "negtrain-decision", 16, tmp_path) == fresh  # reused
    with pytest.raises(ValueError, match="the world's val split"):
        ensure_extra_split(tiny_world_config, "negtrain", "val", 16, tmp_path)
    with pytest.raises(ValueError, match="n_images must be positive"):
        ensure_extra_split(tiny_world_config, "negtrain", "x", 0, tmp_path)
