"""COCO 2017 (val2017, and train2017 in seeded disjoint subsets) and VOC2007 test read as splits, and
the embedded world written in those *published* layouts, so the readers of real data (``load_splits``
on the ``coco`` dataset, ``voc_to_coco``) run on files shaped exactly like the real ones, without a
download:

* COCO: ``annotations/instances_<name>.json``, ``annotations/captions_<name>.json`` (the
  affirmative captions only, with COCO's keys: no negations, no record of what a caption names) and
  ``<name>/<12-digit id>.jpg`` for ``val2017`` and ``train2017`` (train2017's JPEGs at varied sizes,
  as COCO's are);
* VOC2007: ``VOCdevkit/VOC2007/JPEGImages/<6-digit id>.jpg``, ``Annotations/<id>.xml`` (1-based
  inclusive pixel boxes) and ``ImageSets/Main/test.txt``. VOC has 20 fixed classes, so the split's
  first 20 categories are written as VOC's classes, in order, and objects of the others are left
  unlabelled (``voc_class_map`` says which is which).

``read_coco_val`` and ``read_voc_test`` read both, real or written here. NegBench's CSVs over
these files are written by ``negutils.benchmarks.published``."""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from ..core.cache import atomic_save
from .coco import CocoSplit, load_split
from .recipes import VOC_CLASSES, VOC_INSTANCES, VOC_NAMES, write_json

JPEG_QUALITY = 95


def read_coco_val(root: str | os.PathLike) -> CocoSplit:
    """COCO val2017 as the ``val`` split, from the folder ``$COCO_IMAGE_ROOT`` names."""
    annotations = Path(root) / "annotations"
    return load_split(instances=annotations / "instances_val2017.json",
                      captions=annotations / "captions_val2017.json", image_root=Path(root) / "val2017", name="val")


@dataclass(frozen=True)
class TrainSubsets:
    """The ``coco`` dataset's ``pretrain`` and ``negtrain`` splits: disjoint subsets of COCO train2017
    (disjoint from val2017 by COCO's construction), drawn by one seeded permutation of its images.
    ``pretrain`` holds what needs held-out annotated images (LCSE's calibration tests), ``negtrain``
    PeakPatch's and NegFull's training images (None: every train2017 image not in ``pretrain``)."""
    pretrain_images: int = 5_000
    negtrain_images: int | None = None
    seed: int = 0


def read_coco_train(root: str | os.PathLike, subsets: TrainSubsets = TrainSubsets()) -> dict[str, CocoSplit]:
    """``{"pretrain": ..., "negtrain": ...}`` from COCO train2017 under ``root`` (``$COCO_IMAGE_ROOT``:
    ``annotations/instances_train2017.json``, ``annotations/captions_train2017.json``, ``train2017/``)."""
    annotations = Path(root) / "annotations"
    full = load_split(instances=annotations / "instances_train2017.json",
                      captions=annotations / "captions_train2017.json", image_root=Path(root) / "train2017",
                      name="train2017")
    wanted = subsets.pretrain_images + (subsets.negtrain_images or 1)
    if subsets.pretrain_images < 1 or wanted > len(full):
        raise ValueError(f"{annotations / 'instances_train2017.json'} has {len(full)} images; TrainSubsets asks for "
                         f"pretrain_images={subsets.pretrain_images} and negtrain_images={subsets.negtrain_images}")
    order = np.random.default_rng([subsets.seed, 0x747232]).permutation(len(full))
    cut = subsets.pretrain_images
    end = None if subsets.negtrain_images is None else cut + subsets.negtrain_images
    return {"pretrain": full.subset(np.sort(order[:cut]), "pretrain"),
            "negtrain": full.subset(np.sort(order[cut:end]), "negtrain")}


def read_voc_test(voc_root: str | os.PathLike) -> CocoSplit:
    """VOC2007 test as the ``ood`` split, from ``VOCdevkit/VOC2007`` (``$VOC_ROOT``) once
    ``data_recipes/voc2007.py`` (``convert_voc``) has converted its annotations."""
    return load_split(instances=Path(voc_root) / VOC_INSTANCES, image_root=voc_root, name="ood")


def coco_file_name(image_id: int) -> str:
    return f"{image_id:012d}.jpg"


def voc_file_stem(image_id: int) -> str:
    return f"{image_id:06d}"


def save_jpeg(image: Image.Image | np.ndarray, path: Path) -> None:
    """``image`` as an RGB JPEG at ``path`` (quality ``JPEG_QUALITY``), written atomically."""
    image = Image.fromarray(np.asarray(image)) if not isinstance(image, Image.Image) else image
    atomic_save(path, lambda tmp: image.convert("RGB").save(tmp, format="JPEG", quality=JPEG_QUALITY))


def _split_images(split: CocoSplit, limit: int | None = None):
    """Each image of the split (the first ``limit``) as an array or PIL image, one at a time."""
    images = split.images()
    for k in range(len(split) if limit is None else min(limit, len(split))):
        yield images[k]


# train2017's written JPEGs: each side drawn from this range of multiples of the world's size, as COCO's
# images differ in size and aspect (so a reader that stacks a split's pixels fails, as it would on COCO)
TRAIN_SCALES = (1.0, 2.5)


