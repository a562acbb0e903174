"""What every chapter after 00 starts with: the profile's splits and its backbone, in one call."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from .config import Profile, dataset_root, get_profile
from .models.backbone import Backbone, load_backbone
from .models.pretrain import ensure_pretrained, load_pretrained
from .world.coco import CocoSplit, load_split
from .world.generate import SPLITS, ensure_world


@dataclass
class Session:
    profile: Profile
    splits: dict[str, CocoSplit]
    backbone: Backbone
    pretrained_label: str       # "negbook-pretrain", an open_clip tag, or a checkpoint path
    data_key: str               # identifies the data the benchmarks are built from

    @property
    def dataset(self) -> str:
        return self.profile.dataset


def open_session(profile: str, backbone: str | None = None, pretrained: str | None = None,
                 checkpoint: str | None = None, device: str | None = None, progress: bool = True) -> Session:
    """The profile's splits and backbone: the cached organism (pretrained by chapter 00, or now if
    missing) or a real open_clip model."""
    prof = get_profile(profile, backbone=backbone, pretrained=pretrained)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    splits = load_splits(prof, progress=progress)
    if prof.backbone is None and checkpoint is None:
        run = ensure_pretrained(splits["pretrain"].image_root.parent, prof.pretrain, prof.artifacts_dir(),
                                progress=progress)
        model, label = load_pretrained(run), "negbook-pretrain"
        data_key = prof.world.key()
    else:
        model = load_backbone(prof.backbone, prof.pretrained, checkpoint=checkpoint, device=device)
        label = str(checkpoint or prof.pretrained)
        data_key = f"{prof.dataset}:" + ",".join(f"{n}={len(s)}" for n, s in sorted(splits.items()))
    return Session(prof, splits, model, label, data_key)


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
