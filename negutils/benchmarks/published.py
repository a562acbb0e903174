"""NegBench's published CSVs, read into the book's benchmark frames and written from them.

The published files (NegBench's ``datasets.md``) sit in one folder, ``$NEGBENCH_CSV_DIR``:

* ``COCO_val_mcq_llama3.1_rephrased.csv`` and ``VOC2007_mcq_llama3.1_rephrased.csv``: ``image_path``
  (absolute, on the authors' machine), ``correct_answer`` (always 0), ``caption_0..3`` (the correct
  option, then the hybrid, positive and negative wrong ones) and ``correct_answer_template``;
* ``COCO_val_retrieval.csv`` and ``COCO_val_negated_retrieval_llama3.1_rephrased_affneg_true.csv``:
  ``filepath`` (absolute, theirs) and ``captions`` (a Python list literal of the image's queries).

Reading re-roots every path under the split's image folder (``read_mcq_csv``'s rule: the shortest
tail of the path that exists there) and maps it to the split's image id; a path that matches no
image of the split is an error naming the file and the row. Retrieval queries count only their
source image as positive (NegBench's protocol). Writing (for the dry run, from the embedded world)
produces the same columns, with paths under a root that does not exist on this machine."""
from __future__ import annotations

import ast
import difflib
import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Callable

import pandas as pd

from ..core.cache import atomic_save
from ..world.coco import CocoSplit
from ..world.published import (coco_file_name, read_coco_val, read_voc_test, voc_file_stem, write_coco_layout,
                               write_voc_layout)
from ..world.recipes import convert_voc
from .negbench import (MCQ_COLUMNS, NEGBENCH_WRONG_ORDER, BenchmarkFileError, MCQConfig, build_mcq, build_retrieval,
                       read_benchmark_csv, read_mcq_csv, resolve_image_paths)

MCQ_FILES = {"val": "COCO_val_mcq_llama3.1_rephrased.csv", "ood": "VOC2007_mcq_llama3.1_rephrased.csv"}
RETRIEVAL_FILES = {"val": {"retrieval_affirmative": "COCO_val_retrieval.csv",
                           "retrieval_negated": "COCO_val_negated_retrieval_llama3.1_rephrased_affneg_true.csv"}}
RETRIEVAL_COLUMNS = ["filepath", "captions"]


# where write_published_world puts each dataset under its root, by the variable that names it
PUBLISHED_LAYOUT = {"COCO_IMAGE_ROOT": "coco", "VOC_ROOT": "voc/VOCdevkit/VOC2007", "NEGBENCH_CSV_DIR": "negbench",
                    "CC12M_NEGATION_DIR": "cc12m"}


def _file_names(split: str) -> dict[str, str]:
    """{benchmark name: published file name} of ``split`` (``val`` or ``ood``)."""
    return ({"mcq": MCQ_FILES[split]} if split in MCQ_FILES else {}) | RETRIEVAL_FILES.get(split, {})


def published_files(csv_dir: str | os.PathLike, split: str) -> dict[str, Path]:
    """{benchmark name: path} of the published files for ``split`` (``val`` or ``ood``) in ``csv_dir``. A
    folder named for NegBench's files holds every one of them or is an error naming those missing, with the
    file there whose name is nearest (another case, NegBench's ``affneg_false`` variant): the book scoring
    its own benchmark for a missing file would report it beside NegBench's numbers as if it were theirs."""
    folder = Path(csv_dir)
    if not folder.is_dir():
        raise NotADirectoryError(f"NegBench's CSV folder {folder} is not a folder")
    expected = {name: folder / file for name, file in _file_names(split).items()}
    missing = [path.name for path in expected.values() if not path.is_file()]
    if missing:
        present = sorted(p.name for p in folder.iterdir() if p.is_file())
        nearest = {file: difflib.get_close_matches(file, present, n=1, cutoff=0.8) for file in missing}
        hints = "; ".join(f"{file}" + (f" (there is {near[0]})" if near else "") for file, near in nearest.items())
        listing = ", ".join(present[:6]) + (" ..." if len(present) > 6 else "")
        raise FileNotFoundError(f"NegBench's CSV folder {folder} lacks the published files of split {split!r}: "
                                f"{hints}. It holds {len(present)} files{': ' + listing if present else ''}. Name "
                                "the published files exactly (NegBench's datasets.md), or unset $NEGBENCH_CSV_DIR "
                                "to score the book's own benchmarks")
    return expected


