"""What every chapter starts with: the profile, its splits and its backbone in one call
(``open_session``), the benchmarks built on them, and where its results are written.

``get_profile``, ``write_results`` and ``read_results`` are importable from here too, so a
chapter's setup needs this module for everything that is about *its run* rather than a method."""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, replace

import pandas as pd
import torch

from .benchmarks.cc12m import read_cc12m_negations
from .benchmarks.published import published_files, with_published
from .benchmarks.suite import Benchmarks, ensure_benchmarks
from .benchmarks.tokenisation import check_tokenisation, tokenisation_report, tokenisation_summary
from .config import Profile, dataset_root, get_profile
from .core.cache import config_hash
from .core.results import read_results, write_results
from .models.backbone import Backbone, load_backbone
from .models.pretrain import PretrainResult, ensure_pretrained, load_pretrained
from .world.coco import CocoSplit, load_split
from .world.generate import SPLITS, ensure_world
from .world.published import read_coco_train, read_coco_val, read_voc_test

__all__ = ["Session", "data_key", "get_profile", "load_splits", "model_session", "open_session", "read_results",
           "write_results"]


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
        """Every benchmark of these splits (``read_benchmarks``), each split's with the tokenisation report
        of this session's backbone (``tokenised``) when it has one (chapter 07's sweep session brings its
        backbones later)."""
        bench = self.read_benchmarks(splits)
        return bench if self.backbone is None else self.tokenised(bench, accept_identical_options)

    def read_benchmarks(self, splits: tuple[str, ...] = ("val", "ood")) -> dict[str, Benchmarks]:
        """Every benchmark of these splits (those the dataset has), built once and cached: what any
        backbone is scored on. On the ``coco`` dataset with ``$NEGBENCH_CSV_DIR`` set, NegBench's
        published CSVs there replace the book's own MCQ and retrieval sets
        (``negutils.benchmarks.published``; a missing one is an error, raised before anything is built),
        and each result row's ``source`` says which was scored."""
        wanted = [s for s in splits if s in self.splits]
        published = {}
        if self.dataset == "coco" and os.environ.get("NEGBENCH_CSV_DIR"):
            published = {s: published_files(dataset_root("NEGBENCH_CSV_DIR"), s) for s in wanted}
        out = {}
        for s in wanted:
            bench = ensure_benchmarks(self.splits[s], self.profile.benchmarks, self.profile.artifacts_dir(),
                                      self.data_key)
            if s in published:
                bench = with_published(bench, dataset_root("NEGBENCH_CSV_DIR"), self.splits[s])
            out[s] = bench
        return out

    def tokenised(self, bench: dict[str, Benchmarks], accept_identical_options: bool = False
                  ) -> dict[str, Benchmarks]:
        """``bench`` with each split's ``tokenisation``: per file, the captions this session's backbone's
        tokenizer cuts at its context and the option sets it makes identical (an error unless
        ``accept_identical_options``); the summary is printed."""
        out = {s: replace(b, tokenisation=check_tokenisation(tokenisation_report(b, self.backbone),
                                                             accept_identical_options))
               for s, b in bench.items()}
        if out:
            print(tokenisation_summary(pd.concat([b.tokenisation for b in out.values()], ignore_index=True)))
        return out

    def split_source(self, name: str) -> str:
        """Where split ``name`` comes from, in words: what a chapter prints beside what it trained or
        calibrated on."""
        split = self.splits[name]
        if self.dataset == "embedded":
            return f"the embedded world's {name} split"
        if split.released is not None:
            return f"NegBench's released CC12M-NegCap / CC12M-NegMCQ, {len(split):,} images"
        real = {"val": "COCO val2017", "ood": "VOC2007 test"}.get(name, f"COCO train2017 ({name} subset)")
        return f"{real}, {len(split):,} images"

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
                 splits: tuple[str, ...] | None = None, negation_data: str | None = None) -> Session:
    """The profile's splits (``splits``: only these) and backbone: the cached organism (pretrained by
    chapter 00, or now if missing) or a real open_clip model. ``negation_data`` picks the ``coco``
    dataset's negtrain (``"coco-train2017"``, the default, or ``"negbench-cc12m"``); NegBench's release
    holds the data of the ``negbench`` protocol only, so on it the trained methods use that protocol."""
    prof = get_profile(profile, backbone=backbone, pretrained=pretrained, checkpoint=checkpoint,
                       negation_data=negation_data)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    splits = load_splits(prof, splits, progress=progress)
    if "negtrain" in splits and splits["negtrain"].released is not None:
        prof = replace(prof, peakpatch=replace(prof.peakpatch, protocols=("negbench",),
                                               negfull_alpha_protocols=("negbench",)))
    if prof.backbone is not None or checkpoint is not None:
        model = load_backbone(prof.backbone, prof.pretrained, checkpoint=checkpoint, device=device)
        return model_session(prof, splits, model, str(checkpoint or prof.pretrained))
    run = ensure_pretrained(splits["pretrain"].image_root.parent, prof.pretrain, prof.artifacts_dir(),
                            progress=progress)
    session = Session(prof, splits, load_pretrained(run), "negbook-pretrain", prof.world.key(), run)
    session.backbone.keep_on_disk(session.outputs_dir)      # the chapters share what it encodes
    return session


