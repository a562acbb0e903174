"""PeakPatch as a scorer for the shared evaluation, and its analyses (App. 0.H, Fig. 5, Fig. 7)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import torch

from ...benchmarks.evaluate import image_index, mcq_option_scores
from ...core.metrics import choice_credit
from ...core.phrasing import NEGATION_CUES, has_negation_cue, with_article
from ...core.results import result_value
from ..registry import method_label, variant_label
from .scorer import PeakPatchScorer


def near_tie_subset(vanilla_scores: np.ndarray, share: float = 0.25) -> np.ndarray:
    """Indices of the questions whose frozen top-1/top-2 margin is in the smallest ``share``
    (App. 0.H)."""
    top = np.sort(vanilla_scores, axis=1)
    margin = top[:, -1] - top[:, -2]
    return np.sort(np.argsort(margin, kind="stable")[:max(1, int(round(share * len(margin))))])


@torch.no_grad()
def attention_by_token_type(scorer: PeakPatchScorer, captions: Sequence[str]) -> pd.DataFrame:
    """Per ECN head, the mean attention weight on negation-cue tokens and on content tokens
    (PeakPatch Fig. 7), and their ratio; SOT/EOT and padding excluded."""
    if scorer.model.ecn is None:
        raise ValueError("this PeakPatch variant has no ECN to inspect")
    batch = scorer.text_batch(captions)
    _, weights = scorer.model.ecn.attend(batch["tokens"], batch["mask"], need_weights=True)   # [B, H, 1, T]
    weights = weights[:, :, 0]
    tokenizer = scorer.backbone.tokenizer
    ids = scorer.backbone.tokenize(list(captions)).cpu()
    encode = getattr(tokenizer, "encode", None) or tokenizer.tokenizer.encode   # open_clip / HF-backed
    cue_ids = {i for cue in NEGATION_CUES if cue != "n't" for i in encode(cue)}
    rows = []
    for b in range(len(captions)):
        n = int(batch["mask"][b].sum())
        inner = torch.arange(1, n - 1)                          # drop SOT and EOT
        is_cue = torch.tensor([int(ids[b, t]) in cue_ids for t in inner], dtype=torch.bool)
        for h in range(weights.shape[1]):
            w = weights[b, h, inner]
            rows.append({"caption": b, "head": h,
                         "negation": float(w[is_cue].mean()) if is_cue.any() else np.nan,
                         "content": float(w[~is_cue].mean()) if (~is_cue).any() else np.nan})
    frame = pd.DataFrame(rows).groupby("head")[["negation", "content"]].mean().reset_index()
    frame["ratio"] = frame["negation"] / frame["content"]
    return frame


PROTOCOL_TASKS = ("mcq", "retrieval", "retrieval_negated", "confusion_2c", "factor_operator", "valse_existence",
                  "retention")   # what the protocol table reads: the suite of the non-default protocols


MCQ_COLUMNS = {"positive_accuracy": "Aff", "negative_accuracy": "Neg", "hybrid_accuracy": "Hyb", "accuracy": "Avg"}


def protocol_table(results: pd.DataFrame, methods: dict[tuple[str, str], str]) -> pd.DataFrame:
    """Chapter 03's protocol x method table, in % (rho as a fraction): ``methods`` maps (protocol,
    method label) to a results method. MCQ overall and per template on val and ood, wrong picks by
    type on val, negated and affirmative retrieval, retention rho, Conf-2C, FACTOR operator, VALSE."""
    columns = [("MCQ val", "mcq", "accuracy", "val"), ("Aff", "mcq", "positive_accuracy", "val"),
               ("Neg", "mcq", "negative_accuracy", "val"), ("Hyb", "mcq", "hybrid_accuracy", "val"),
               ("MCQ ood", "mcq", "accuracy", "ood"), ("ood Aff", "mcq", "positive_accuracy", "ood"),
               ("ood Neg", "mcq", "negative_accuracy", "ood"), ("ood Hyb", "mcq", "hybrid_accuracy", "ood"),
               ("wrong: positive", "mcq", "wrong_pick_positive", "val"),
               ("wrong: negative", "mcq", "wrong_pick_negative", "val"),
               ("wrong: hybrid", "mcq", "wrong_pick_hybrid", "val"), ("R-Neg@5", "retrieval_negated", "R@5", "val"),
               ("R@5", "retrieval", "R@5", "val"), ("rho", "retention", "rho", "val"),
               ("Conf-2C", "confusion_2c", "mAP", "val"), ("FACTOR op", "factor_operator", "accuracy", "val"),
               ("VALSE", "valse_existence", "accuracy", "val")]
    rows = []
    for (protocol, label), method in methods.items():
        row = {"protocol": protocol, "method": label}
        for name, task, metric, split in columns:
            value = result_value(results, method, task, metric, split)
            row[name] = round(value if metric == "rho" else 100 * value, 3 if metric == "rho" else 1)
        rows.append(row)
    return pd.DataFrame(rows)


def mcq_table(results: pd.DataFrame) -> pd.DataFrame:
    """PeakPatch Table 1's layout: per method, Aff/Neg/Hyb/Avg on val (COCO) and ood (VOC), in %."""
    mcq = results[results["task"] == "mcq"].copy()
    mcq["split"] = mcq["split"].map({"val": "COCO/val", "ood": "VOC/ood"})
    long = mcq.melt(id_vars=["method", "split"], value_vars=list(MCQ_COLUMNS), var_name="metric")
    long["metric"] = long["metric"].map(MCQ_COLUMNS)
    table = long.pivot_table(index="method", columns=["split", "metric"], values="value", sort=False)
    return (100 * table).reindex(columns=[(s, m) for s in ("COCO/val", "VOC/ood") for m in MCQ_COLUMNS.values()
                                          if (s, m) in table.columns]).round(1)


