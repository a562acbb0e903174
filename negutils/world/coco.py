"""Read any COCO-format split (the embedded world's or real COCO/VOC) into one small object."""
from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError


@dataclass
class CocoSplit:
    """Images of one split with their object sets and captions, in image-id order."""
    name: str
    image_root: Path
    image_ids: list[int]
    file_names: list[str]
    objects: list[frozenset[str]]        # category names present, per image
    captions: list[list[dict]]            # caption records per image ({"caption", ...})
    categories: list[str]
    boxes: list[list[tuple[str, list[float]]]] | None = None  # (category, [x, y, w, h]) per image
    pixels_path: Path | None = None
    # negation training data published with the images (NegBench's CC12M-NegCap / NegMCQ: frames by image
    # index, ``negutils.benchmarks.cc12m``), read instead of built from annotations; None for annotated splits
    released: dict | None = None

    def __len__(self) -> int:
        return len(self.image_ids)

    def absent_categories(self, i: int) -> list[str]:
        """The categories not among image ``i``'s objects, in the order of ``categories`` (what a
        grounded negation of image ``i`` may name)."""
        return [c for c in self.categories if c not in self.objects[i]]

    def image_path(self, i: int) -> Path:
        return self.image_root / self.file_names[i]

    def load_image(self, i: int) -> Image.Image:
        path = self.image_path(i)
        if not path.is_file():
            raise FileNotFoundError(f"split {self.name!r}: image {path} (id {self.image_ids[i]}) is missing")
        try:
            with Image.open(path) as image:
                return to_rgb8(image, path)
        except (UnidentifiedImageError, OSError, SyntaxError) as err:
            raise ValueError(f"split {self.name!r}: image {path} (id {self.image_ids[i]}) cannot be decoded: "
                             f"{err}") from err

    def images(self, indices=None):
        """Images at ``indices`` in a form ``Backbone.encode_images`` takes: a uint8 array when the
        split has pixels.npy, else a lazy sequence that opens files one batch at a time."""
        indices = np.arange(len(self)) if indices is None else np.asarray(indices)
        if self.pixels_path is not None and self.pixels_path.exists():
            return np.asarray(self.pixels()[indices])
        return LazyImages(self, indices)

    def subset(self, indices, name: str) -> "CocoSplit":
        """The images at ``indices`` (in that order) as a split called ``name``; their files stay where they are."""
        indices = [int(i) for i in indices]
        if self.pixels_path is not None:
            raise ValueError(f"split {self.name!r} keeps its images in {self.pixels_path}, whose rows a subset would "
                             "not match: subset a split read from image files")
        pick = lambda values: [values[i] for i in indices]  # noqa: E731
        return CocoSplit(name, self.image_root, pick(self.image_ids), pick(self.file_names), pick(self.objects),
                         pick(self.captions), self.categories, pick(self.boxes) if self.boxes is not None else None)

    def pixels(self) -> np.ndarray:
        """All images as uint8 [N, H, W, 3]: memory-mapped from pixels.npy when the split has one. Only
        the embedded world's splits (one size, pixels.npy) should be read whole; real images stream
        through ``images``."""
        if self.pixels_path is not None and self.pixels_path.exists():
            return np.load(self.pixels_path, mmap_mode="r")
        return np.stack([np.asarray(self.load_image(i)) for i in range(len(self))])


def to_rgb8(image: Image.Image, path: str | os.PathLike = "") -> Image.Image:
    """``image`` as 8-bit RGB with its full range kept. Pillow's ``convert("RGB")`` clips a 16-bit
    greyscale image (mode I;16, or I) to 255 instead of scaling it, which turns almost every pixel
    white; such images are scaled by 255 / 65535 here. Float images (mode F) must lie in [0, 1]."""
    image.load()
    if image.mode in ("I;16", "I;16B", "I;16L", "I;16N", "I"):
        values = np.asarray(image, dtype=np.float64)
        if values.min() < 0 or values.max() > 65535:
            raise ValueError(f"image {path}: mode {image.mode} values span [{values.min():g}, {values.max():g}], "
                             "outside 16 bits")
        image = Image.fromarray(np.round(values * 255.0 / 65535.0).astype(np.uint8), mode="L")
    elif image.mode == "F":
        values = np.asarray(image, dtype=np.float64)
        if not np.isfinite(values).all() or values.min() < 0 or values.max() > 1:
            raise ValueError(f"image {path}: a float image (mode F) must lie in [0, 1], got "
                             f"[{np.nanmin(values):g}, {np.nanmax(values):g}]")
        image = Image.fromarray(np.round(values * 255.0).astype(np.uint8), mode="L")
    return image.convert("RGB")


class LazyImages:
    """A sliceable sequence of PIL images read from disk on access."""

    def __init__(self, split: CocoSplit, indices: np.ndarray):
        self.split, self.indices = split, indices

    def __len__(self) -> int:
        return len(self.indices)

    def __iter__(self):
        return (self.split.load_image(int(i)) for i in self.indices)

    def __getitem__(self, item):
        if isinstance(item, slice):
            return [self.split.load_image(int(i)) for i in self.indices[item]]
        return self.split.load_image(int(self.indices[item]))


