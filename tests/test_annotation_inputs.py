"""Annotation files, images and MCQ CSVs whose content would change what the book measures are errors naming the
file and the offending record, raised by the one reader each goes through (``read_instances`` / ``read_captions``
for every COCO-format split, ``read_rgb8`` for every image file, ``read_mcq_csv`` for NegBench's MCQ CSVs)."""
import json
import re
import struct
import zlib

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from negutils.benchmarks.negbench import BenchmarkFileError, read_mcq_csv
from negutils.world.coco import load_split
from negutils.world.published import TrainSubsets, read_coco_train, read_coco_val

IMAGES = [{"id": 1, "file_name": "1.png"}, {"id": 2, "file_name": "2.png"}]
CATEGORIES = [{"id": 1, "name": "cat"}, {"id": 2, "name": "dog"}]
ANNOTATIONS = [{"id": 10, "image_id": 1, "category_id": 1, "bbox": [0, 0, 4, 4]},
               {"id": 11, "image_id": 2, "category_id": 2, "bbox": [0, 0, 4, 4]}]
CAPTIONS = [{"id": 20, "image_id": 1, "caption": "A cat."}, {"id": 21, "image_id": 2, "caption": "A dog."}]

# COCO's two published splits: each read goes through the same validating reader
READERS = {"val2017": read_coco_val,
           "train2017": lambda root: read_coco_train(root, TrainSubsets(pretrain_images=1, negtrain_images=1))}


def _coco_layout(root, name, images=IMAGES, categories=CATEGORIES, annotations=ANNOTATIONS, captions=CAPTIONS):
    """COCO's annotation files for split ``name`` under ``root``; returns the instances file."""
    (root / "annotations").mkdir(parents=True)
    instances = root / "annotations" / f"instances_{name}.json"
    instances.write_text(json.dumps({"images": images, "annotations": annotations, "categories": categories}))
    (root / "annotations" / f"captions_{name}.json").write_text(json.dumps({"images": images,
                                                                            "annotations": captions}))
    return instances


def _read_with(tmp_path, name, message, file="instances", **layout):
    """Read split ``name`` of a layout, expecting an error that begins with ``file``'s path and ``message``."""
    instances = _coco_layout(tmp_path / "coco", name, **layout)
    path = instances.parent / f"{file}_{name}.json"
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))}: {message}"):
        READERS[name](tmp_path / "coco")


@pytest.mark.parametrize("name", READERS)
def test_a_blank_category_name_is_an_error_naming_the_file_and_category_id(tmp_path, name):
    _read_with(tmp_path, name, r"category 2 has name ' '; a category name is a non-blank string",
               categories=[CATEGORIES[0], {"id": 2, "name": " "}])


@pytest.mark.parametrize("name", READERS)
def test_categories_differing_only_in_case_are_an_error_naming_both(tmp_path, name):
    _read_with(tmp_path, name, r"categories 'Flag' \(id 1\) and 'flag' \(id 2\) differ only in case",
               categories=[{"id": 1, "name": "Flag"}, {"id": 2, "name": "flag"}])


# where a string id sits among integer ones: (layout change, the file it is in, the error's words)
STRING_IDS = {
    "images.id": ({"images": [IMAGES[0], {**IMAGES[1], "id": "2"}]}, "instances", r"image has id '2' \(a str\)"),
    "annotations.image_id": ({"annotations": [ANNOTATIONS[0], {**ANNOTATIONS[1], "image_id": "2"}]}, "instances",
                             r"annotation 11 has image_id '2' \(a str\)"),
    "captions.image_id": ({"captions": [CAPTIONS[0], {**CAPTIONS[1], "image_id": "2"}]}, "captions",
                          r"caption 21 has image_id '2' \(a str\)"),
}


@pytest.mark.parametrize("name", READERS)
@pytest.mark.parametrize("field", STRING_IDS)
def test_an_id_that_is_a_string_among_integers_is_an_error_naming_file_field_and_id(tmp_path, name, field):
    layout, file, message = STRING_IDS[field]
    _read_with(tmp_path, name, rf"{message}; COCO's \w+ values are integers", file=file, **layout)


@pytest.mark.parametrize("name", READERS)
def test_an_instances_file_without_images_is_an_error_naming_it(tmp_path, name):
    _read_with(tmp_path, name, r"'images' is empty: the split has no images", images=[], annotations=[],
               captions=[])


def _png(path, width, height, bit_depth=8, colour_type=2, samples=None):
    """A PNG whose header declares ``width`` x ``height``; its data ``samples`` (big-endian rows), or none."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"" if samples is None else b"".join(b"\x00" + row.astype(">u2").tobytes() for row in samples)
    header = struct.pack(">IIBBBBB", width, height, bit_depth, colour_type, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
                     + chunk(b"IEND", b""))


def _one_image_split(root):
    root.mkdir(parents=True)
    (root / "instances.json").write_text(json.dumps({"images": IMAGES[:1], "annotations": ANNOTATIONS[:1],
                                                     "categories": CATEGORIES}))
    return root


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
@pytest.mark.parametrize("side", [20_000, 10_000])   # beyond twice Pillow's limit (it raises), within (it warns)
def test_an_image_declaring_more_pixels_than_the_limit_is_an_error_naming_file_and_limit(tmp_path, side):
    root = _one_image_split(tmp_path / "split")
    _png(root / "1.png", side, side)
    with pytest.raises(ValueError, match=rf"image {re.escape(str(root / '1.png'))} \(id 1\) declares .*"
                                         rf"limit of {Image.MAX_IMAGE_PIXELS} pixels"):
        load_split(root).load_image(0)


def _twelve_bit_grey(path):
    Image.fromarray(np.tile(np.arange(0, 4096, 16, dtype=np.uint16), (8, 1))).save(path)


def _twelve_bit_colour(path):
    _png(path, 16, 8, bit_depth=16, samples=np.tile(np.arange(0, 4096, 86, dtype=np.uint16)[:48], (8, 1)))


@pytest.mark.parametrize("write, mode", [(_twelve_bit_grey, r"I;16 \(stored as I;16B\)"),
                                         (_twelve_bit_colour, r"RGB \(stored as RGB;16B\)")])
def test_an_image_of_more_than_8_bits_per_sample_is_refused_naming_file_and_mode(tmp_path, write, mode):
    root = _one_image_split(tmp_path / "split")
    write(root / "1.png")
    with pytest.raises(ValueError, match=rf"image {re.escape(str(root / '1.png'))} \(id 1\) has mode {mode}: only "
                                         "images of 8 bits per sample are read"):
        load_split(root).load_image(0)


def test_an_mcq_row_whose_correct_answer_is_not_in_column_0_is_an_error_naming_file_and_row(tmp_path):
    rows = [{"image_path": f"/theirs/{k}.jpg", "correct_answer": answer, "caption_0": "This image features a cup.",
             "caption_1": "h", "caption_2": "p", "caption_3": "n", "correct_answer_template": "positive"}
            for k, answer in enumerate([0, 2, 0])]
    path = tmp_path / "COCO_val_mcq_llama3.1_rephrased.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    with pytest.raises(BenchmarkFileError, match=rf"{re.escape(str(path))}: row 1 has correct_answer 2 \(1 of 3 rows"):
        read_mcq_csv(path)
    shuffled = read_mcq_csv(path, layout="shuffled")        # every row as it is, no option types guessed
    assert shuffled["correct_answer"].tolist() == [0, 2, 0] and "caption_0_type" not in shuffled