TSNE_AFFIRMATIVE = ("a photo of {a}", "there is {a}", "this image features {a}", "an image with {a}",
                    "a picture showing {a}")
TSNE_NEGATED = ("a photo with no {x}", "there is no {x}", "this image does not feature {a}", "an image without {a}",
                "a picture showing no {x}")


def embedding_map(embed, categories: Sequence[str], seed: int = 0) -> pd.DataFrame:
    """2-D t-SNE of 5 affirmative and 5 negated captions per category (PeakPatch Fig. 5);
    ``embed`` maps captions to [N, d] text embeddings (vanilla or ECN-corrected)."""
    from sklearn.manifold import TSNE  # scikit-learn loads slowly; only this figure needs it


    rows = [{"category": c, "polarity": polarity, "caption": t.format(a=with_article(c), x=c)}
            for c in categories for polarity, templates in (("affirmative", TSNE_AFFIRMATIVE),
                                                             ("negated", TSNE_NEGATED)) for t in templates]
    frame = pd.DataFrame(rows)
    x = embed(frame["caption"].tolist()).double().numpy()
    xy = TSNE(n_components=2, perplexity=min(15, len(frame) - 1), random_state=seed, init="pca").fit_transform(x)
    frame["x"], frame["y"] = xy[:, 0], xy[:, 1]
    return frame


def polarity_separation(frame: pd.DataFrame, embed) -> float:
    """Mean cosine between a category's affirmative and negated captions minus the mean cosine
    within affirmative captions of the category: negative when negation moves captions away."""
    x = torch.nn.functional.normalize(embed(frame["caption"].tolist()).double(), dim=-1)
    gaps = []
    for _, group in frame.groupby("category"):
        aff = x[group.index[group["polarity"] == "affirmative"]]
        neg = x[group.index[group["polarity"] == "negated"]]
        within = (aff @ aff.T)[~torch.eye(len(aff), dtype=torch.bool)].mean()
        gaps.append(float((aff @ neg.T).mean() - within))
    return float(np.mean(gaps))


