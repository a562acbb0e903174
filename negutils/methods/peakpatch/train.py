"""Joint training of PeakPatch on cached frozen features (PeakPatch sec. 3.4, App. 0.I), on the
negation data of one protocol (``negutils.methods.training_data``).

    L = L_ECN + lambda_SCN * L_SCN
    L_ECN: symmetric InfoNCE at logit scale 100 over the batch's images and one positive caption
           per image (under ``negbench``, an affirmative or NegCap caption); the protocol's hard
           negatives (present-object negations) join the image -> text denominator.
    L_SCN: K-way cross-entropy over cos(f_I, f_hat) + Delta s of each image's MCQ (NegMCQ, or
           App. 0.J's caption-vs-its-negation question) plus a penalty on mean (Delta s)^2.

The paper fixes the InfoNCE scale (100) but not the scale of the SCN's cross-entropy nor the
weight of its Delta s penalty: both are config fields that chapter 03 sets by measurement
(``scn_logit_scale``, ``delta_penalty``). AdamW (weight decay 0.01) with separate learning rates
for the ECN and the SCN, cosine annealing to 1% of each, gradient clipping at 1.0; the checkpoint
kept is the epoch with the best accuracy on the held-out images' NegMCQ.
"""
from __future__ import annotations

import copy
import math
import time
import warnings
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from ...core.cache import config_hash, recorded_problems, save_recorded
from ...core.metrics import choice_credit
from ...core.results import choice_for, read_results
from ...core.workers import TRAINING_THREADS, WORKERS, run_in_workers, torch_threads
from ...models.features import TextFeatures
from ..training_data import (
    NegationData,
    contrastive_loss,
    mcq_loss,
    protocol_view,
)
from .model import PeakPatch


@dataclass(frozen=True)
class PeakPatchConfig:
    variant: str = "joint"
    protocol: str = "negbench"
    epochs: int = 10
    batch_size: int = 1024
    lr_ecn: float = 1e-5
    lr_scn: float = 1e-4
    weight_decay: float = 0.01
    lambda_scn: float = 1.0
    logit_scale: float = 100.0        # the ECN's InfoNCE (App. 0.I)
    scn_logit_scale: float = 100.0    # the SCN's cross-entropy: open in the paper
    delta_penalty: float = 1.0        # weight of mean (Delta s)^2: open in the paper
    identity_init: bool = True        # ECN starts at f_hat = f_T: open in the paper
    grad_clip: float = 1.0
    final_lr_fraction: float = 0.01
    dropout: float = 0.1
    seed: int = 0

    @classmethod
    def from_settings(cls, settings, **overrides) -> "PeakPatchConfig":
        """The budget and the measured choices of a profile's ``PeakPatchSettings`` (chapter 03's
        runs, and the joint model chapters 04, 05 and 07 stack on)."""
        return cls(**{"epochs": settings.epochs, "batch_size": settings.batch_size, "lr_ecn": settings.lr_ecn,
                      "lr_scn": settings.lr_scn, "scn_logit_scale": settings.scn_logit_scale,
                      "delta_penalty": settings.delta_penalty, **overrides})


def feature_batch(features: TextFeatures, indices) -> dict:
    """float32 tensors of the cached features of the given captions, tokens padded and masked."""
    idx = np.asarray(indices, dtype=np.int64)
    batch = {name: torch.from_numpy(features[name][idx]).float()     # torch casts float16 faster than numpy
             for name in ("final", "proj_lp", "eos_lp", "eos_la")}
    batch["tokens"], batch["mask"] = features.padded_tokens(idx)
    return batch