def data_key(profile: Profile, splits: dict[str, CocoSplit]) -> str:
    """What read data's benchmark and feature caches are keyed by: the splits' content
    (``split_content_key``), so every caller (the chapters, ``negbook eval``) shares one cache per
    dataset and none survives a change of the data."""
    return f"{profile.dataset}/{profile.negation_data}:" + ",".join(
        f"{n}={split_content_key(s)}" for n, s in sorted(splits.items()))


def model_session(profile: Profile, splits: dict[str, CocoSplit], backbone: Backbone, label: str) -> Session:
    """The session of a loaded model (a real backbone, a checkpoint) on ``splits``, keyed by ``data_key``."""
    session = Session(profile, splits, backbone, label, data_key(profile, splits))
    backbone.keep_on_disk(session.outputs_dir)      # the chapters share what it encodes
    profile.record_backbone()                        # so chapter 06 finds this backbone's results
    return session


def split_content_key(split: CocoSplit) -> str:
    """A hash of everything a split's benchmarks and cached outputs are computed from: its categories, its
    images' ids and files, their objects, boxes and captions, and the negation data released with it. The
    embedded world is keyed by its generating configuration instead; read data has none, and its sizes would
    hand the benchmarks of corrected annotations, or of another dataset of the same size, the old cache."""
    content = {"name": split.name, "categories": split.categories, "image_ids": split.image_ids,
               "file_names": split.file_names, "objects": [sorted(o) for o in split.objects],
               "captions": [[record["caption"] for record in records] for records in split.captions],
               "boxes": split.boxes}
    for name, frame in (split.released or {}).items():
        if isinstance(frame, pd.DataFrame):
            rows = pd.util.hash_pandas_object(frame, index=False).to_numpy()
            content[f"released {name}"] = [list(frame.columns), hashlib.sha256(rows.tobytes()).hexdigest()]
    return config_hash(content, length=16)


def load_splits(profile: Profile, names: tuple[str, ...] | None = None, coco_root: str | os.PathLike | None = None,
                voc_root: str | os.PathLike | None = None, progress: bool = True) -> dict[str, CocoSplit]:
    """``{split name: CocoSplit}``; ``names=None`` means every split the dataset has.

    The embedded world is built (once) when missing, and only the ``embedded`` dataset reads it. The
    ``coco`` dataset reads real data only, from ``coco_root`` or ``$COCO_IMAGE_ROOT``: ``val`` is COCO
    val2017 (``annotations/{instances,captions}_val2017.json``, ``val2017/``); ``pretrain`` and
    ``negtrain`` are disjoint seeded subsets of COCO train2017 (``annotations/{instances,
    captions}_train2017.json``, ``train2017/``; sizes in ``profile.train2017``), or, with
    ``profile.negation_data == "negbench-cc12m"``, ``negtrain`` is NegBench's released CC12M-NegCap /
    NegMCQ from ``$CC12M_NEGATION_DIR``; ``ood`` is VOC2007 test converted to COCO format by
    ``data_recipes/voc2007.py``, from ``voc_root`` or ``$VOC_ROOT`` when given.
    """
    if profile.dataset == "embedded":
        root = ensure_world(profile.world, profile.artifacts_dir(), progress=progress)
        return {name: load_split(root / name) for name in (names or SPLITS)}
    if profile.dataset != "coco":
        raise ValueError(f"profile {profile.name!r}: unknown dataset {profile.dataset!r} (embedded or coco)")
    voc = voc_root or os.environ.get("VOC_ROOT")
    available = {"val", "pretrain", "negtrain"} | ({"ood"} if voc else set())
    wanted = names or tuple(s for s in SPLITS if s in available)
    unsupported = [n for n in wanted if n not in available]
    if unsupported:
        raise ValueError(f"the coco dataset provides {sorted(available)} here; {unsupported} come from "
                         "data_recipes/ (VOC2007 for 'ood' with $VOC_ROOT)")
    released = profile.negation_data == "negbench-cc12m"
    out = {}
    if "val" in wanted:
        out["val"] = read_coco_val(dataset_root("COCO_IMAGE_ROOT", coco_root))
    if "pretrain" in wanted or ("negtrain" in wanted and not released):
        train = read_coco_train(dataset_root("COCO_IMAGE_ROOT", coco_root), profile.train2017)
        out.update({n: train[n] for n in ("pretrain", "negtrain") if n in wanted})
    if "negtrain" in wanted and released:
        out["negtrain"] = read_cc12m_negations(dataset_root("CC12M_NEGATION_DIR"))
    if "ood" in wanted:
        out["ood"] = read_voc_test(dataset_root("VOC_ROOT", voc_root))
    return {n: out[n] for n in SPLITS if n in out}
