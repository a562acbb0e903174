"""The embedded world: procedurally generated glyph images with exact ground truth.

Each split is written in COCO format so every benchmark builder reads the organism's data and
real COCO through the same code:

    <root>/world.json               the config that made it and the category list
    <root>/<split>/instances.json   COCO instances (images, annotations with bboxes, categories)
    <root>/<split>/captions.json    COCO captions, plus ``mentioned`` / ``negated`` per caption
    <root>/<split>/images/*.png     the images
    <root>/<split>/pixels.npy       the same images as one uint8 [N, H, W, 3] array (fast training)

Objects take their category's typical colour with probability ``colour_prior`` (0.7), as
real categories have colour priors. Without it a from-scratch ViT does not learn a single shape in
the steps a CPU pretraining budget allows: it matches colour words, object counts and backgrounds
and leaves category detection AUC at chance. With it, shape and colour are learned together and
detection AUC rises.

Splits: ``pretrain`` (CLIP pretraining), ``negtrain`` (disjoint images for correction
training), ``val`` (the COCO-val analogue) and ``ood`` (other backgrounds and more objects per
image: the VOC analogue).
"""
from __future__ import annotations

import dataclasses
import json
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw
from tqdm.auto import tqdm

from ..core.cache import atomic_write_json, build_directory_atomically, config_hash
from ..core.workers import WORKERS, run_in_workers
from . import alt_text
from .glyphs import CATEGORY_NAMES, COLOURS, draw_glyph
from .grammar import STRUCTURES

# Bump when rendering or captioning changes, so cached worlds are rebuilt.
WORLD_VERSION = 2
SPLITS = ("pretrain", "negtrain", "val", "ood")
IN_DOMAIN_BACKGROUNDS = ("plain", "stripes", "dots", "gradient", "noise")
OOD_BACKGROUNDS = ("checker", "grid", "rings", "speckle")
# Pairs that usually appear together, so galleries with confusing images exist later (KTN App. D).
COOCCURRING_PAIRS: tuple[tuple[str, str], ...] = (
    ("house", "tree"), ("boat", "fish"), ("moon", "star"),
    ("flag", "tent"), ("cup", "heart"), ("umbrella", "bolt"),
)
_SUPERSAMPLE = 2


@dataclass(frozen=True)
class SplitSpec:
    n_images: int
    object_count_weights: tuple[float, ...]  # P(1 object), P(2), ...
    backgrounds: tuple[str, ...]


@dataclass(frozen=True)
class WorldConfig:
    """Everything that determines the world's bytes. Same config, same files."""
    pretrain: int = 40_000
    negtrain: int = 8_000
    val: int = 2_000
    ood: int = 1_000
    image_size: int = 64
    seed: int = 0
    negation_rate: float = 0.01
    captions_per_image: int = 5
    cooccurrence: float = 0.6
    colour_mention_rate: float = 0.5
    colour_prior: float = 0.7        # P(an object has its category's typical colour): see above
    # P(list, attributes, relation, count, relative clause) for an affirmative caption (alt_text)
    structure_mix: tuple[float, ...] = (0.4, 0.2, 0.2, 0.1, 0.1)
    in_domain_counts: tuple[float, ...] = (0.35, 0.35, 0.2, 0.1)
    ood_counts: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4)
    version: int = WORLD_VERSION

    def __post_init__(self):
        if not 0.0 <= self.negation_rate <= 1.0:
            raise ValueError(f"WorldConfig.negation_rate must be in [0, 1], got {self.negation_rate}")
        for name in ("in_domain_counts", "ood_counts"):
            weights = getattr(self, name)
            if len(weights) > len(CATEGORY_NAMES) or min(weights) < 0 or sum(weights) <= 0:
                raise ValueError(f"WorldConfig.{name} must be non-negative weights for 1..k objects, got {weights}")
        if len(self.structure_mix) != len(STRUCTURES) or min(self.structure_mix) < 0 or sum(self.structure_mix) <= 0:
            raise ValueError(f"WorldConfig.structure_mix must be {len(STRUCTURES)} non-negative weights for "
                             f"{STRUCTURES}, got {self.structure_mix}")

    def split_spec(self, split: str) -> SplitSpec:
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; the world has {SPLITS}")
        if split == "ood":
            return SplitSpec(self.ood, self.ood_counts, OOD_BACKGROUNDS)
        return SplitSpec(getattr(self, split), self.in_domain_counts, IN_DOMAIN_BACKGROUNDS)

    def key(self) -> str:
        return config_hash(self)