def losses(model: PeakPatch, features: dict, images: torch.Tensor, batch: dict, config: PeakPatchConfig
           ) -> dict[str, torch.Tensor]:
    """The loss terms of one batch: ``features`` of the batch's distinct captions, ``images`` [B, d]
    and ``batch`` as ``ProtocolView.batch`` lays it out (indices into those captions)."""
    corrected = model.corrected(features)
    out = {}
    if model.ecn is not None:
        columns = torch.from_numpy(np.concatenate([batch["positives"], batch["negatives"]]))
        # index_select, not advanced indexing: its backward adds repeated rows in a fixed order whatever the
        # threads (advanced indexing's did not, and two runs drifted apart; tested)
        out["ecn"] = contrastive_loss(images, corrected.index_select(0, columns), config.logit_scale)
    if model.scn is not None and len(batch["mcq_rows"]):
        opt = torch.from_numpy(batch["mcq"])
        image = images[torch.from_numpy(batch["mcq_rows"])][:, None, :].expand(-1, 4, -1)   # [Q, 4, d]
        options_text = model.scn_view(corrected).index_select(0, opt.reshape(-1)).reshape(*opt.shape, -1)
        delta = model.delta(options_text, features["proj_lp"][opt], image)
        scores = (image * options_text).sum(-1) + delta
        out["scn"] = mcq_loss(scores, batch["mcq_correct"], config.scn_logit_scale) + \
            config.delta_penalty * (delta ** 2).mean()
    out["total"] = out.get("ecn", 0.0) + config.lambda_scn * out.get("scn", 0.0)
    return out


@torch.no_grad()
def option_scores(model: PeakPatch, features: TextFeatures, images: torch.Tensor, mcq: pd.DataFrame,
                  batch_size: int = 1024) -> torch.Tensor:
    """[Q, 4] corrected scores cos(f_I, f_hat) + Delta s of each question's image and options."""
    model.eval()
    options = mcq[[f"option_{k}" for k in range(4)]].to_numpy()
    unique, inverse = np.unique(options.ravel(), return_inverse=True)
    corrected, peak = [], []
    for k in range(0, len(unique), batch_size):
        batch = feature_batch(features, unique[k:k + batch_size])
        corrected.append(model.corrected(batch))
        peak.append(batch["proj_lp"])
    corrected, peak = torch.cat(corrected), torch.cat(peak)
    opt = torch.from_numpy(inverse.reshape(-1, 4))
    image = (images[torch.as_tensor(mcq["image_index"].to_numpy(dtype=np.int64, copy=True))][:, None, :]
             .expand(-1, 4, -1))
    return (image * corrected[opt]).sum(-1) + model.delta(corrected[opt], peak[opt], image)


def held_out_credit(model: PeakPatch, features: TextFeatures, data: NegationData) -> np.ndarray:
    """Per held-out NegMCQ question, the credit of the model's pick (1 right, 0 wrong, 1/k on a k-way tie)."""
    mcq = data.held_out_mcq()
    return choice_credit(option_scores(model, features, data.images, mcq).cpu().numpy(), mcq["correct"].to_numpy())


def held_out_accuracy(model: PeakPatch, features: TextFeatures, data: NegationData) -> float:
    """4-way accuracy on the held-out images' NegMCQ: the mean of ``held_out_credit``."""
    credit = held_out_credit(model, features, data)
    return float(credit.mean()) if len(credit) else float("nan")


def _lr_lambda(total_steps: int, final_fraction: float):
    def factor(step: int) -> float:
        progress = min(step / max(1, total_steps), 1.0)
        return final_fraction + (1 - final_fraction) * 0.5 * (1 + math.cos(math.pi * progress))
    return factor


def new_model(features: TextFeatures, config: PeakPatchConfig) -> PeakPatch:
    width, dim = int(features.index["width"]), int(features.index["embed_dim"])
    return PeakPatch(width, dim, config.variant, dropout=config.dropout, identity_init=config.identity_init)


def train_peakpatch(features: TextFeatures, data: NegationData, config: PeakPatchConfig,
                    progress: bool = True) -> tuple[PeakPatch, pd.DataFrame]:
    """Train one variant on ``config.protocol``'s data. ``features`` caches ``data.captions``;
    ``data.images`` [n_images, d] holds the split's image embeddings. Returns the best model (by
    held-out NegMCQ accuracy, epoch 0 being the untrained modules) and the per-epoch history.
    Always on one torch thread, so the weights do not depend on the machine's cores or on how
    many runs train side by side (``negutils.core.workers``)."""
    with torch_threads(TRAINING_THREADS):
        return _train(features, data, config, progress)


