"""The negation-rate experiment (chapter 07): pretrain the same organism on the same images with
captions that differ only in how often they are grounded negations, then measure negation
behaviour and the methods' gains on each frozen model.

Only the pretraining captions change: the pretrain split's images, the val split and every
benchmark stay fixed, so any difference between two rates is the captions' doing. Captions are
rebuilt from the split's annotations (objects, colours, background) by the same
``alt_text.make_captions`` the world uses, whose negated phrasings hold the benchmark templates
out.
"""
from __future__ import annotations

import dataclasses
import json
import time
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from ..benchmarks.evaluate import (
    evaluate_confusion,
    evaluate_mcq,
    evaluate_pairwise,
    evaluate_retrieval,
)
from ..config import NegationRateSettings
from ..core.cache import atomic_write_json, config_hash
from ..core.metrics import spearman_rho
from ..core.workers import TRAINING_THREADS, WORKERS, run_in_workers, torch_threads
from ..diagnosis import bag_of_concepts as boc
from ..diagnosis.collapse import lcd_analysis, peak_with_rising_alignment
from ..diagnosis.concepts import KTN_TEMPLATES, ConceptBank
from ..diagnosis.diagnostic import build_diagnostic_set
from ..diagnosis.dilution import dilution_summary, text_coefficients
from ..methods.lcse_analysis import calibration_set, fit_on_split
from ..methods.parsing import keep_parses_on_disk
from ..methods.registry import build_scorer, joint_peakpatch_scorer, method_label, scorer_dict
from ..models.backbone import load_backbone
from ..models.pretrain import ensure_pretrained, load_pretrained
from ..report.verdicts import Claim, judge
from ..session import Session, load_splits
from ..world.recaption import recaption


@lru_cache(maxsize=8)
def rate_captions(split_dir: Path, rate: float, seed: int, world) -> list[list[dict]]:
    """``recaption`` of a split at ``rate``, made once per process: the chapter checks the captions
    it then pretrains on. Read only: every caller shares the lists."""
    return recaption(split_dir, rate, seed=seed, world=world)


def rate_pretraining(profile, splits: dict, rate: float, samples: int, progress: bool = True):
    """The organism pretrained for ``samples`` pairs on the pretrain split recaptioned at ``rate``,
    on one torch thread whichever process runs it (so the weights do not depend on how many rates
    train side by side); cached under ``artifacts/<profile>/negation_rate/`` by world, config and
    rate. Returns the pretraining run (its checkpoint and seconds)."""

    pretrain = splits["pretrain"]
    config = dataclasses.replace(profile.pretrain, samples=samples, evaluations=2, snapshots=0)
    captions = rate_captions(pretrain.image_root, rate, config.seed, profile.world)
    with torch_threads(TRAINING_THREADS):
        return ensure_pretrained(pretrain.image_root.parent, config, profile.artifacts_dir() / "negation_rate",
                                 progress=progress, split=dataclasses.replace(pretrain, captions=captions),
                                 key_extra={"negation_rate": rate})


def ensure_rate_backbone(profile, splits: dict, rate: float, samples: int, progress: bool = True):
    """(the frozen backbone, its pretraining run) of ``rate_pretraining``."""
    result = rate_pretraining(profile, splits, rate, samples, progress)
    return load_pretrained(result), result


def _pretrain_rate(profile, splits: dict, samples: int, rate: float) -> None:
    rate_pretraining(profile, splits, rate, samples, progress=False)


def pretrain_rates(session, rates, samples: int, progress: bool = True, workers: int = WORKERS) -> None:
    """Every rate's organism pretrained (or found cached), ``workers`` rates side by side: two
    1-thread pretrainings on 2 cores do more work than one on two threads (bench/thread_scaling.py)."""
    run_in_workers(_pretrain_rate, (session.profile, session.splits, samples), list(rates), workers,
                   "pretraining per rate", progress)


def rate_session(session, backbone, rate: float):
    """``session`` with the backbone pretrained at ``rate``; its caches follow the backbone's key (its
    checkpoint), so the pilot's model and the full budget's at one rate never share features."""
    return dataclasses.replace(session, backbone=backbone, pretrained_label=f"negation rate {rate:g}")


def _mcq_subset(mcq: pd.DataFrame, n: int) -> pd.DataFrame:
    return mcq.iloc[:n].reset_index(drop=True)


