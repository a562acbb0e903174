"""NegBench's released fine-tuning sets, CC12M-NegCap and CC12M-NegMCQ, read as a split whose negation
data comes with it, and written from a split (the dry run's small set, from the embedded world).

The files sit in one folder, ``$CC12M_NEGATION_DIR``, beside the images as img2dataset downloads them:

* ``CC12M-NegCap.csv``: one row per image, NegBench's ``generate_negative_captions.py`` output:
  ``filepath``, ``caption`` (the image's affirmative caption) and ``negative_captions`` (a Python
  list literal of captions that negate objects a detector verified absent, so they are *true* of the
  image); ``extracted_objects`` and ``negative_objects`` (list literals) are read when present;
* ``CC12M-NegMCQ.csv``: NegBench's ``create_mcq.py`` output: ``image_path``, ``correct_answer``
  (0-3, shuffled), ``caption_0..3``, ``correct_answer_template`` (positive, negative, hybrid, or
  ``modified_positive`` for an image with one extracted object);
* ``images/``: img2dataset's layout (``00000/000000000.jpg``, ...).

Paths in both CSVs are absolute paths of the authors' machine, re-rooted under ``images/`` as NegBench's
benchmark CSVs are (``resolve_image_paths``). The split's ``released`` frames carry the negation data by
image index; ``negutils.methods.training_data`` turns them into the same ``NegationData`` the world's and
COCO's annotations give."""
from __future__ import annotations

import ast
import os
from pathlib import Path

import pandas as pd

from ..core.cache import atomic_save
from ..world.coco import CocoSplit
from ..world.published import save_jpeg
from .negbench import BenchmarkFileError, read_benchmark_csv, read_mcq_csv, resolve_image_paths

NEGCAP_FILE, NEGMCQ_FILE, IMAGE_FOLDER = "CC12M-NegCap.csv", "CC12M-NegMCQ.csv", "images"
NEGCAP_COLUMNS = ["filepath", "caption", "negative_captions"]
NEGMCQ_TEMPLATES = ("positive", "negative", "hybrid", "modified_positive")


def _string_list(raw: str, path: Path, row: int, column: str) -> list[str]:
    """A list literal of non-empty strings, or an error naming the file, row and column."""
    try:
        values = ast.literal_eval(raw) if str(raw).strip() else []
    except (ValueError, SyntaxError) as err:
        raise BenchmarkFileError(f"{path}: row {row}'s {column} {str(raw)[:60]!r} is not a list literal ({err})") \
            from err
    if not isinstance(values, list) or not all(isinstance(v, str) and v.strip() for v in values):
        raise BenchmarkFileError(f"{path}: row {row}'s {column} must be a list of non-empty strings, got "
                                 f"{str(raw)[:60]!r}")
    return [v.strip() for v in values]


def _object_names(raw: str, path: Path, row: int, column: str) -> list[str]:
    """An object list (``extracted_objects``, ``negative_objects``) in lower case: the release's objects are an
    LLM's extractions, so "Dog" and "dog" name one object, and as two categories an image holding a dog would
    count "Dog" among its absent objects and be negated with it."""
    return [name.lower() for name in _string_list(raw, path, row, column)]


