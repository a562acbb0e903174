"""The questions chapter 03's choices are compared on. Each PeakPatch run keeps the epoch that does best
on its negtrain's held-out tenth, but comparing runs there decides little on the world: a tenth of its
negtrain holds too few NegMCQ questions for their standard error to separate most of the gaps between
layers, SCN settings, initialisations and NegFull alphas (chapter 03's ``03_choice_ties`` shows the
gaps and the errors). The decision set holds enough questions
that an accuracy's standard error is at most half a point (``PeakPatchSettings.decision_questions``), on
images no run trains on or picks its epoch on:

* where the negtrain's held-out tenth already holds that many (a real negtrain of COCO train2017 or
  NegBench's CC12M), those questions;
* on the embedded world, fresh negtrain-like images from their own random stream
  (``world.generate.ensure_extra_split``: the world and everything trained on it stay as they are),
  with NegMCQ built for them by the same code as negtrain's;
* otherwise (a small real negtrain, as in the dry run) the held-out questions there are, the source
  saying how many, so a reader sees the noise instead of a smaller one assumed.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..models.backbone import Backbone
from ..models.features import extract_layer_sweep, TextFeatures
from ..world.coco import load_split
from ..world.generate import ensure_extra_split
from .peakpatch.model import PeakPatch
from .negfull import held_out_credit as negfull_credit
from .peakpatch.train import held_out_credit
from .training_data import NegationData, prepare_negation_data

DECISION_STREAM = "negtrain-decision"
IMAGES_PER_QUESTION = 1.1       # a few world images have no object to negate, so no NegMCQ question


@dataclass
class DecisionSet:
    """``data``'s held-out NegMCQ are the questions (every image of a fresh set is held out); ``source``
    says where they come from."""
    data: NegationData
    source: str

    @property
    def questions(self) -> int:
        return len(self.data.held_out_mcq())

    def standard_error(self, accuracy: float = 0.5) -> float:
        """The binomial standard error of an accuracy over these questions."""
        return math.sqrt(accuracy * (1 - accuracy) / self.questions)

    def describe(self) -> str:
        return (f"{self.questions} NegMCQ questions ({self.source}); standard error of an accuracy "
                f"at most {100 * self.standard_error():.2f} points")


def decision_set(session, data: NegationData, feature_root, minimum: int | None = None,
                 progress: bool = True) -> DecisionSet:
    """The decision set for ``data`` (chapter 03's negation data of ``session``) of at least ``minimum``
    questions where it can (default: the profile's ``peakpatch.decision_questions``): see the module
    docstring."""
    minimum = session.profile.peakpatch.decision_questions if minimum is None else minimum
    if minimum < 1:
        raise ValueError(f"decision_set: minimum must be a positive number of questions, got {minimum}")
    if len(data.held_out_mcq()) >= minimum:
        return DecisionSet(questions_only(data), "the negtrain split's held-out images")
    prof = session.profile
    if prof.dataset != "embedded":
        return DecisionSet(questions_only(data), f"the negtrain split's held-out images: fewer than the {minimum} "
                                                 "wanted, as many as this negtrain holds")
    n_images = math.ceil(IMAGES_PER_QUESTION * minimum)
    split = load_split(ensure_extra_split(prof.world, "negtrain", DECISION_STREAM, n_images, prof.artifacts_dir(),
                                          progress))
    fresh = prepare_negation_data(session.backbone, split, session.features_key, feature_root, held_out=1.0,
                                  progress=progress)
    return DecisionSet(questions_only(fresh), f"{n_images} fresh negtrain-like world images no run trains on")


def questions_only(data: NegationData) -> NegationData:
    """``data`` reduced to its held-out NegMCQ and the captions of their options (re-indexed): all a
    decision needs, so its feature caches (one per layer pair of the sweep) hold nothing else."""
    mcq = data.held_out_mcq().copy()
    columns = [f"option_{k}" for k in range(4)]
    used = np.unique(mcq[columns].to_numpy())
    new_id = {int(old): new for new, old in enumerate(used)}
    for c in columns:
        mcq[c] = mcq[c].map(new_id).astype(np.int64)
    empty = {name: getattr(data, name).iloc[:0] for name in ("affirmative", "negcap", "false_negation",
                                                              "counterpart_mcq")}
    return dataclasses.replace(data, captions=[data.captions[int(c)] for c in used], negmcq=mcq, **empty,
                               train_images=np.array([], dtype=np.int64))


def peakpatch_credit(model: PeakPatch, features: TextFeatures, decision: DecisionSet) -> np.ndarray:
    """Per question, the credit of a PeakPatch model (1 right, 0 wrong, 1/k on a k-way tie);
    ``features`` caches ``decision.data.captions`` at the model's layers."""
    if len(features) != len(decision.data.captions):
        raise ValueError(f"the feature cache holds {len(features)} captions, the decision set "
                         f"{len(decision.data.captions)}: extract it from decision.data.captions")
    return held_out_credit(model, features, decision.data)


@dataclass
class PeakPatchJudge:
    """A PeakPatch run's accuracy on the decision set, from the cache of its captions at the run's
    (l_p, l_a): what ``choose_design`` and ``layer_sweep`` compare runs by."""
    decision: DecisionSet
    folders: dict[tuple[int, int], Path]

    @property
    def questions(self) -> int:
        return self.decision.questions

    def __call__(self, model: PeakPatch, layers: tuple[int, int]) -> float:
        if layers not in self.folders:
            raise ValueError(f"the decision set has no feature cache at (l_p, l_a) = {layers}; "
                             f"it has {sorted(self.folders)}")
        return float(peakpatch_credit(model, TextFeatures(self.folders[layers]), self.decision).mean())


def peakpatch_judge(session, decision: DecisionSet, pairs, feature_root, progress: bool = True) -> PeakPatchJudge:
    """The decision set's captions cached at every (l_p, l_a) of ``pairs`` (one tapped pass)."""
    folders = extract_layer_sweep(session.backbone, decision.data.captions, sorted(set(pairs)), feature_root,
                                  session.features_key, progress=progress)
    return PeakPatchJudge(decision, folders)


@dataclass
class BackboneJudge:
    """A fine-tuned backbone's accuracy on the decision set: what NegFull's alphas are compared by."""
    decision: DecisionSet

    @property
    def questions(self) -> int:
        return self.decision.questions

    def __call__(self, backbone: Backbone) -> float:
        return float(negfull_credit(backbone, self.decision.data).mean())