def frozen_measures(session, bench, settings: NegationRateSettings):
    """Negation behaviour of the session's frozen backbone: MCQ per template, polarity AUC of "no
    X", the LCD curve and its layer choice, the median beta_c- of "c+ without c-", COCO-Confusion,
    FACTOR per operator, affirmative retrieval. Returns the scalars and the ``LcdAnalysis``
    (curves and the (l_a, l_p) choice the methods use)."""

    val = session.splits["val"]
    scorer = build_scorer("vanilla", session.backbone)
    images = scorer.image_features(val, np.arange(len(val)))
    mcq = evaluate_mcq(scorer, _mcq_subset(bench.mcq, settings.mcq_questions), val)
    concepts = boc.concept_polarity(scorer.text_features, images, boc.presence_matrix(val), val.categories)
    diagnostic = build_diagnostic_set(val, settings.diagnostic_pairs, seed=settings.seed)
    lcd = lcd_analysis(session.backbone, diagnostic, images[diagnostic["image_index"].to_numpy()],
                       n_boot=settings.bootstrap, seed=settings.seed)
    d = lcd.curve("negated", "D_LCD")["mean"].to_numpy()
    dilution = dilution_summary(text_coefficients(scorer.text_features, val.categories))
    factor = evaluate_pairwise(scorer, bench.factor[bench.factor["split"] == "operator"], val, group="test")
    measures = {
        "MCQ": mcq["accuracy"], "MCQ positive": mcq["positive_accuracy"],
        "MCQ negative": mcq["negative_accuracy"], "MCQ hybrid": mcq["hybrid_accuracy"],
        "polarity AUC": float(concepts["polarity AUC"].median()),
        "detection AUC": float(concepts["detection AUC"].median()),
        "l_p": lcd.choice.l_p, "l_a": lcd.choice.l_a, "LCD peak": float(d.max()), "LCD final": float(d[-1]),
        "LCD peak - final": float(d.max() - d[-1]),
        # PeakPatch's Fig. 2 shape (1 = an interior D_LCD maximum while A(l) rises)
        "LCD interior peak": float(peak_with_rising_alignment(lcd.curve("negated", "D_LCD"),
                                                              lcd.curve("affirmative", "A"))),
        "median beta_c-": dilution["median beta_c- negated"],
        "Conf-2C": evaluate_confusion(scorer, bench.confusion_2c, val)["mAP"],
        "FACTOR": factor["accuracy"],
        **{f"FACTOR {op}": factor[f"accuracy[{op}]"] for op in ("NOT", "AND", "OR", "BUT-NOT", "NEITHER")
           if f"accuracy[{op}]" in factor},
        "retrieval R@5": evaluate_retrieval(scorer, bench.retrieval_affirmative, val)["R@5"],
    }
    return measures, lcd


def method_gains(session, bench, settings: NegationRateSettings, layers, progress: bool = True) -> pd.DataFrame:
    """PeakPatch (joint, at ``layers``: this model's own LCD choice), KTN and LCSE (calibrated on
    this model's pretrain split) on the session's frozen backbone: MCQ, COCO-Confusion 2C and
    FACTOR operator accuracy, beside vanilla."""

    val = session.splits["val"]
    vanilla = build_scorer("vanilla", session.backbone)
    encode = session.backbone.encode_text
    tests = calibration_set(session.splits["pretrain"], settings.calibration_samples)
    calibration, _ = fit_on_split(vanilla, encode, tests, session.splits["pretrain"])
    scorers = scorer_dict(
        vanilla, joint_peakpatch_scorer(session, layers, progress=progress, max_images=settings.peakpatch_images,
                                        borrowed_design=True),
        build_scorer("ktn", build_scorer("vanilla", session.backbone, flip_average=True), encode,
                     list(val.categories), bank=ConceptBank(encode, KTN_TEMPLATES)),
        build_scorer("lcse", vanilla, encode, calibration))
    operator = bench.factor[bench.factor["split"] == "operator"]
    mcq = _mcq_subset(bench.mcq, settings.mcq_questions)
    rows = []
    for name, scorer in scorers.items():
        rows.append({"method": name, "MCQ": evaluate_mcq(scorer, mcq, val)["accuracy"],
                     "Conf-2C": evaluate_confusion(scorer, bench.confusion_2c, val)["mAP"],
                     "FACTOR": evaluate_pairwise(scorer, operator, val)["accuracy"]})
    return pd.DataFrame(rows)


