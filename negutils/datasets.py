"""The splits a profile evaluates on: the embedded world, or real COCO on a GPU runner."""
from __future__ import annotations

import os
from pathlib import Path

from .coco import CocoSplit, load_split
from .profiles import Profile, dataset_root
from .world import SPLITS, ensure_world


def load_splits(profile: Profile, names=SPLITS, coco_root: str | os.PathLike | None = None,
                progress: bool = True) -> dict[str, CocoSplit]:
    """``{split name: CocoSplit}``. The embedded world is built (once) when missing; real COCO
    is read from ``coco_root`` or ``$COCO_IMAGE_ROOT`` laid out as COCO 2017
    (``annotations/instances_val2017.json``, ``annotations/captions_val2017.json``, ``val2017/``)."""
    if profile.dataset == "embedded":
        root = ensure_world(profile.world, profile.artifacts_dir(), progress=progress)
        return {name: load_split(root / name) for name in names}
    if profile.dataset == "coco":
        root = dataset_root("COCO_IMAGE_ROOT", coco_root)
        unsupported = [n for n in names if n != "val"]
        if unsupported:
            raise ValueError(f"the coco dataset provides only the 'val' split here; {unsupported} come from "
                             "data_recipes/ (VOC2007 for 'ood', CC12M negations for 'negtrain')")
        ann = Path(root) / "annotations"
        return {"val": load_split(instances=ann / "instances_val2017.json", captions=ann / "captions_val2017.json",
                                  image_root=root, name="val")}
    raise ValueError(f"profile {profile.name!r}: unknown dataset {profile.dataset!r} (embedded or coco)")