def _resized(image, scale: tuple[float, float]):
    """``image`` (array or PIL) resized by (sx, sy), and (sx, sy) as the boxes' scale."""
    image = image if isinstance(image, Image.Image) else Image.fromarray(np.asarray(image))
    width, height = max(1, round(image.width * scale[0])), max(1, round(image.height * scale[1]))
    return image.resize((width, height), Image.BICUBIC), (width / image.width, height / image.height)


def write_coco_layout(split: CocoSplit, root: str | os.PathLike, name: str = "val2017", id_offset: int = 0,
                      varied_sizes_seed: int | None = None, limit: int | None = None) -> Path:
    """``split`` (its first ``limit`` images) as COCO's ``name`` (``val2017`` or ``train2017``) under
    ``root`` (what ``$COCO_IMAGE_ROOT`` points at), image ids shifted by ``id_offset``; with
    ``varied_sizes_seed`` each image is resized by a seeded scale per side within ``TRAIN_SCALES``
    (boxes with it). Returns ``root``."""
    root = Path(root)
    category_id = {category: k + 1 for k, category in enumerate(split.categories)}
    rng = np.random.default_rng(varied_sizes_seed) if varied_sizes_seed is not None else None
    images, annotations, captions = [], [], []
    for k, image in enumerate(_split_images(split, limit)):
        image_id = split.image_ids[k] + id_offset
        scale = (1.0, 1.0)
        if rng is not None:
            image, scale = _resized(image, tuple(rng.uniform(*TRAIN_SCALES, size=2)))
        height, width = np.asarray(image).shape[:2]
        save_jpeg(image, root / name / coco_file_name(image_id))
        images.append({"id": image_id, "file_name": coco_file_name(image_id), "width": width, "height": height,
                       "license": 1, "coco_url": "", "date_captured": ""})
        for category, (x, y, w, h) in split.boxes[k]:
            if rng is not None:
                x, y, w, h = x * scale[0], y * scale[1], w * scale[0], h * scale[1]
            annotations.append({"id": len(annotations) + 1, "image_id": image_id,
                                "category_id": category_id[category], "bbox": [x, y, w, h], "area": w * h,
                                "iscrowd": 0, "segmentation": []})
        captions += [{"id": len(captions) + 1, "image_id": image_id, "caption": c["caption"]}
                     for c in split.captions[k] if not c.get("negated")]
    info = {"description": f"negbook embedded world, split {split.name!r}, in COCO {name}'s layout"}
    write_json(root / "annotations" / f"instances_{name}.json",
               {"info": info, "images": images, "annotations": annotations,
                "categories": [{"id": i, "name": n, "supercategory": "glyph"} for n, i in category_id.items()]})
    write_json(root / "annotations" / f"captions_{name}.json",
               {"info": info, "images": images, "annotations": captions})
    return root


def voc_class_map(categories: list[str]) -> dict[str, str]:
    """World category -> VOC class (VOC's spelling in the XML files) for the first 20 categories."""
    return dict(zip(categories, VOC_CLASSES))


def voc_category_name(voc_class: str) -> str:
    """The category name ``voc_to_coco`` gives a VOC class."""
    return VOC_NAMES.get(voc_class, voc_class)


def write_voc_layout(split: CocoSplit, root: str | os.PathLike) -> Path:
    """``split`` as VOC2007 test under ``root``; returns the ``VOCdevkit/VOC2007`` folder."""
    voc = Path(root) / "VOCdevkit" / "VOC2007"
    classes = voc_class_map(split.categories)
    stems = []
    for k, image in enumerate(_split_images(split)):
        stem = voc_file_stem(split.image_ids[k])
        height, width = np.asarray(image).shape[:2]
        save_jpeg(image, voc / "JPEGImages" / f"{stem}.jpg")
        xml = ET.Element("annotation")
        ET.SubElement(xml, "folder").text = "VOC2007"
        ET.SubElement(xml, "filename").text = f"{stem}.jpg"
        size = ET.SubElement(xml, "size")
        for key, value in (("width", width), ("height", height), ("depth", 3)):
            ET.SubElement(size, key).text = str(value)
        ET.SubElement(xml, "segmented").text = "0"
        for category, (x, y, w, h) in split.boxes[k]:
            if category not in classes:
                continue
            obj = ET.SubElement(xml, "object")
            for key, value in (("name", classes[category]), ("pose", "Unspecified"), ("truncated", "0"),
                               ("difficult", "0")):
                ET.SubElement(obj, key).text = value
            box = ET.SubElement(obj, "bndbox")
            x1, y1 = int(round(x)) + 1, int(round(y)) + 1
            x2, y2 = max(x1, int(round(x + w))), max(y1, int(round(y + h)))
            for key, value in (("xmin", x1), ("ymin", y1), ("xmax", x2), ("ymax", y2)):
                ET.SubElement(box, key).text = str(value)
        atomic_save(voc / "Annotations" / f"{stem}.xml",
                    lambda tmp, tree=ET.ElementTree(xml): tree.write(tmp, encoding="utf-8"))
        stems.append(stem)
    atomic_save(voc / "ImageSets" / "Main" / "test.txt", lambda tmp: tmp.write_text("".join(f"{s}\n" for s in stems)))
    return voc