def organism_session(profile):
    """A session on the profile's embedded world with no backbone yet: the sweep brings its own.
    On the gpu profile (real data elsewhere) this is the larger embedded world it configures."""

    world_profile = dataclasses.replace(profile, dataset="embedded", backbone=None, pretrained=None)
    splits = load_splits(world_profile)
    session = Session(world_profile, splits, None, "", world_profile.world.key())
    keep_parses_on_disk(session.outputs_dir)       # the benchmarks' captions: parsed by chapter 04 already
    return session


def sweep_rates(profile, full_sweep: bool) -> tuple[tuple[float, ...], int]:
    """(rates, pretraining samples per run): the pilot, or the full sweep at the profile's budget."""
    s = profile.negation_rate
    if full_sweep:
        return s.sweep_rates, s.sweep_samples or profile.pretrain.samples
    return s.pilot_rates, s.pilot_samples


def run_rate(session, bench, rate: float, samples: int, settings: NegationRateSettings,
             progress: bool = True) -> dict:
    """Pretrain (cached), measure and run the methods at one rate, on one torch thread as the
    pretraining is (so the numbers do not depend on how many rates run side by side); the
    measurements are cached as JSON beside the checkpoint, so a re-run of the chapter only reads them."""

    backbone, result = ensure_rate_backbone(session.profile, session.splits, rate, samples, progress)
    # ``v`` changes whenever what the cached measurements hold could change (what they compute, the order
    # of their columns, the threads they run on, whose float sums round differently), so no re-run reads
    # stale ones
    cache = Path(result.checkpoint).parent / f"measures-{config_hash({'settings': settings, 'v': 4})}.json"
    if cache.exists():
        return load_rate_run(cache)
    started = time.perf_counter()
    rated = rate_session(session, backbone, rate)
    with torch_threads(TRAINING_THREADS):
        measures, lcd = frozen_measures(rated, bench, settings)
        gains = method_gains(rated, bench, settings, lcd.choice, progress=progress)
    out = {"rate": rate, "samples": samples, "pretrain seconds": result.seconds,
           "measure seconds": time.perf_counter() - started, "measures": measures,
           "curves": lcd.curves.to_dict("list"), "methods": gains.to_dict("list")}
    save_rate_run(cache, out)
    return out


def _run_rate(session, bench, samples: int, settings: NegationRateSettings, rate: float) -> dict:
    return run_rate(session, bench, rate, samples, settings, progress=False)


def run_rates(session, bench, rates, samples: int, settings: NegationRateSettings, progress: bool = True,
              workers: int = WORKERS) -> list[dict]:
    """``run_rate`` for every rate, ``workers`` rates side by side (each pretrains, then measures, on
    its own core): the runs in ``rates`` order. A rate whose run is cached is only read."""
    return run_in_workers(_run_rate, (session, bench, samples, settings), list(rates), workers,
                          "negation rates", progress)


def save_rate_run(path: Path, run: dict) -> None:
    """One rate's measurements in the order computed (every dict's keys are a table's columns), so
    a re-run that reads them writes the chapter's CSVs byte for byte as the run that computed them."""
    atomic_write_json(path, run, sort_keys=False)