def near_tie_table(scorers: dict, mcq: pd.DataFrame, split, reference: str = method_label("vanilla"),
                   share: float = 0.25) -> pd.DataFrame:
    """MCQ accuracy on the full set and on the near-tie subset chosen by ``reference``'s margins
    (PeakPatch App. 0.H, Table 13)."""

    correct = mcq["correct_answer"].to_numpy()
    scores = {name: mcq_option_scores(scorer, mcq, split) for name, scorer in scorers.items()}
    subset = near_tie_subset(scores[reference], share)
    rows = []
    for name, s in scores.items():
        right = choice_credit(s, correct)              # a tie earns 1/k
        rows.append({"method": name, f"full (n={len(right)})": 100 * right.mean(),
                     f"near-tie (n={len(subset)})": 100 * right[subset].mean()})
    return pd.DataFrame(rows).round(1)


@torch.no_grad()
def score_corrections(scorer: PeakPatchScorer, mcq: pd.DataFrame, split) -> pd.DataFrame:
    """Delta s of every option of the benchmark MCQ against its image, with whether the option
    is negated (has a cue) and true. An SCN that learned "negation is false" gives about
    -alpha_max to every negated option, true or not."""
    if scorer.model.scn is None:
        raise ValueError("this PeakPatch variant has no SCN")
    index = image_index(split, mcq["image_id"].tolist(), "MCQ")
    captions = mcq[[f"caption_{k}" for k in range(4)]].to_numpy()
    corrected, peak = scorer.text_features(captions.ravel().tolist())
    image = scorer.image_features(split, index)[:, None, :].expand(-1, 4, -1)
    delta = scorer.model.delta(corrected.reshape(len(mcq), 4, -1), peak.reshape(len(mcq), 4, -1), image)
    truth = np.arange(4)[None, :] == mcq["correct_answer"].to_numpy()[:, None]
    return pd.DataFrame({"delta s": delta.numpy().ravel(), "negated": [has_negation_cue(c) for c in captions.ravel()],
                         "true": truth.ravel()})


def correction_summary(deltas: pd.DataFrame) -> pd.DataFrame:
    """Mean and quartiles of Delta s per (negated, true) cell of ``score_corrections``."""
    frame = deltas.assign(option=np.where(deltas["negated"], "negated", "affirmative"),
                          truth=np.where(deltas["true"], "true", "false"))
    return frame.groupby(["option", "truth"])["delta s"].describe()[["count", "mean", "25%", "50%", "75%"]]


def protocol_findings(by_protocol: pd.DataFrame, deltas: pd.DataFrame, history: pd.DataFrame, paper_neg: float,
                      variant: str = "joint") -> list[str]:
    """Per protocol, what the PeakPatch ``variant`` does with negated captions, from the protocol
    table, the SCN's corrections (``score_corrections`` with a ``protocol`` column) and the training
    history: its negative-template accuracy, the mean Delta s on true negated and true affirmative
    options, where its wrong picks go and at which epoch the held-out NegMCQ peaked; then which
    protocol comes closest to the paper's negative-template accuracy."""
    frozen = by_protocol.set_index("method").loc[method_label("vanilla")]
    rows = by_protocol[by_protocol["method"] == variant_label(variant)].set_index("protocol")
    mean = deltas.groupby(["protocol", "negated", "true"])["delta s"].mean()
    lines = []
    for protocol, r in rows.iterrows():
        curve = history[history["run"] == variant_label(variant, protocol)].set_index("epoch")["held-out MCQ accuracy"]
        lines.append(f"{variant_label(variant)} under {protocol}: {r['Neg']:.1f}% of negative-template questions "
                     f"right (frozen {frozen['Neg']:.1f}%); "
                     f"the SCN moves true negated options by {mean[(protocol, True, True)]:+.3f} and true affirmative "
                     f"ones by {mean[(protocol, False, True)]:+.3f}; "
                     f"{r['wrong: positive']:.1f}% of wrong picks are the "
                     f"positive option (frozen {frozen['wrong: positive']:.1f}%); held-out NegMCQ "
                     f"{100 * curve.iloc[0]:.1f}% untrained, best {100 * curve.max():.1f}% "
                     f"at epoch {int(curve.idxmax())}, "
                     f"{100 * curve.iloc[-1]:.1f}% at the last epoch.")
    closest = (rows["Neg"] - paper_neg).abs().idxmin()
    lines.append(f"Closest to the paper's {paper_neg:.1f}% negative-template accuracy: {closest} "
                 f"({rows.loc[closest, 'Neg']:.1f}%).")
    return lines


