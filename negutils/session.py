"""What every chapter starts with: the profile, its splits and its backbone in one call
(``open_session``), the benchmarks built on them, and where its results are written.

``get_profile``, ``write_results`` and ``read_results`` are importable from here too, so a
chapter's setup needs this module for everything that is about *its run* rather than a method."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace

import pandas as pd
import torch

from .benchmarks.published import with_published, write_published_world
from .benchmarks.suite import Benchmarks, ensure_benchmarks
from .benchmarks.tokenisation import check_tokenisation, tokenisation_report, tokenisation_summary
from .config import Profile, dataset_root, get_profile
from .core.cache import atomic_write_json, config_hash
from .core.results import read_results, write_results
from .models.backbone import Backbone, create_model, load_backbone, save_checkpoint, save_training_checkpoint
from .models.pretrain import PretrainResult, ensure_pretrained, load_pretrained
from .world.coco import CocoSplit, load_split
from .world.generate import SPLITS, ensure_world
from .world.published import read_coco_val, read_voc_test

__all__ = ["Session", "dry_run_inputs", "get_profile", "load_splits", "open_session", "read_results", "write_results"]


@dataclass
class Session:
    profile: Profile
    splits: dict[str, CocoSplit]
    backbone: Backbone
    pretrained_label: str       # "negbook-pretrain", an open_clip tag, or a checkpoint path
    data_key: str               # identifies the data the benchmarks are built from
    pretraining: PretrainResult | None = None   # the organism's run (history, evaluations); None for a real model

    @property
    def features_key(self) -> str:
        """What every cache of the backbone's outputs is keyed by: the data and the weights (the
        backbone's own key, so replacing the backbone replaces it). The data alone would hand one
        backbone's cached features to another (another tag, pretraining budget or negation rate)."""
        if not self.backbone.key:
            raise ValueError(f"the backbone of session {self.pretrained_label!r} has no key (it wraps weights "
                             "being trained, not loaded by load_backbone): its features cannot be cached")
        return f"{self.data_key}|{self.backbone.key}"

    @property
    def outputs_dir(self):
        """Where the chapters keep what they computed for each other (the backbone's encodings,
        PeakPatch's taps, parses): ``artifacts/<profile>/outputs``."""
        return self.profile.artifacts_dir() / "outputs"

    @property
    def dataset(self) -> str:
        return self.profile.dataset

    def benchmarks(self, splits: tuple[str, ...] = ("val", "ood"), accept_identical_options: bool = False
                   ) -> dict[str, Benchmarks]:
        """Every benchmark of these splits (those the dataset has), built once and cached. On the
        ``coco`` dataset with ``$NEGBENCH_CSV_DIR`` set, NegBench's published CSVs found there replace
        the book's own MCQ and retrieval sets (``negutils.benchmarks.published``). Each split's
        ``tokenisation`` reports, per file, the captions this backbone's tokenizer cuts at its context
        and the option sets it makes identical (an error unless ``accept_identical_options``)."""
        out = {}
        for s in (s for s in splits if s in self.splits):
            bench = ensure_benchmarks(self.splits[s], self.profile.benchmarks, self.profile.artifacts_dir(),
                                      self.data_key)
            if self.dataset == "coco" and os.environ.get("NEGBENCH_CSV_DIR"):
                bench = with_published(bench, dataset_root("NEGBENCH_CSV_DIR"), self.splits[s])
            if self.backbone is not None:        # chapter 07's sweep session brings its backbones later
                report = check_tokenisation(tokenisation_report(bench, self.backbone), accept_identical_options)
                bench = replace(bench, tokenisation=report)
            out[s] = bench
        reports = [b.tokenisation for b in out.values() if b.tokenisation is not None]
        if reports:
            print(tokenisation_summary(pd.concat(reports, ignore_index=True)))
        return out

    def untrained_backbone(self) -> Backbone:
        """The same architecture (QuickGELU included, as OpenAI's weights run) with freshly initialised
        weights: the control for what training did."""
        untrained = load_backbone(self.backbone.model_name, quick_gelu=self.backbone.report.quick_gelu,
                                  device=str(self.backbone.device))
        untrained.keep_on_disk(self.outputs_dir)      # chapters 00-02 and 07 share its encodings too
        return untrained

    def backbone_from(self, checkpoint: str | os.PathLike) -> Backbone:
        """Weights fine-tuned from this backbone (a released NegFull) in its architecture and activation:
        a foreign checkpoint (open_clip's training format, ``module.``-prefixed keys) records no
        activation, and OpenAI-initialised weights run with the QuickGELU they were trained with."""
        return load_backbone(self.backbone.model_name, checkpoint=str(checkpoint), device=str(self.backbone.device),
                             quick_gelu=self.backbone.report.quick_gelu)