def _read_json(path: Path, what: str) -> dict:
    if not path.exists():
        raise FileNotFoundError(f"{what} file {path} does not exist")
    with open(path) as fh:
        try:
            data = json.load(fh)
        except json.JSONDecodeError as err:
            raise ValueError(f"{what} file {path} is not JSON: {err}") from err
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not COCO format: the top level is a {type(data).__name__}, not an object")
    for key in ("images", "annotations"):
        if key not in data:
            raise ValueError(f"{path} is not COCO format: it has no {key!r} key (keys: {sorted(data)})")
    return data


def _require(record: dict, keys: tuple[str, ...], path: Path, what: str) -> None:
    missing = [k for k in keys if k not in record or record[k] is None]
    if missing:
        raise ValueError(f"{path}: {what} {record.get('id', '(no id)')} has no {', '.join(map(repr, missing))}")


def _images(images: list, path: Path) -> list[dict]:
    """The images of an instances file, each with an id and a file name, no id twice."""
    for image in images:
        _require(image, ("id", "file_name"), path, "image")
    repeated = sorted(i for i, n in Counter(im["id"] for im in images).items() if n > 1)
    if repeated:
        raise ValueError(f"{path}: image id(s) {repeated[:5]} appear more than once (their annotations would go to "
                         "one of them)")
    return images


def _categories(categories: list, path: Path) -> dict:
    """{category id: name}, refusing repeated ids or names (two categories would merge)."""
    for category in categories:
        _require(category, ("id", "name"), path, "category")
    names = [c["name"] for c in categories]
    ids = [c["id"] for c in categories]
    for what, values in (("name", names), ("id", ids)):
        repeated = sorted((v for v, n in Counter(values).items() if n > 1), key=str)
        if repeated:
            raise ValueError(f"{path}: category {what}(s) {repeated[:5]} appear more than once")
    return dict(zip(ids, names))


def load_split(split_dir: str | os.PathLike | None = None, *, instances: str | os.PathLike | None = None,
               captions: str | os.PathLike | None = None, image_root: str | os.PathLike | None = None,
               name: str | None = None) -> CocoSplit:
    """Load a split either from a directory laid out like the embedded world
    (``instances.json``, ``captions.json``, ``images/``) or from explicit COCO files.

    ``image_root`` defaults to the directory of the instances file; for real COCO pass the
    folder holding ``val2017/`` (or set ``COCO_IMAGE_ROOT`` and call through the profile).
    """
    if split_dir is not None:
        split_dir = Path(split_dir)
        instances = instances or split_dir / "instances.json"
        captions = captions or split_dir / "captions.json"
    if instances is None:
        raise ValueError("load_split needs split_dir or instances=")
    instances = Path(instances)
    inst = _read_json(instances, "instances")
    if "categories" not in inst:
        raise ValueError(f"{instances} is not a COCO instances file: it has no 'categories' key")
    id_to_cat = _categories(inst["categories"], instances)
    images = sorted(_images(inst["images"], instances), key=lambda im: im["id"])
    index = {im["id"]: k for k, im in enumerate(images)}
    objects: list[set[str]] = [set() for _ in images]
    boxes: list[list] = [[] for _ in images]
    for ann in inst["annotations"]:
        _require(ann, ("image_id", "category_id", "bbox"), instances, "annotation")
        if ann["image_id"] not in index:
            raise ValueError(f"{instances}: annotation {ann.get('id')} refers to unknown image_id {ann['image_id']}")
        if ann.get("category_id") not in id_to_cat:
            raise ValueError(f"{instances}: annotation {ann.get('id')} has category_id {ann.get('category_id')!r}, "
                             "which is not in 'categories'")
        box = ann["bbox"]
        if not (isinstance(box, list) and len(box) == 4 and all(isinstance(v, (int, float)) for v in box)) \
                or box[2] < 0 or box[3] < 0:
            raise ValueError(f"{instances}: annotation {ann.get('id')} (image {ann['image_id']}) has bbox {box!r}; "
                             "COCO boxes are [x, y, width, height] with width, height >= 0")
        k, category = index[ann["image_id"]], id_to_cat[ann["category_id"]]
        objects[k].add(category)
        boxes[k].append((category, box))
    caps: list[list[dict]] = [[] for _ in images]
    if captions is not None and Path(captions).exists():
        for ann in _read_json(Path(captions), "captions")["annotations"]:
            _require(ann, ("image_id", "caption"), Path(captions), "caption")
            if not isinstance(ann["caption"], str) or not ann["caption"].strip():
                raise ValueError(f"{captions}: caption {ann.get('id')} of image {ann['image_id']} is "
                                 f"{ann['caption']!r}, not a non-empty string")
            if ann["image_id"] in index:
                caps[index[ann["image_id"]]].append(ann)
    root = Path(image_root) if image_root is not None else instances.parent
    pixels = instances.parent / "pixels.npy"
    return CocoSplit(
        name=name or (split_dir.name if split_dir is not None else instances.stem),
        image_root=root,
        image_ids=[im["id"] for im in images],
        file_names=[im["file_name"] for im in images],
        objects=[frozenset(o) for o in objects],
        captions=caps,
        categories=[c["name"] for c in sorted(inst["categories"], key=lambda c: c["id"])],
        boxes=boxes,
        pixels_path=pixels if pixels.exists() else None,
    )
