"""What every chapter after 00 starts with: the profile's splits and its backbone, in one call."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .backbone import Backbone, load_backbone
from .coco import CocoSplit
from .datasets import load_splits
from .pretrain import ensure_pretrained, load_pretrained
from .profiles import Profile, get_profile


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
