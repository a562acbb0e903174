"""The splits a profile evaluates on: the embedded world, or real COCO (and VOC) on a GPU runner."""
from __future__ import annotations

import os
from pathlib import Path

from .coco import CocoSplit, load_split
from .profiles import Profile, dataset_root
from .world import SPLITS, ensure_world


def load_splits(profile: Profile, names: tuple[str, ...] | None = None, coco_root: str | os.PathLike | None = None,
                voc_root: str | os.PathLike | None = None, progress: bool = True) -> dict[str, CocoSplit]:
    """``{split name: CocoSplit}``; ``names=None`` means every split the dataset has.

    The embedded world is built (once) when missing. Real data: ``val`` is COCO val2017 from
    ``coco_root`` or ``$COCO_IMAGE_ROOT`` (``annotations/instances_val2017.json``,
    ``annotations/captions_val2017.json``, ``val2017/``); ``ood`` is VOC2007 test converted to COCO
    format by ``data_recipes/voc2007.py``, from ``voc_root`` or ``$VOC_ROOT`` when given.
    """
    if profile.dataset == "embedded":
        root = ensure_world(profile.world, profile.artifacts_dir(), progress=progress)
        return {name: load_split(root / name) for name in (names or SPLITS)}
    if profile.dataset == "coco":
        available = {"val"}
        voc = voc_root or os.environ.get("VOC_ROOT")
        if voc:
            available.add("ood")
        wanted = names or tuple(s for s in SPLITS if s in available)
        unsupported = [n for n in wanted if n not in available]
        if unsupported:
            raise ValueError(f"the coco dataset provides {sorted(available)} here; {unsupported} come from "
                             "data_recipes/ (VOC2007 for 'ood' with $VOC_ROOT, CC12M negations for 'negtrain')")
        out = {}
        if "val" in wanted:
            root = dataset_root("COCO_IMAGE_ROOT", coco_root)
            ann = Path(root) / "annotations"
            out["val"] = load_split(instances=ann / "instances_val2017.json", captions=ann / "captions_val2017.json",
                                    image_root=root, name="val")
        if "ood" in wanted:
            root = dataset_root("VOC_ROOT", voc_root)
            out["ood"] = load_split(instances=Path(root) / "instances_voc2007_test.json", image_root=root, name="ood")
        return out
    raise ValueError(f"profile {profile.name!r}: unknown dataset {profile.dataset!r} (embedded or coco)")
