"""Read any COCO-format split (the embedded world's or real COCO/VOC) into one small object."""
from __future__ import annotations

import json
import os
import re
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
        where = f"split {self.name!r}: image {path} (id {self.image_ids[i]})"
        if not path.is_file():
            raise FileNotFoundError(f"{where} is missing")
        return read_rgb8(path, where)

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


# Pillow's modes with 8 bits per sample that convert("RGB") maps to RGB without rescaling
EIGHT_BIT_MODES = frozenset({"1", "L", "LA", "La", "P", "PA", "RGB", "RGBA", "RGBa", "RGBX", "CMYK", "YCbCr"})
# decoder modes with 16 bits per sample that Pillow reduces to an 8-bit mode by keeping the high byte (a colour
# PNG or TIFF of 16 bits); BGR;16 and its like are 5-6-5 pixels, which Pillow expands to the full range
_SIXTEEN_BIT_SAMPLES = re.compile(r"(?:L|LA|RGB|RGBA|RGBX|CMYK);16[BLN]?")


def read_rgb8(path: str | os.PathLike, where: str | None = None) -> Image.Image:
    """The image at ``path`` as 8-bit RGB, its header checked before its pixels are decoded
    (``check_image_header``); ``where`` names it in errors (default: its path)."""
    where = where or f"image {path}"
    try:
        with Image.open(path) as image:
            check_image_header(image, where)
            return image.convert("RGB")
    except Image.DecompressionBombError as err:       # Pillow's own refusal, at open, beyond twice its limit
        raise ValueError(f"{where} declares more than twice the limit of {Image.MAX_IMAGE_PIXELS} pixels "
                         f"(PIL.Image.MAX_IMAGE_PIXELS): {err}") from err
    except (UnidentifiedImageError, OSError, SyntaxError) as err:
        raise ValueError(f"{where} cannot be decoded: {err}") from err


def check_image_header(image: Image.Image, where: str) -> None:
    """Refuse, from the header alone, an image larger than ``PIL.Image.MAX_IMAGE_PIXELS`` (Pillow
    only warns below twice that) and one whose samples are not 8 bits: a 16-bit file does not say
    how many of its bits hold data, so 12-bit data scaled as 16-bit would come out 16 times too dark,
    and no scale is right for every file."""
    width, height = image.size
    limit = Image.MAX_IMAGE_PIXELS
    if limit is not None and width * height > limit:
        raise ValueError(f"{where} declares {width} x {height} = {width * height} pixels, over the limit of {limit} "
                         "pixels (PIL.Image.MAX_IMAGE_PIXELS; raise it only for files you trust)")
    stored = _raw_mode(image)
    if image.mode not in EIGHT_BIT_MODES or _SIXTEEN_BIT_SAMPLES.fullmatch(stored):
        mode = image.mode + (f" (stored as {stored})" if stored and stored != image.mode else "")
        raise ValueError(f"{where} has mode {mode}: only images of 8 bits per sample are read, since the bits a "
                         "wider sample uses are not recorded (12-bit data in a 16-bit file would be misscaled); "
                         "convert it to 8 bits with the scale its data needs")


def _raw_mode(image: Image.Image) -> str:
    """The raw mode the decoder reads the image's first tile in ('' when Pillow does not say)."""
    if not image.tile:
        return ""
    args = image.tile[0][3]
    if isinstance(args, tuple):
        args = args[0] if args else ""
    return args if isinstance(args, str) else ""


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


def _records(data: dict, key: str, path: Path) -> list[dict]:
    records = data[key]
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise ValueError(f"{path} is not COCO format: {key!r} is not a list of objects")
    return records


def _require(record: dict, keys: tuple[str, ...], path: Path, what: str) -> None:
    missing = [k for k in keys if k not in record or record[k] is None]
    if missing:
        raise ValueError(f"{path}: {what} {record.get('id', '(no id)')} has no {', '.join(map(repr, missing))}")


def _require_integer(record: dict, field: str, path: Path, what: str) -> None:
    """COCO's ids are integers; a string among them would match no id it refers to (or fail a sort)."""
    value = record[field]
    if isinstance(value, bool) or not isinstance(value, int):
        label = what if field == "id" else f"{what} {record.get('id', '(no id)')}"
        raise ValueError(f"{path}: {label} has {field} {value!r} (a {type(value).__name__}); COCO's {field} values "
                         "are integers")


def _images(images: list[dict], path: Path) -> list[dict]:
    """The images of an instances file in id order, each with an integer id and a file name, no id twice."""
    if not images:
        raise ValueError(f"{path}: 'images' is empty: the split has no images")
    for image in images:
        _require(image, ("id", "file_name"), path, "image")
        _require_integer(image, "id", path, "image")
    repeated = sorted(i for i, n in Counter(im["id"] for im in images).items() if n > 1)
    if repeated:
        raise ValueError(f"{path}: image id(s) {repeated[:5]} appear more than once (their annotations would go to "
                         "one of them)")
    return sorted(images, key=lambda im: im["id"])


def _category_name(category: dict, path: Path) -> str:
    """A category's name: questions and captions are phrased with it, so a blank one would ask about nothing."""
    name = category["name"]
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise ValueError(f"{path}: category {category['id']} has name {name!r}; a category name is a non-blank "
                         "string without surrounding spaces")
    return name