ACCURACY = "held-out MCQ accuracy"


def design_choices(sweep: pd.DataFrame, design: pd.DataFrame, selection: pd.DataFrame,
                   protocol: str) -> dict[str, pd.DataFrame]:
    """Chapter 03's choices made on held-out NegMCQ, each as its options (``option``, ``ACCURACY``): the
    (l_p, l_a) of the layer sweep, the SCN scale and penalty and the ECN's initialisation of the design
    table, and the NegFull alpha of ``protocol`` (the released weights, not chosen, are left out)."""
    layers = sweep.assign(option=[f"({int(p)}, {int(a)})" for p, a in zip(sweep["l_p"], sweep["l_a"])])
    identity = design[design["identity_init"].astype(bool)]
    scn = identity.assign(option=[f"scale {s:g}, penalty {p:g}" for s, p in
                                  zip(identity["scn_logit_scale"], identity["delta_penalty"])])
    default = design[~design["identity_init"].astype(bool)]
    init = pd.concat([identity[identity["candidate"].isin([c.rsplit(", default init", 1)[0]
                                                           for c in default["candidate"]])]
                      .assign(option="last layer at zero"), default.assign(option="PyTorch default")])
    alphas = selection[(selection["protocol"] == protocol) & selection[ACCURACY].notna()]
    alphas = alphas.assign(option=[f"alpha {a}" for a in alphas["alpha"]])
    return {"peak and anchor layers": layers, "SCN scale and penalty": scn, "ECN initialisation": init,
            "NegFull alpha": alphas}


def choice_ties(options: dict[str, pd.DataFrame], questions: int) -> pd.DataFrame:
    """For each choice, its best option against every other: both held-out accuracies over ``questions``
    questions, the difference and two standard errors of it (each accuracy's binomial error, the two taken
    as independent, which overstates the error of a paired comparison), and ``separated`` when the
    difference exceeds them; otherwise the two are a tie that these questions cannot decide."""
    if questions < 1:
        raise ValueError(f"choice_ties needs the number of held-out questions; got {questions}")
    rows = []
    for choice, frame in options.items():
        if len(frame) < 2:
            continue
        ranked = frame.sort_values(ACCURACY, ascending=False, kind="stable")
        best = ranked.iloc[0]
        for _, other in ranked.iloc[1:].iterrows():
            a, b = float(best[ACCURACY]), float(other[ACCURACY])
            two_se = 2 * np.sqrt(a * (1 - a) / questions + b * (1 - b) / questions)
            rows.append({"choice": choice, "best": best["option"], "other": other["option"],
                         "best accuracy": 100 * a, "other accuracy": 100 * b, "difference": 100 * (a - b),
                         "2 SE": 100 * two_se, "separated": bool(a - b > two_se), "questions": questions})
    return pd.DataFrame(rows)


def ties_findings(ties: pd.DataFrame) -> list[str]:
    """One sentence per choice: its best option, and which others it beats beyond two standard errors
    and which are ties."""
    lines = []
    for choice, block in ties.groupby("choice", sort=False):
        best = block["best"].iloc[0]
        beaten = block[block["separated"]]["other"].tolist()
        tied = block[~block["separated"]]["other"].tolist()
        parts = []
        if beaten:
            parts.append(f"beats {', '.join(beaten)} by more than two standard errors")
        if tied:
            parts.append(f"ties with {', '.join(tied)} (within two standard errors of "
                         f"{block['2 SE'].iloc[0]:.1f} points)")
        lines.append(f"{choice}: {best} " + "; ".join(parts) + ".")
    return lines