def load_rate_run(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def untrained_measures(session, bench, settings: NegationRateSettings) -> dict:
    """The same measurements on the randomly initialised organism: the floor every rate starts from."""

    backbone = load_backbone(session.profile.pretrain.model_name)
    untrained = dataclasses.replace(session, backbone=backbone, pretrained_label="untrained")
    measures, _ = frozen_measures(untrained, bench, settings)
    return measures


def sweep_tables(runs: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(measures per rate, LCD/alignment curves per rate, method accuracy and gain per rate)."""
    measures = pd.DataFrame([{"rate": r["rate"], "pretrain s": r["pretrain seconds"],
                              "measure s": r["measure seconds"], **r["measures"]} for r in runs])
    curves = pd.concat([pd.DataFrame(r["curves"]).assign(rate=r["rate"]) for r in runs], ignore_index=True)
    methods = []
    for r in runs:
        frame = pd.DataFrame(r["methods"]).assign(rate=r["rate"])
        base = frame[frame["method"] == method_label("vanilla")].iloc[0]
        for col in ("MCQ", "Conf-2C", "FACTOR"):
            frame[f"{col} gain"] = frame[col] - base[col]
        methods.append(frame)
    return measures, curves, pd.concat(methods, ignore_index=True)


RATE_CLAIMS = (
    Claim("scarce negation in pretraining causes negation blindness", "PeakPatch sec. 3.2; KTN Thm. 1; NegationCLIP",
          "CLIP on VOC MCQ: affirmative {aff:.0f}%, negated {neg:.0f}% (one pretraining rate)",
          "MCQ negative {mcq_negative_lo:.1f} -> {mcq_negative_hi:.1f}; "
          "polarity AUC {polarity_lo:.1f} -> {polarity_hi:.1f}",
          "mcq_negative_hi - mcq_negative_lo >= 5 and polarity_hi - polarity_lo >= 5",
          "mcq_negative_hi - mcq_negative_lo >= 5 or polarity_hi - polarity_lo >= 5",
          {"aff": ("NegBench", "Sec. 5 (summary)", "CLIP", "VOC Aff"),
           "neg": ("NegBench", "Sec. 5 (summary)", "CLIP", "VOC Neg")}, section="ch07-measures"),
    Claim("without negation in pretraining there is no compositional peak to recover",
          "PeakPatch sec. 3.2; tested by this chapter's rates", "not tested (one pretraining rate)",
          "LCD peak {lcd_peak_lo:.3f} -> {lcd_peak_hi:.3f}", "lcd_peak_hi - lcd_peak_lo > 0.01",
          section="ch07-measures"),
    Claim("post-hoc corrections help less as the negation rate rises", "PeakPatch sec. 3.2 (implied); KTN sec. 3",
          "not tested (one pretraining rate)", "{gains}", "methods_shrinking == methods_measured",
          "methods_shrinking > 0", section="ch07-methods"),
    Claim("PeakPatch's gain tracks the height of the LCD peak", "PeakPatch sec. 3.2-3.3",
          "not tested (one pretraining rate)", "rho = {peak_gain_rho:.2f} over {n_rates} rates",
          "peak_gain_rho >= 0.5", section="ch07-methods"),
    Claim("negation data costs affirmative retrieval", "NegBench alpha ablation (the CLIP/MCQ trade)",
          "NegFull R@5 {alpha1:.1f} (alpha=1) -> {alpha0:.1f} (alpha=0)", "R@5 {r5_lo:.1f} -> {r5_hi:.1f}",
          "r5_hi - r5_lo <= -2", None,
          {"alpha1": ("NegBench", "Table 1 alpha ablation (summary)", "NegFull alpha=1", "COCO R@5"),
           "alpha0": ("NegBench", "Table 1 alpha ablation (summary)", "NegFull alpha=0", "COCO R@5")},
          section="ch07-measures"),
)


def rate_measures(measures: pd.DataFrame, methods: pd.DataFrame) -> dict:
    """What ``RATE_CLAIMS`` read, in points, from the lowest (``_lo``) and highest (``_hi``) rate of
    the sweep. The peak-gain correlation needs three rates and a PeakPatch row (NaN otherwise)."""
    by_rate = measures.sort_values("rate")
    lo, hi = by_rate.iloc[0], by_rate.iloc[-1]
    m = {f"{name}_{end}": 100 * row[column] for name, column in (
        ("mcq_negative", "MCQ negative"), ("polarity", "polarity AUC"), ("r5", "retrieval R@5"))
        for end, row in (("lo", lo), ("hi", hi))}
    m.update(lcd_peak_lo=float(lo["LCD peak"]), lcd_peak_hi=float(hi["LCD peak"]))
    gains = methods[methods["method"] != method_label("vanilla")].pivot_table(index="rate", columns="method",
                                                                              values="MCQ gain")
    m["gains"] = ", ".join(f"{c} {100 * gains[c].iloc[0]:+.1f} -> {100 * gains[c].iloc[-1]:+.1f}"
                           for c in gains.columns)
    m["methods_measured"] = len(gains.columns)
    m["methods_shrinking"] = sum(int(gains[c].iloc[-1] < gains[c].iloc[0]) for c in gains.columns)
    peak = measures.set_index("rate")["LCD peak"].reindex(gains.index)
    joint = method_label("peakpatch_joint")
    m["n_rates"] = len(gains)
    m["peak_gain_rho"] = (spearman_rho(peak.to_numpy(), gains[joint].to_numpy())
                          if len(gains) >= 3 and joint in gains else float("nan"))
    return m


def rate_verdicts(measures: pd.DataFrame, methods: pd.DataFrame) -> pd.DataFrame:
    """A verdict per claim from the sweep (``judge``: the rule printed is the one evaluated)."""
    return judge(RATE_CLAIMS, rate_measures(measures, methods))