def _image_ids(paths: list[str], split: CocoSplit, source: Path, column: str) -> list[int]:
    """The split's image id of each (re-rooted) path; the first path that is no image of the split is an error."""
    lookup = {os.path.normpath(split.image_path(i)): split.image_ids[i] for i in range(len(split))}
    ids = []
    for row, path in enumerate(paths):
        image_id = lookup.get(os.path.normpath(path))
        if image_id is None:
            raise BenchmarkFileError(f"{source}: row {row}'s {column} {path} is not an image of split "
                                     f"{split.name!r} (under {split.image_root})")
        ids.append(image_id)
    return ids


def read_published_mcq(path: str | os.PathLike, split: CocoSplit) -> pd.DataFrame:
    """A published MCQ CSV as the book's MCQ frame over ``split`` (adds ``image_id``)."""
    path = Path(path)
    frame = read_mcq_csv(path, image_root=split.image_root, check_images=True)
    frame["image_id"] = _image_ids(frame["image_path"].tolist(), split, path, "image_path")
    return frame


def read_published_retrieval(path: str | os.PathLike, split: CocoSplit) -> pd.DataFrame:
    """A published retrieval CSV as the book's retrieval frame over ``split``: one row per query
    (``query``, ``image_id``, ``image_path``, ``positives`` = the source image)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"retrieval CSV {path} does not exist")
    frame = read_benchmark_csv(path, RETRIEVAL_COLUMNS, "NegBench retrieval CSV")
    paths = resolve_image_paths(frame["filepath"].tolist(), split.image_root, source=path)
    ids = _image_ids(paths, split, path, "filepath")
    rows = []
    for row, (raw, image_path, image_id) in enumerate(zip(frame["captions"], paths, ids)):
        try:
            queries = ast.literal_eval(raw)
        except (ValueError, SyntaxError) as err:
            raise BenchmarkFileError(f"{path}: row {row}'s captions {raw[:60]!r} is not a list literal "
                                     f"({err})") from err
        if not isinstance(queries, list) or not all(isinstance(q, str) and q.strip() for q in queries):
            raise BenchmarkFileError(f"{path}: row {row}'s captions must be a list of non-empty strings, "
                                     f"got {raw[:60]!r}")
        rows += [{"query": q, "image_id": image_id, "image_path": image_path, "positives": json.dumps([image_id])}
                 for q in queries]
    return pd.DataFrame(rows, columns=["query", "image_id", "image_path", "positives"])


def read_published(csv_dir: str | os.PathLike, split_name: str, split: CocoSplit) -> dict[str, pd.DataFrame]:
    """Every published NegBench frame for ``split_name`` found in ``csv_dir``."""
    return {name: read_published_mcq(path, split) if name == "mcq" else read_published_retrieval(path, split)
            for name, path in published_files(csv_dir, split_name).items()}


# ----------------------------------------------------------------------------- writing (the dry run)

def published_mcq(mcq: pd.DataFrame, image_path: Callable[[int], str]) -> pd.DataFrame:
    """The book's MCQ frame in NegBench's published layout: the correct option first, then the
    hybrid, positive and negative ones; ``image_path`` maps an image id to the path to write."""
    rows = []
    for q, row in enumerate(mcq.itertuples(index=False)):
        by_type = {getattr(row, f"caption_{k}_type"): getattr(row, f"caption_{k}") for k in range(4)}
        order = ("correct",) + NEGBENCH_WRONG_ORDER
        if set(by_type) != set(order):
            raise BenchmarkFileError(f"MCQ question {q}: option types {sorted(by_type)}; the published layout "
                                     f"needs one of each of {list(order)}")
        rows.append({"image_path": image_path(int(row.image_id)), "correct_answer": 0,
                     **{f"caption_{k}": by_type[kind] for k, kind in enumerate(order)},
                     "correct_answer_template": row.correct_answer_template})
    return pd.DataFrame(rows, columns=MCQ_COLUMNS)


def published_retrieval(queries: pd.DataFrame, image_path: Callable[[int], str]) -> pd.DataFrame:
    """The book's retrieval frame in NegBench's layout: one row per source image, its queries as a list literal."""
    grouped = queries.groupby("image_id", sort=True)["query"].apply(list)
    return pd.DataFrame({"filepath": [image_path(int(i)) for i in grouped.index],
                         "captions": [repr(list(q)) for q in grouped]})


def write_published(frames: dict[str, pd.DataFrame], split_name: str, csv_dir: str | os.PathLike,
                    image_path: Callable[[int], str]) -> list[Path]:
    """Write the published files of ``split_name`` from the book's frames (``mcq``, and for ``val``
    the two retrieval sets) into ``csv_dir``."""
    written = []
    for name, file in _file_names(split_name).items():
        frame = published_mcq(frames[name], image_path) if name == "mcq" else \
            published_retrieval(frames[name], image_path)
        written.append(atomic_save(Path(csv_dir) / file,
                                   lambda tmp, f=frame: f.to_csv(tmp, index=False, lineterminator="\n")))
    return written


# ----------------------------------------------------------------------------- the embedded world, published

FOREIGN_ROOT = "/fsx/negbench/data"     # where the published CSVs' absolute paths point: not on this machine


def write_published_world(splits: dict[str, CocoSplit], out: str | os.PathLike, mcq: MCQConfig = MCQConfig(),
                          retrieval_seed: int = 0, foreign_root: str = FOREIGN_ROOT) -> dict[str, Path]:
    """The ``val`` split as COCO val2017 and the ``ood`` split as VOC2007 test under ``out``, and
    NegBench's CSVs over them: built, as NegBench built them, from the published annotations read
    back (COCO's affirmative captions, VOC's class names), with image paths absolute under
    ``foreign_root``. Returns the environment the ``coco`` dataset reads them through:
    ``COCO_IMAGE_ROOT``, ``VOC_ROOT`` (after the VOC recipe's conversion) and ``NEGBENCH_CSV_DIR``."""
    out = Path(out)
    coco = write_coco_layout(splits["val"], out / PUBLISHED_LAYOUT["COCO_IMAGE_ROOT"])
    voc = write_voc_layout(splits["ood"], out / Path(PUBLISHED_LAYOUT["VOC_ROOT"]).parents[1])   # VOCdevkit's parent
    convert_voc(voc)
    val, ood = read_coco_val(coco), read_voc_test(voc)
    csv_dir = out / PUBLISHED_LAYOUT["NEGBENCH_CSV_DIR"]
    affirmative, negated = build_retrieval(val, retrieval_seed)
    write_published({"mcq": build_mcq(val, mcq), "retrieval_affirmative": affirmative, "retrieval_negated": negated},
                    "val", csv_dir, lambda i: f"{foreign_root}/coco/val2017/{coco_file_name(i)}")
    write_published({"mcq": build_mcq(ood, mcq)}, "ood", csv_dir,
                    lambda i: f"{foreign_root}/VOCdevkit/VOC2007/JPEGImages/{voc_file_stem(i)}.jpg")
    return {"COCO_IMAGE_ROOT": coco, "VOC_ROOT": voc, "NEGBENCH_CSV_DIR": csv_dir}


def with_published(bench, csv_dir: str | os.PathLike, split: CocoSplit):
    """``bench`` (a ``Benchmarks``) with every published NegBench frame of its split found in
    ``csv_dir`` in place of the book's own."""
    files = published_files(csv_dir, bench.split)
    return replace(bench, **read_published(csv_dir, bench.split, split), files={**bench.files, **files})