def _train(features: TextFeatures, data: NegationData, config: PeakPatchConfig, progress: bool
           ) -> tuple[PeakPatch, pd.DataFrame]:
    if len(features) != len(data.captions):
        raise ValueError(f"the feature cache holds {len(features)} captions, the negation data {len(data.captions)}")
    if data.images is None:
        raise ValueError("the negation data has no image embeddings: build it with prepare_negation_data")
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    view = protocol_view(data, config.protocol)
    if config.variant == "ecn_only":   # nothing reads the MCQ: leave its captions out of the batches
        view.mcq_correct = np.full_like(view.mcq_correct, -1)
    model = new_model(features, config)
    groups = [{"params": list(m.parameters()), "lr": lr}
              for m, lr in ((model.ecn, config.lr_ecn), (model.scn, config.lr_scn)) if m is not None]
    optimizer = torch.optim.AdamW(groups, weight_decay=config.weight_decay,
                                  foreach=True)   # the for-loop's values, faster
    steps_per_epoch = max(1, len(view.images) // config.batch_size)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, _lr_lambda(config.epochs * steps_per_epoch, config.final_lr_fraction))
    best = held_out_accuracy(model, features, data)
    history, best_state = [{"variant": config.variant, "protocol": config.protocol, "epoch": 0,
                            "held-out MCQ accuracy": best}], copy.deepcopy(model.state_dict())
    bar = tqdm(total=config.epochs * steps_per_epoch, desc=f"PeakPatch {config.variant} [{config.protocol}]",
               disable=not progress)
    for epoch in range(1, config.epochs + 1):
        started = time.perf_counter()
        model.train()
        order = rng.permutation(len(view.images))
        sums: dict[str, float] = {}
        for step in range(steps_per_epoch):
            rows = order[step * config.batch_size:(step + 1) * config.batch_size]
            batch = view.batch(rows, rng)
            terms = losses(model, feature_batch(features, batch["captions"]), data.images[view.images[rows]],
                           batch, config)
            if not torch.is_tensor(terms["total"]):   # an SCN-only batch without any MCQ: nothing to learn
                bar.update()
                continue
            optimizer.zero_grad()
            terms["total"].backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            optimizer.step()
            scheduler.step()
            for k, v in terms.items():
                sums[k] = sums.get(k, 0.0) + float(v.detach())
            bar.update()
        seconds = time.perf_counter() - started      # training only, before the held-out evaluation
        accuracy = held_out_accuracy(model, features, data)
        history.append({"variant": config.variant, "protocol": config.protocol, "epoch": epoch,
                        "held-out MCQ accuracy": accuracy,
                        **{f"loss {k}": v / steps_per_epoch for k, v in sums.items()},
                        "samples/s": steps_per_epoch * config.batch_size / seconds})
        if accuracy > best:
            best, best_state = accuracy, copy.deepcopy(model.state_dict())
    bar.close()
    model.load_state_dict(best_state)
    model.eval()
    return model, pd.DataFrame(history)


def checkpoint_paths(features: TextFeatures, data: NegationData, config: PeakPatchConfig, root) -> tuple[Path, Path]:
    """Where ``config`` trained on these features and data keeps its weights and its history."""
    key = config_hash({"features": features.folder.name, "config": asdict(config), "captions": len(data.captions),
                       "train": data.train_images.tolist(), "held": data.held_images.tolist()})
    path = Path(root) / f"peakpatch-{config.variant}-{config.protocol}-{key}.pt"
    return path, path.with_suffix(".history.csv")


def ensure_peakpatch(features: TextFeatures, data: NegationData, config: PeakPatchConfig, root,
                     progress: bool = True) -> tuple[PeakPatch, pd.DataFrame]:
    """Train ``config`` once and keep its weights and history under ``root``, keyed by the feature
    cache, the data and the config; later runs and chapters (KTN and LCSE on ECN embeddings) load
    them instead of retraining."""
    path, history_path = checkpoint_paths(features, data, config, root)
    problems = recorded_problems(path) + recorded_problems(history_path)
    if not problems:
        model = new_model(features, config)
        model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
        return model.eval(), pd.read_csv(history_path)
    if path.exists() or history_path.exists():      # cut or zeroed since: say what, and train again
        warnings.warn(f"PeakPatch checkpoint {path.name} is not whole ({problems[0]}); training it again")
    model, history = train_peakpatch(features, data, config, progress)
    save_recorded(history_path, lambda tmp: history.to_csv(tmp, index=False))
    save_recorded(path, lambda tmp: torch.save(model.state_dict(), tmp))
    return model, history


def _ensure_saved(data: NegationData, root, job: tuple[Path, PeakPatchConfig]) -> None:
    """A worker's job: one (feature folder, config) trained and saved, unless it already is."""
    folder, config = job
    ensure_peakpatch(TextFeatures(folder), data, config, root, progress=False)


def train_missing(jobs: list[tuple[TextFeatures, PeakPatchConfig]], data: NegationData, root,
                  progress: bool = True, workers: int = WORKERS) -> None:
    """Train every (features, config) not yet saved under ``root``, ``workers`` at a time."""
    missing = [(f.folder, c) for f, c in jobs
               if any(recorded_problems(p) for p in checkpoint_paths(f, data, c, root))]
    run_in_workers(_ensure_saved, (data, root), list(dict.fromkeys(missing)), workers, "PeakPatch runs", progress)


def train_variants(features: TextFeatures, data: NegationData, runs: dict[str, PeakPatchConfig], root,
                   progress: bool = True, workers: int = WORKERS) -> tuple[dict[str, PeakPatch], pd.DataFrame]:
    """Every named config (variants, protocols, ablations) on the same features and data, those not
    yet saved trained ``workers`` at a time."""
    train_missing([(features, c) for c in runs.values()], data, root, progress, workers)
    models, histories = {}, []
    for name, config in runs.items():
        models[name], history = ensure_peakpatch(features, data, config, root, progress)
        histories.append(history.assign(run=name))
    return models, pd.concat(histories, ignore_index=True)


def layer_sweep(folders: dict, data: NegationData, base: PeakPatchConfig, root, progress: bool = True,
                judge=None) -> pd.DataFrame:
    """NegMCQ accuracy of the joint model per (l_p, l_a) (PeakPatch Fig. 4): ``judge(model, (l_p, l_a))``
    of each run's kept checkpoint (``methods.decision``), or without one its best held-out epoch;
    ``questions`` is how many questions the accuracy is over."""
    features = {pair: TextFeatures(folder) for pair, folder in sorted(folders.items())}
    train_missing([(f, base) for f in features.values()], data, root, progress)
    rows = []
    for (l_p, l_a), f in features.items():
        model, history = ensure_peakpatch(f, data, base, root, progress=False)
        accuracy = judge(model, (l_p, l_a)) if judge else history["held-out MCQ accuracy"].max()
        rows.append({"l_p": l_p, "l_a": l_a, "held-out MCQ accuracy": accuracy,
                     "questions": judge.questions if judge else len(data.held_out_mcq())})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- what the paper leaves open

DESIGN_FIELDS = ("identity_init", "scn_logit_scale", "delta_penalty")


def scn_candidates(base: PeakPatchConfig, scales, penalties) -> dict[str, PeakPatchConfig]:
    """The joint model at every (SCN logit scale, Delta s penalty) candidate."""
    return {f"SCN scale {s:g}, penalty {p:g}": replace(base, scn_logit_scale=s, delta_penalty=p)
            for s in scales for p in penalties}


def design_table(runs: dict[str, PeakPatchConfig], accuracies: dict[str, float], questions: int) -> pd.DataFrame:
    """One row per candidate: its open choices and its NegMCQ accuracy over ``questions`` questions.
    ``chosen`` marks the best only when it beats the first candidate (the reference) by more than two
    standard errors of the difference (``analysis.choice_ties``'s rule, so a choice the chapter calls a
    tie keeps the reference); a lead within the noise keeps the reference."""
    table = pd.DataFrame([{"candidate": name, **{f: getattr(c, f) for f in DESIGN_FIELDS},
                           "held-out MCQ accuracy": float(accuracies[name]), "questions": questions}
                          for name, c in runs.items()])
    accuracy = table["held-out MCQ accuracy"]
    table["standard error"] = np.sqrt(accuracy * (1 - accuracy) / questions)
    leader = int(accuracy.idxmax())
    two_se = 2 * np.hypot(table["standard error"][leader], table["standard error"][0])
    chosen = leader if accuracy[leader] - accuracy[0] > two_se else 0
    table["chosen"] = table.index == chosen
    return table


def runner_up_design(table: pd.DataFrame) -> tuple[str, dict]:
    """The name and open choices of the best candidate of ``design_table`` that was not chosen: what
    chapter 03 trains at the full budget beside the chosen design, to show what a choice the held-out
    questions decide (or call a tie) does to retrieval."""
    rest = table[~table["chosen"].astype(bool)]
    row = rest.loc[rest["held-out MCQ accuracy"].idxmax()]
    return str(row["candidate"]), chosen_design(table.assign(chosen=table.index == row.name))


def chosen_design(table: pd.DataFrame) -> dict:
    """The open choices of the chosen row of ``design_table``, as PeakPatchConfig fields."""
    row = table[table["chosen"].astype(bool)].iloc[0]
    return {"identity_init": bool(row["identity_init"]), "scn_logit_scale": float(row["scn_logit_scale"]),
            "delta_penalty": float(row["delta_penalty"])}


def choose_design(features: TextFeatures, data: NegationData, base: PeakPatchConfig, scales, penalties, root,
                  progress: bool = True, judge=None, layers: tuple[int, int] | None = None) -> pd.DataFrame:
    """What App. 0.I leaves open: the joint model trained at every (SCN logit scale, Delta s penalty) of
    ``scn_candidates`` from ``base`` (the first candidate is the reference), then with PyTorch's default
    initialisation (``identity_init`` off) at the best of them. Runs are compared by ``judge(model,
    layers)`` (the decision set of ``methods.decision``, ``features`` being at ``layers``), or without one
    by their best held-out epoch. Returns ``design_table`` of every candidate; ``chosen_design`` reads the
    one kept."""
    judged: dict[str, float] = {}       # a candidate of both rounds is the same cached model: judged once

    def table(candidates):
        models, history = train_variants(features, data, candidates, root, progress)
        if judge is None:
            best = history.groupby("run", sort=False)["held-out MCQ accuracy"].max()
            return design_table(candidates, best.to_dict(), len(data.held_out_mcq()))
        judged.update({n: judge(m, layers) for n, m in models.items() if n not in judged})
        return design_table(candidates, judged, judge.questions)

    candidates = scn_candidates(base, scales, penalties)
    best = table(candidates).query("chosen")["candidate"].iloc[0]
    candidates[f"{best}, default init"] = replace(candidates[best], identity_init=False)
    return table(candidates)


def load_design(profile, backbone: str | None = None, pretrained: str | None = None) -> dict:
    """The choices chapter 03 measured for ``profile`` (``results/03_peakpatch_design.csv``): how
    the chapters that stack on PeakPatch get the same model; with ``backbone`` and ``pretrained``, a
    design measured on another backbone is an error (``choice_for``)."""

    table = read_results(profile, "03_peakpatch_design")
    return chosen_design(choice_for(table, "03_peakpatch_design", backbone, pretrained))


@torch.no_grad()
def initial_cosine(features: TextFeatures, config: PeakPatchConfig, n: int = 512) -> float:
    """Mean cos(f_hat, f_T) of an untrained ECN over the first ``n`` cached captions: 1 under
    ``identity_init``, far below under PyTorch's default initialisation."""
    torch.manual_seed(config.seed)
    model = new_model(features, replace(config, variant="joint")).eval()
    batch = feature_batch(features, np.arange(min(n, len(features))))
    return float((model.corrected(batch) * batch["final"]).sum(-1).mean())


def run_plan(base: PeakPatchConfig, protocols, variants, default_protocol: str = "negbench"
             ) -> dict[tuple[str, str], PeakPatchConfig]:
    """(protocol, variant) -> config for chapter 03's main runs: every variant under the default
    protocol, joint / ECN only / SCN only under the others."""
    return {(protocol, variant): replace(base, protocol=protocol, variant=variant)
            for protocol in protocols
            for variant in (variants if protocol == default_protocol else
                            [v for v in variants if v in ("joint", "ecn_only", "scn_only")])}