def open_session(profile: str, backbone: str | None = None, pretrained: str | None = None,
                 checkpoint: str | None = None, device: str | None = None, progress: bool = True,
                 splits: tuple[str, ...] | None = None) -> Session:
    """The profile's splits (``splits``: only these) and backbone: the cached organism (pretrained by
    chapter 00, or now if missing) or a real open_clip model."""
    prof = get_profile(profile, backbone=backbone, pretrained=pretrained)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    splits = load_splits(prof, splits, progress=progress)
    run = None
    if prof.backbone is None and checkpoint is None:
        run = ensure_pretrained(splits["pretrain"].image_root.parent, prof.pretrain, prof.artifacts_dir(),
                                progress=progress)
        model, label = load_pretrained(run), "negbook-pretrain"
        data_key = prof.world.key()
    else:
        model = load_backbone(prof.backbone, prof.pretrained, checkpoint=checkpoint, device=device)
        label = str(checkpoint or prof.pretrained)
        data_key = f"{prof.dataset}:" + ",".join(f"{n}={len(s)}" for n, s in sorted(splits.items()))
    session = Session(prof, splits, model, label, data_key, run)
    model.keep_on_disk(session.outputs_dir)      # the chapters share what it encodes
    return session


def load_splits(profile: Profile, names: tuple[str, ...] | None = None, coco_root: str | os.PathLike | None = None,
                voc_root: str | os.PathLike | None = None, progress: bool = True) -> dict[str, CocoSplit]:
    """``{split name: CocoSplit}``; ``names=None`` means every split the dataset has.

    The embedded world is built (once) when missing. Real data: ``val`` is COCO val2017 from
    ``coco_root`` or ``$COCO_IMAGE_ROOT`` (``annotations/instances_val2017.json``,
    ``annotations/captions_val2017.json``, ``val2017/``); ``ood`` is VOC2007 test converted to COCO
    format by ``data_recipes/voc2007.py``, from ``voc_root`` or ``$VOC_ROOT`` when given. The real
    data has no split to pretrain on or to train the negation methods on (CC12M-NegCap is a download
    the book does not script), so ``pretrain`` and ``negtrain`` are the embedded world's on every dataset.
    """
    world = ("pretrain", "negtrain")
    if profile.dataset == "embedded":
        root = ensure_world(profile.world, profile.artifacts_dir(), progress=progress)
        return {name: load_split(root / name) for name in (names or SPLITS)}
    if profile.dataset == "coco":
        available = {"val", *world}
        voc = voc_root or os.environ.get("VOC_ROOT")
        if voc:
            available.add("ood")
        wanted = names or tuple(s for s in SPLITS if s in available)
        unsupported = [n for n in wanted if n not in available]
        if unsupported:
            raise ValueError(f"the coco dataset provides {sorted(available)} here; {unsupported} come from "
                             "data_recipes/ (VOC2007 for 'ood' with $VOC_ROOT)")
        out = {}
        if any(n in world for n in wanted):
            root = ensure_world(profile.world, profile.artifacts_dir(), progress=progress)
            out.update({n: load_split(root / n) for n in world if n in wanted})
        if "val" in wanted:
            out["val"] = read_coco_val(dataset_root("COCO_IMAGE_ROOT", coco_root))
        if "ood" in wanted:
            out["ood"] = read_voc_test(dataset_root("VOC_ROOT", voc_root))
        return {n: out[n] for n in SPLITS if n in out}
    raise ValueError(f"profile {profile.name!r}: unknown dataset {profile.dataset!r} (embedded or coco)")


def dry_run_inputs(profile: Profile, progress: bool = True) -> tuple[dict[str, str], dict[str, str]]:
    """What a ``dry_run`` profile reads where the ``gpu`` profile reads downloads, written once per
    world under ``artifacts/<profile>/``: the ``val`` and ``ood`` splits of its embedded world in the
    published layouts (COCO val2017, VOC2007 and NegBench's CSVs, ``negutils.benchmarks.published``),
    a randomly initialised checkpoint of its backbone with QuickGELU (how OpenAI's weights run), and
    another in open_clip's training-script format with no metadata, as a released NegFull comes.
    Returns the environment that points the ``coco`` dataset at the files (``COCO_IMAGE_ROOT``,
    ``VOC_ROOT``, ``NEGBENCH_CSV_DIR``) and the notebook parameters naming the two checkpoints
    (``checkpoint``, ``negfull_checkpoint``)."""
    if not profile.dry_run or profile.backbone is None:
        raise ValueError(f"profile {profile.name!r} is not a dry run of a real backbone")
    world = ensure_world(profile.world, profile.artifacts_dir(), progress=progress)
    folder = profile.artifacts_dir() / f"dry-run-{config_hash([profile.world.key(), profile.backbone, 2])}"
    record = folder / "inputs.json"
    if not record.exists():
        splits = {name: load_split(world / name) for name in ("val", "ood")}
        env = write_published_world(splits, folder / "data", profile.benchmarks.mcq,
                                    profile.benchmarks.retrieval_seed)
        # other seeds than the untrained control's (load_backbone's seed 0), so "trained" and untrained differ
        checkpoint = save_checkpoint(create_model(profile.backbone, quick_gelu=True, seed=1),
                                     folder / f"{profile.backbone}-random.pt", profile.backbone, quick_gelu=True)
        negfull = save_training_checkpoint(create_model(profile.backbone, quick_gelu=True, seed=2),
                                           folder / "negfull-released" / "finetuned_checkpoint.pt", "negfull-dry-run")
        atomic_write_json(record, {"env": {k: str(v) for k, v in env.items()},
                                   "parameters": {"checkpoint": str(checkpoint), "negfull_checkpoint": str(negfull)}})
    written = json.loads(record.read_text())
    return written["env"], written["parameters"]