def split_rng(seed: int, split: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(split.encode())])


def sample_objects(rng: np.random.Generator, count_weights: tuple[float, ...],
                   cooccurrence: float) -> list[str]:
    """Distinct categories for one image; a pair member pulls in its partner w.p. ``cooccurrence``."""
    weights = np.asarray(count_weights, dtype=float)
    n = 1 + int(rng.choice(len(weights), p=weights / weights.sum()))
    partner = {a: b for a, b in COOCCURRING_PAIRS} | {b: a for a, b in COOCCURRING_PAIRS}
    chosen: list[str] = []
    while len(chosen) < n:
        remaining = [c for c in CATEGORY_NAMES if c not in chosen]
        name = remaining[int(rng.integers(len(remaining)))]
        chosen.append(name)
        mate = partner.get(name)
        if mate and mate not in chosen and len(chosen) < n and rng.random() < cooccurrence:
            chosen.append(mate)
    return chosen


def render_background(rng: np.random.Generator, kind: str, size: int) -> np.ndarray:
    base = rng.uniform(90, 170) + rng.uniform(-20, 20, size=3)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    period = rng.uniform(0.1, 0.2) * size
    angle = rng.uniform(0, np.pi)
    along = xx * np.cos(angle) + yy * np.sin(angle)
    if kind == "plain":
        delta = np.zeros_like(xx)
    elif kind == "stripes":
        delta = 22 * np.sign(np.sin(2 * np.pi * along / period))
    elif kind == "dots":
        p = period
        delta = 25 * ((((xx % p) - p / 2) ** 2 + ((yy % p) - p / 2) ** 2) < (p / 4) ** 2)
    elif kind == "gradient":
        delta = 70 * (along / along.max() - 0.5) if along.max() > 0 else np.zeros_like(xx)
    elif kind == "noise":
        delta = rng.normal(0, 12, size=(size, size)).astype(np.float32)
    elif kind == "checker":
        p = max(2, int(period))
        delta = 40.0 * (((xx // p + yy // p) % 2) - 0.5)
    elif kind == "grid":
        p = max(3, int(period))
        delta = 45.0 * (((xx % p) < max(1, p // 6)) | ((yy % p) < max(1, p // 6)))
    elif kind == "rings":
        c = rng.uniform(0, size, size=2)
        r = np.hypot(xx - c[0], yy - c[1])
        delta = 25 * np.sin(2 * np.pi * r / period)
    elif kind == "speckle":
        delta = rng.uniform(-45, 45, size=(size, size)).astype(np.float32)
    else:
        raise ValueError(f"unknown background {kind!r}")
    img = base[None, None, :] + delta[..., None]
    return np.clip(img, 0, 255).astype(np.uint8)


def _place_boxes(rng: np.random.Generator, n: int, size: int) -> list[tuple[float, float, float, float]]:
    """Non-overlapping-ish square-ish boxes (x, y, w, h); objects shrink as the image fills up."""
    lo, hi = {1: (0.38, 0.62), 2: (0.3, 0.46)}.get(n, (0.24, 0.36))
    boxes: list[tuple[float, float, float, float]] = []
    for _ in range(n):
        best, best_overlap = None, np.inf
        for _attempt in range(40):
            w = rng.uniform(lo, hi) * size
            h = w * rng.uniform(0.85, 1.15)
            x, y = rng.uniform(0, size - w), rng.uniform(0, size - h)
            overlap = max((_iou((x, y, w, h), b) for b in boxes), default=0.0)
            if overlap < best_overlap:
                best, best_overlap = (x, y, w, h), overlap
            if overlap == 0.0:
                break
        boxes.append(best)
    return boxes


def _iou(a, b) -> float:
    ax1, ay1, bx1, by1 = a[0] + a[2], a[1] + a[3], b[0] + b[2], b[1] + b[3]
    iw = max(0.0, min(ax1, bx1) - max(a[0], b[0]))
    ih = max(0.0, min(ay1, by1) - max(a[1], b[1]))
    inter = iw * ih
    return inter / (a[2] * a[3] + b[2] * b[3] - inter)


def typical_colour(category: str) -> str:
    """The colour a category usually has (bananas are yellow): a fast visual cue, as in real data."""
    names = list(COLOURS)
    return names[CATEGORY_NAMES.index(category) % len(names)]


def render_image(rng: np.random.Generator, objects: list[str], background: str, size: int,
                 colour_prior: float = 0.0):
    """Render one image. Each object takes its category's typical colour with probability
    ``colour_prior`` and a uniformly random colour otherwise.
    Returns (uint8 [size, size, 3], [(category, colour, bbox_xywh)])."""
    big = size * _SUPERSAMPLE
    canvas = Image.fromarray(render_background(rng, background, big))
    draw = ImageDraw.Draw(canvas)
    colour_names = list(COLOURS)
    placed = []
    for name, (x, y, w, h) in zip(objects, _place_boxes(rng, len(objects), big)):
        colour = colour_names[int(rng.integers(len(colour_names)))]
        if rng.random() < colour_prior:
            colour = typical_colour(name)
        draw_glyph(draw, name, (x, y, x + w, y + h), COLOURS[colour])
        s = 1.0 / _SUPERSAMPLE
        placed.append((name, colour, [round(x * s, 2), round(y * s, 2), round(w * s, 2), round(h * s, 2)]))
    small = canvas.resize((size, size), Image.Resampling.LANCZOS)
    return np.asarray(small, dtype=np.uint8), placed


def _category_list() -> list[dict]:
    return [{"id": i + 1, "name": name, "supercategory": "glyph"} for i, name in enumerate(CATEGORY_NAMES)]


def generate_split(config: WorldConfig, split: str, out_dir: Path, progress: bool = True,
                   stream: str | None = None) -> None:
    """Render ``split`` under ``out_dir``, drawing from the random stream named ``stream`` (the split's
    own by default). Images are drawn one after another, so the first n images of a larger split are
    the n of a smaller one."""
    spec = config.split_spec(split)
    rng = split_rng(config.seed, stream or split)
    image_dir = out_dir / "images"
    image_dir.mkdir(parents=True)
    cat_ids = {c["name"]: c["id"] for c in _category_list()}
    pixels = np.zeros((spec.n_images, config.image_size, config.image_size, 3), dtype=np.uint8)
    images, annotations, captions = [], [], []
    for i in tqdm(range(spec.n_images), desc=f"world/{split}", disable=not progress, mininterval=2):
        image_id = i + 1
        objects = sample_objects(rng, spec.object_count_weights, config.cooccurrence)
        background = spec.backgrounds[int(rng.integers(len(spec.backgrounds)))]
        pixels[i], placed = render_image(rng, objects, background, config.image_size, config.colour_prior)
        file_name = f"images/{stream or split}_{image_id:06d}.png"   # another stream's images, other names
        Image.fromarray(pixels[i]).save(out_dir / file_name, compress_level=1)
        images.append({"id": image_id, "file_name": file_name, "width": config.image_size,
                       "height": config.image_size, "background": background})
        for name, colour, bbox in placed:
            annotations.append({"id": len(annotations) + 1, "image_id": image_id, "category_id": cat_ids[name],
                                "bbox": bbox, "area": round(bbox[2] * bbox[3], 2), "iscrowd": 0,
                                "colour": colour})
        absent = [c for c in CATEGORY_NAMES if c not in objects]
        for cap in alt_text.make_captions(placed, absent, background, rng, config.captions_per_image,
                                          config.negation_rate, config.colour_mention_rate, config.image_size,
                                          config.structure_mix):
            captions.append({"id": len(captions) + 1, "image_id": image_id, **cap})
    info = {"description": f"negbook embedded world, split {split}", "version": str(WORLD_VERSION),
            "world_key": config.key()}
    atomic_write_json(out_dir / "instances.json", {"info": info, "images": images,
                                                     "annotations": annotations, "categories": _category_list()})
    atomic_write_json(out_dir / "captions.json", {"info": info, "images": images, "annotations": captions})
    np.save(out_dir / "pixels.npy", pixels)


def _generate(config: WorldConfig, root: Path, split: str) -> None:
    generate_split(config, split, root / split, progress=False)


def build_world(config: WorldConfig, root: str | Path, progress: bool = True, workers: int = WORKERS
                ) -> Path:
    """Write every split under ``root`` (atomically: a half-built world never appears). Each split
    draws from its own random stream, so the splits are built side by side in ``workers`` processes,
    the largest first (it sets the pace), with the same bytes as one after the other."""
    def build(tmp: Path) -> None:
        sizes = {split: config.split_spec(split).n_images for split in SPLITS}
        run_in_workers(_generate, (config, tmp), sorted(SPLITS, key=lambda s: -sizes[s]), workers,
                       "world splits", progress)
        atomic_write_json(tmp / "world.json", {"config": dataclasses.asdict(config), "key": config.key(),
                                               "categories": list(CATEGORY_NAMES),
                                               "cooccurring_pairs": [list(p) for p in COOCCURRING_PAIRS]})
    return build_directory_atomically(root, build)


def ensure_extra_split(config: WorldConfig, split: str, stream: str, n_images: int, artifacts_dir: str | Path,
                       progress: bool = True) -> Path:
    """``n_images`` images like ``split``'s from the random stream ``stream``, under
    ``artifacts_dir/world-<key>-<stream>-<n_images>/<split>``, built once. ``stream == split`` extends the
    split (its first images are the world's own); any other name draws images the world never holds. The
    world's key does not change, so nothing trained on the world trains again: how chapter 03 gets a
    selection set larger than negtrain's held-out tenth (``methods.decision_set``), and how
    ``bench/peakpatch_learning_curve.py`` grows negtrain."""
    if n_images < 1:
        raise ValueError(f"ensure_extra_split: n_images must be positive, got {n_images}")
    if stream in SPLITS and stream != split:
        raise ValueError(f"ensure_extra_split: stream {stream!r} is the world's {stream} split; name a new one")
    root = Path(artifacts_dir) / f"world-{config.key()}-{stream}-{n_images}"
    if not (root / split / "captions.json").exists():
        sized = dataclasses.replace(config, **{split: n_images})
        build_directory_atomically(root, lambda tmp: generate_split(sized, split, tmp / split, progress, stream))
    return root / split


def ensure_world(config: WorldConfig, artifacts_dir: str | Path, progress: bool = True) -> Path:
    """The world for ``config`` under ``artifacts_dir/world-<key>``, built once and reused."""
    root = Path(artifacts_dir) / f"world-{config.key()}"
    if (root / "world.json").exists():
        stored = json.loads((root / "world.json").read_text())
        if stored.get("key") == config.key():
            return root
        raise RuntimeError(f"{root}/world.json has key {stored.get('key')}, expected {config.key()}; "
                           "delete the directory to rebuild it")
    return build_world(config, root, progress=progress)