def read_cc12m_negations(folder: str | os.PathLike, name: str = "negtrain") -> CocoSplit:
    """The released CC12M-NegCap and CC12M-NegMCQ under ``folder`` as one split: an image of either file
    is an image of the split (NegCap's first), its captions NegCap's affirmative and negated ones, its
    objects NegCap's ``extracted_objects`` where given; ``released`` holds both files by image index."""
    folder = Path(folder)
    root = folder / IMAGE_FOLDER
    negcap_path, mcq_path = folder / NEGCAP_FILE, folder / NEGMCQ_FILE
    for path in (negcap_path, mcq_path):
        if not path.exists():
            raise FileNotFoundError(f"{path} does not exist: $CC12M_NEGATION_DIR must hold {NEGCAP_FILE}, "
                                    f"{NEGMCQ_FILE} and {IMAGE_FOLDER}/ (see data_recipes/README.md)")
    negcap = read_benchmark_csv(negcap_path, NEGCAP_COLUMNS, "CC12M-NegCap CSV")
    negcap["filepath"] = resolve_image_paths(negcap["filepath"].tolist(), root, source=negcap_path)
    mcq = read_mcq_csv(mcq_path, image_root=root, check_images=True, templates=NEGMCQ_TEMPLATES,
                       layout="shuffled")
    paths = list(dict.fromkeys(negcap["filepath"].tolist() + mcq["image_path"].tolist()))
    index = {p: k for k, p in enumerate(paths)}
    objects: list[set[str]] = [set() for _ in paths]
    captions: list[list[dict]] = [[] for _ in paths]
    negcap_rows = []
    for row, record in enumerate(negcap.itertuples(index=False)):
        i = index[record.filepath]
        if not str(record.caption).strip():
            raise BenchmarkFileError(f"{negcap_path}: row {row} has an empty caption")
        captions[i].append({"caption": str(record.caption).strip()})
        for caption in _string_list(record.negative_captions, negcap_path, row, "negative_captions"):
            captions[i].append({"caption": caption, "negated": True})
            negcap_rows.append({"image_index": i, "caption": caption})
        if "extracted_objects" in negcap.columns:
            objects[i] |= set(_object_names(record.extracted_objects, negcap_path, row, "extracted_objects"))
    categories = set().union(*objects)
    if "negative_objects" in negcap.columns:
        for row, raw in enumerate(negcap["negative_objects"]):
            categories |= set(_object_names(raw, negcap_path, row, "negative_objects"))
    released_mcq = pd.DataFrame({"image_index": [index[p] for p in mcq["image_path"]],
                                 **{f"caption_{k}": mcq[f"caption_{k}"].astype(str) for k in range(4)},
                                 "correct": mcq["correct_answer"].astype(int),
                                 "template": mcq["correct_answer_template"]})
    return CocoSplit(name, root, list(range(len(paths))), [os.path.relpath(p, root) for p in paths],
                     [frozenset(o) for o in objects], captions, sorted(categories),
                     released={"negcap": pd.DataFrame(negcap_rows, columns=["image_index", "caption"]),
                               "negmcq": released_mcq, "source": str(folder)})


def write_cc12m_negations(split: CocoSplit, negcap: pd.DataFrame, negmcq: pd.DataFrame, folder: str | os.PathLike,
                          foreign_root: str) -> Path:
    """A small CC12M-NegCap / CC12M-NegMCQ set in NegBench's published columns under ``folder``, over the
    images of ``split`` that ``negcap`` names (rows ``image_index``, ``caption``, ``negative_captions``
    (a list), ``extracted_objects``, ``negative_objects``), their JPEGs in img2dataset's layout and
    absolute paths under ``foreign_root``; ``negmcq`` rows are ``image_index``, ``caption_0..3``,
    ``correct_answer``, ``correct_answer_template``. Returns ``folder``."""
    folder = Path(folder)
    images = split.images()
    path_of = {}
    for k, i in enumerate(sorted(set(negcap["image_index"]) | set(negmcq["image_index"]))):
        relative = f"{k // 10_000:05d}/{k:09d}.jpg"
        save_jpeg(images[int(i)], folder / IMAGE_FOLDER / relative)
        path_of[int(i)] = f"{foreign_root}/cc12m/{relative}"
    rows = pd.DataFrame({"filepath": [path_of[int(i)] for i in negcap["image_index"]],
                         "caption": negcap["caption"],
                         "extracted_objects": [repr(sorted(o)) for o in negcap["extracted_objects"]],
                         "negative_objects": [repr(sorted(o)) for o in negcap["negative_objects"]],
                         "negative_captions": [repr(list(c)) for c in negcap["negative_captions"]]})
    mcq = negmcq.assign(image_path=[path_of[int(i)] for i in negmcq["image_index"]])
    mcq = mcq[["correct_answer", *[f"caption_{k}" for k in range(4)], "correct_answer_template", "image_path"]]
    for name, frame in ((NEGCAP_FILE, rows), (NEGMCQ_FILE, mcq)):
        atomic_save(folder / name, lambda tmp, f=frame: f.to_csv(tmp, index=False, lineterminator="\n"))
    return folder