def _categories(categories: list[dict], path: Path) -> dict[int, str]:
    """{category id: name}, refusing repeated ids, and names equal up to case (concepts are compared
    case-insensitively downstream, so two such categories would be one concept with two sets of images)."""
    for category in categories:
        _require(category, ("id", "name"), path, "category")
        _require_integer(category, "id", path, "category")
    names = [_category_name(c, path) for c in categories]
    for what, values in (("name", names), ("id", [c["id"] for c in categories])):
        repeated = sorted((v for v, n in Counter(values).items() if n > 1), key=str)
        if repeated:
            raise ValueError(f"{path}: category {what}(s) {repeated[:5]} appear more than once")
    seen: dict[str, dict] = {}
    for category in categories:
        other = seen.setdefault(category["name"].casefold(), category)
        if other is not category:
            raise ValueError(f"{path}: categories {other['name']!r} (id {other['id']}) and {category['name']!r} "
                             f"(id {category['id']}) differ only in case; concept names are compared "
                             "case-insensitively, so they would be one concept")
    return {c["id"]: c["name"] for c in categories}


def _check_annotation(ann: dict, image_ids: set, categories: dict[int, str], path: Path) -> None:
    _require(ann, ("image_id", "category_id", "bbox"), path, "annotation")
    for field in ("image_id", "category_id"):
        _require_integer(ann, field, path, "annotation")
    if ann["image_id"] not in image_ids:
        raise ValueError(f"{path}: annotation {ann.get('id')} refers to unknown image_id {ann['image_id']}")
    if ann["category_id"] not in categories:
        raise ValueError(f"{path}: annotation {ann.get('id')} has category_id {ann['category_id']!r}, "
                         "which is not in 'categories'")
    box = ann["bbox"]
    if not (isinstance(box, list) and len(box) == 4 and all(isinstance(v, (int, float)) for v in box)) \
            or box[2] < 0 or box[3] < 0:
        raise ValueError(f"{path}: annotation {ann.get('id')} (image {ann['image_id']}) has bbox {box!r}; "
                         "COCO boxes are [x, y, width, height] with width, height >= 0")


@dataclass(frozen=True)
class Instances:
    """A COCO instances file, checked by ``read_instances``: its images in id order, {category id:
    name}, and its annotations, each naming an image and a category of the file, with a valid box."""
    path: Path
    images: list[dict]
    categories: dict[int, str]
    annotations: list[dict]


def read_instances(path: str | os.PathLike) -> Instances:
    """The one reader of COCO instances files (real COCO val2017 and train2017, VOC converted, the
    embedded world): anything that would change what the annotations mean is an error naming the file."""
    path = Path(path)
    data = _read_json(path, "instances")
    if "categories" not in data:
        raise ValueError(f"{path} is not a COCO instances file: it has no 'categories' key")
    categories = _categories(_records(data, "categories", path), path)
    images = _images(_records(data, "images", path), path)
    annotations = _records(data, "annotations", path)
    image_ids = {im["id"] for im in images}
    for ann in annotations:
        _check_annotation(ann, image_ids, categories, path)
    return Instances(path, images, categories, annotations)


def read_captions(path: str | os.PathLike) -> list[dict]:
    """The caption records of a COCO captions file, each with an integer image_id and a non-empty caption."""
    path = Path(path)
    captions = _records(_read_json(path, "captions"), "annotations", path)
    for ann in captions:
        _require(ann, ("image_id", "caption"), path, "caption")
        _require_integer(ann, "image_id", path, "caption")
        if not isinstance(ann["caption"], str) or not ann["caption"].strip():
            raise ValueError(f"{path}: caption {ann.get('id')} of image {ann['image_id']} is "
                             f"{ann['caption']!r}, not a non-empty string")
    return captions


def load_split(split_dir: str | os.PathLike | None = None, *, instances: str | os.PathLike | None = None,
               captions: str | os.PathLike | None = None, image_root: str | os.PathLike | None = None,
               name: str | None = None) -> CocoSplit:
    """Load a split either from a directory laid out like the embedded world
    (``instances.json``, ``captions.json``, ``images/``) or from explicit COCO files, both read by
    ``read_instances`` and ``read_captions``.

    ``image_root`` defaults to the directory of the instances file; for real COCO pass the
    folder holding ``val2017/`` (or set ``COCO_IMAGE_ROOT`` and call through the profile).
    """
    if split_dir is not None:
        split_dir = Path(split_dir)
        instances = instances or split_dir / "instances.json"
        captions = captions or split_dir / "captions.json"
    if instances is None:
        raise ValueError("load_split needs split_dir or instances=")
    inst = read_instances(instances)
    index = {im["id"]: k for k, im in enumerate(inst.images)}
    objects: list[set[str]] = [set() for _ in inst.images]
    boxes: list[list] = [[] for _ in inst.images]
    for ann in inst.annotations:
        k, category = index[ann["image_id"]], inst.categories[ann["category_id"]]
        objects[k].add(category)
        boxes[k].append((category, ann["bbox"]))
    caps: list[list[dict]] = [[] for _ in inst.images]
    if captions is not None and Path(captions).exists():
        for ann in read_captions(captions):
            if ann["image_id"] in index:
                caps[index[ann["image_id"]]].append(ann)
    root = Path(image_root) if image_root is not None else inst.path.parent
    pixels = inst.path.parent / "pixels.npy"
    return CocoSplit(
        name=name or (split_dir.name if split_dir is not None else inst.path.stem),
        image_root=root,
        image_ids=[im["id"] for im in inst.images],
        file_names=[im["file_name"] for im in inst.images],
        objects=[frozenset(o) for o in objects],
        captions=caps,
        categories=[inst.categories[k] for k in sorted(inst.categories)],
        boxes=boxes,
        pixels_path=pixels if pixels.exists() else None,
    )
