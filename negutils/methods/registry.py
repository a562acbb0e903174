"""Every method the book evaluates, registered once: a stable id, the display name that results
tables carry in their ``method`` column, its family and paper, and how its scorer is built.

Chapters build scorers through ``build_scorer`` and look results up by ``method_label(id)``, so
a method's name is typed in exactly one place. Protocol variants of the trained methods keep
the registered name with the protocol in brackets (``with_protocol``), NegFull runs add their
alpha (``negfull_label``).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from ..benchmarks.evaluate import ClipScorer
from ..diagnosis.collapse import load_layer_choice
from ..models.features import TextFeatures, extract_text_features
from .ktn import EmbeddingCorrectionScorer, HolisticScorer, KtnScorer
from .lcse import LcseScorer
from .peakpatch.scorer import PeakPatchScorer
from .peakpatch.train import PeakPatchConfig, ensure_peakpatch, load_design
from .training_data import DEFAULT_PROTOCOL, prepare_negation_data, with_protocol

FAMILIES = ("frozen", "fine-tuned encoder", "trained post-hoc", "training-free", "stacked")


@dataclass(frozen=True)
class Method:
    id: str
    name: str                      # the ``method`` column of every results table
    family: str                    # one of FAMILIES
    paper: str
    build: Callable[..., object]   # build(*ingredients, name=..., **options) -> a scorer


# Every scorer class takes its ingredients positionally and ``name=``; the two readings of EC and
# the two KTNs differ by one fixed keyword.
_METHODS = (
    Method("vanilla", "vanilla", "frozen", "CLIP", ClipScorer),
    Method("negfull", "NegFull", "fine-tuned encoder", "NegBench", ClipScorer),
    Method("peakpatch_joint", "PeakPatch (joint)", "trained post-hoc", "PeakPatch", PeakPatchScorer),
    Method("ecn_only", "ECN only", "trained post-hoc", "PeakPatch", PeakPatchScorer),
    Method("scn_only", "SCN only", "trained post-hoc", "PeakPatch", PeakPatchScorer),
    Method("no_anchor", "w/o anchor", "trained post-hoc", "PeakPatch", PeakPatchScorer),
    Method("detached", "Detached SCN", "trained post-hoc", "PeakPatch", PeakPatchScorer),
    Method("ec", "EC", "training-free", "KTN", partial(EmbeddingCorrectionScorer, variant="formula")),
    Method("ec_direction", "EC (direction)", "training-free", "KTN",
           partial(EmbeddingCorrectionScorer, variant="direction")),
    Method("ktn_projection", "KTN (projection only)", "training-free", "KTN", partial(KtnScorer, rejection=False)),
    Method("ktn", "KTN", "training-free", "KTN", partial(KtnScorer, rejection=True)),
    Method("lcse", "LCSE", "training-free", "LCSE", LcseScorer),
    Method("lcse_parser", "LCSE (parser only)", "training-free", "LCSE", LcseScorer),
    Method("peakpatch_ecn", "PeakPatch ECN", "stacked", "PeakPatch", HolisticScorer),
    Method("ktn_on_peakpatch", "KTN on PeakPatch ECN", "stacked", "KTN", partial(KtnScorer, rejection=True)),
    Method("lcse_on_peakpatch", "LCSE on PeakPatch ECN", "stacked", "LCSE", LcseScorer),
)
METHODS: dict[str, Method] = {m.id: m for m in _METHODS}
# PeakPatch's training variants (``PeakPatchSettings.variants``) -> registered ids
VARIANT_IDS = {"joint": "peakpatch_joint", "ecn_only": "ecn_only", "scn_only": "scn_only",
               "no_anchor": "no_anchor", "detached": "detached"}


def method(method_id: str) -> Method:
    if method_id not in METHODS:
        raise KeyError(f"no method registered as {method_id!r}; registered: {sorted(METHODS)}")
    return METHODS[method_id]


def variant_label(variant: str, protocol: str = DEFAULT_PROTOCOL) -> str:
    """The results name of a PeakPatch training variant (``PeakPatchSettings.variants``)."""
    return method_label(VARIANT_IDS[variant], protocol)


def method_label(method_id: str, protocol: str = DEFAULT_PROTOCOL) -> str:
    """The results name of a registered method (the protocol in brackets unless it is the default)."""
    return with_protocol(method(method_id).name, protocol)


def negfull_label(alpha: float | str, protocol: str = DEFAULT_PROTOCOL) -> str:
    """The results name of the NegFull run at ``alpha`` (``"released"``: the published weights)."""
    detail = "(released)" if alpha == "released" else f"alpha={alpha:g}"
    return with_protocol(f"{method('negfull').name} {detail}", protocol)


def method_id(label: str) -> str:
    """The registered id behind a results name (protocol brackets and NegFull's alpha ignored)."""
    base = label.split(" [")[0]
    for m in _METHODS:
        if base == m.name or (m.id == "negfull" and base.startswith(f"{m.name} ")):
            return m.id
    raise KeyError(f"{label!r} names no registered method; registered: {[m.name for m in _METHODS]}")


def family(label: str) -> str:
    return method(method_id(label)).family


def build_scorer(method_id: str, *ingredients, label: str | None = None, **options):
    """The method's scorer, named by the registry (``label`` overrides it, e.g. for a protocol
    variant). The ingredients are the method's builder's: a backbone for ``vanilla`` / ``negfull``;
    (backbone, PeakPatch model, l_p, l_a) for the PeakPatch variants; (image scorer, text encoder)
    for EC and ``peakpatch_ecn``, plus the vocabulary for KTN, plus the calibration for LCSE."""
    entry = method(method_id)
    return entry.build(*ingredients, name=label or entry.name, **options)


def scorer_dict(*scorers) -> dict:
    """``{scorer.name: scorer}``, refusing two scorers of one name (a results table would merge them)."""
    out = {}
    for scorer in scorers:
        if scorer.name in out:
            raise ValueError(f"two scorers are named {scorer.name!r}")
        out[scorer.name] = scorer
    return out


def joint_peakpatch_scorer(session, layers=None, progress: bool = True, max_images: int | None = None,
                           borrowed_design: bool = False) -> PeakPatchScorer:
    """Chapter 03's joint PeakPatch (``negbench`` protocol, the profile's measured choices) on this
    session's backbone, trained once from the feature cache (or loaded), as a scorer whose
    ``corrected`` is the ECN text encoder the KTN, LCSE and negation-rate chapters stack on.
    ``layers`` defaults to chapter 02's choice; ``max_images`` trains on the first that many
    training images only (the held-out ones stay). Chapter 02's layers and chapter 03's design must have been
    measured on this backbone; ``borrowed_design`` takes the profile's design as it is (chapter 07 applies
    the book's organism's design to each rate's organism, at that organism's own ``layers``)."""
    prof = session.profile
    made_on = (session.backbone.model_name, session.pretrained_label)     # chapters 02 and 03 chose for it
    layers = layers or load_layer_choice(prof, *made_on)
    root = prof.artifacts_dir() / "features"
    data = prepare_negation_data(session.backbone, session.splits["negtrain"], session.features_key, root,
                                 progress=progress)
    if max_images is not None:
        data = data.subset(list(data.train_images[:max_images]) + list(data.held_images))
    features = TextFeatures(extract_text_features(session.backbone, data.captions, layers.l_p, layers.l_a, root,
                                                  session.features_key, progress=progress))
    design = load_design(prof) if borrowed_design else load_design(prof, *made_on)
    config = PeakPatchConfig.from_settings(prof.peakpatch, protocol="negbench", **design)
    model, _ = ensure_peakpatch(features, data, config, prof.artifacts_dir() / "peakpatch", progress)
    return build_scorer("peakpatch_joint", session.backbone, model, layers.l_p, layers.l_a)
