"""PeakPatch as a scorer for the shared evaluation, and its analyses (App. 0.H, Fig. 5, Fig. 7)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import torch

from .evaluate import ClipScorer
from .peakpatch import PeakPatch
from .recipes import NEGATION_CUES


class PeakPatchScorer:
    """cos(f_I, f_hat) + Delta s for any caption: the frozen backbone is tapped at (l_p, l_a) on the
    fly, features are rounded through float16 exactly as the training cache stores them."""

    def __init__(self, backbone, model: PeakPatch, l_p: int, l_a: int, name: str = "PeakPatch",
                 batch_size: int = 256):
        self.backbone, self.model, self.l_p, self.l_a = backbone, model.eval(), l_p, l_a
        self.name, self.batch_size = name, batch_size
        self._images = ClipScorer(backbone, batch_size=batch_size)
        self._text: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    def image_features(self, split, indices) -> torch.Tensor:
        return self._images.image_features(split, indices)

    def text_batch(self, captions: Sequence[str]) -> dict:
        taps = self.backbone.encode_text_layers(list(captions), token_layers=sorted({self.l_p, self.l_a}),
                                                batch_size=self.batch_size)
        rows = torch.arange(len(taps.eos_index))
        as_cached = lambda x: x.half().float()  # noqa: E731 - the cache's precision
        return {"final": as_cached(taps.final), "proj_lp": as_cached(taps.layer(self.l_p)),
                "eos_lp": as_cached(taps.tokens[self.l_p][rows, taps.eos_index]),
                "eos_la": as_cached(taps.tokens[self.l_a][rows, taps.eos_index]),
                "tokens": as_cached(taps.tokens[self.l_p]) * taps.mask[..., None], "mask": taps.mask}

    @torch.no_grad()
    def text_features(self, captions: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """(f_hat, f^{l_p}_T) per caption, computed once per distinct caption and cached."""
        todo = sorted({c for c in captions if c not in self._text})
        for k in range(0, len(todo), self.batch_size):
            chunk = todo[k:k + self.batch_size]
            batch = self.text_batch(chunk)
            for c, f, p in zip(chunk, self.model.corrected(batch), batch["proj_lp"]):
                self._text[c] = (f, p)
        corrected = torch.stack([self._text[c][0] for c in captions])
        return corrected, torch.stack([self._text[c][1] for c in captions])

    def corrected(self, captions: Sequence[str]) -> torch.Tensor:
        return self.text_features(captions)[0]

    @torch.no_grad()
    def score(self, image_features: torch.Tensor, captions: Sequence[str]) -> torch.Tensor:
        corrected, peak = self.text_features(captions)
        scores = image_features @ corrected.T
        if self.model.scn is not None:
            scores = scores + self.model.scn.pairwise(corrected, peak, image_features)
        return scores

    @torch.no_grad()
    def score_rows(self, image_features: torch.Tensor, captions_per_row: list[list[str]]) -> torch.Tensor:
        k = len(captions_per_row[0])
        corrected, peak = self.text_features([c for caps in captions_per_row for c in caps])
        corrected = corrected.reshape(len(captions_per_row), k, -1)
        image = image_features[:, None, :].expand(-1, k, -1)
        delta = self.model.delta(corrected, peak.reshape(len(captions_per_row), k, -1), image)
        return (image * corrected).sum(-1) + delta


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


def evaluate_methods(scorers: dict, bench: dict, splits: dict, dataset: str, model: str, pretrained: str,
                     ood_tasks: tuple[str, ...] = ("mcq",), retention_reference=None,
                     items: dict | None = None) -> pd.DataFrame:
    """Every scorer on the full ``val`` suite and, on ``ood``, the tasks in ``ood_tasks`` (the
    papers report VOC for MCQ only): one results frame, ``method`` naming the scorer. With
    ``retention_reference`` (the vanilla scorer) a ``retention`` row adds LCSE's Spearman rho.
    ``items`` (a dict) receives the per-item outcomes, keyed (method, dataset, task, metric)."""
    from .benchmarks import evaluate_benchmarks
    from .evaluate import evaluate_mcq, evaluate_retention, result_row, results_frame

    rows = []

    def add(name, split_name, task, metrics, outcomes):
        rows.append(result_row(f"{dataset}/{split_name}", model, pretrained, task, {"method": name, **metrics}))
        if items is not None:
            items.update({(name, f"{dataset}/{split_name}", task, m): v for m, v in outcomes.items()})

    for name, scorer in scorers.items():
        scorer.name = name
        rows += evaluate_benchmarks(scorer, bench["val"], splits["val"], f"{dataset}/val", model, pretrained,
                                    items=items)
        if retention_reference is not None:
            outcomes = {}
            add(name, "val", "retention", evaluate_retention(scorer, retention_reference, bench["val"].retrieval_affirmative,
                                                             splits["val"], items=outcomes), outcomes)
        if "ood" in bench and "mcq" in ood_tasks:
            outcomes = {}
            add(name, "ood", "mcq", evaluate_mcq(scorer, bench["ood"].mcq, splits["ood"], items=outcomes), outcomes)
    return results_frame(rows)


MCQ_COLUMNS = {"positive_accuracy": "Aff", "negative_accuracy": "Neg", "hybrid_accuracy": "Hyb", "accuracy": "Avg"}


def mcq_table(results: pd.DataFrame) -> pd.DataFrame:
    """PeakPatch Table 1's layout: per method, Aff/Neg/Hyb/Avg on val (COCO) and ood (VOC), in %."""
    mcq = results[results["task"] == "mcq"].copy()
    mcq["split"] = mcq["dataset"].str.split("/").str[-1].map({"val": "COCO/val", "ood": "VOC/ood"})
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
    from sklearn.manifold import TSNE

    from .phrasing import with_article

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


def near_tie_table(scorers: dict, mcq: pd.DataFrame, split, reference: str = "vanilla", share: float = 0.25
                   ) -> pd.DataFrame:
    """MCQ accuracy on the full set and on the near-tie subset chosen by ``reference``'s margins
    (PeakPatch App. 0.H, Table 13)."""
    from .evaluate import mcq_option_scores

    correct = mcq["correct_answer"].to_numpy()
    scores = {name: mcq_option_scores(scorer, mcq, split) for name, scorer in scorers.items()}
    subset = near_tie_subset(scores[reference], share)
    rows = []
    for name, s in scores.items():
        right = s.argmax(axis=1) == correct
        rows.append({"method": name, f"full (n={len(right)})": 100 * right.mean(),
                     f"near-tie (n={len(subset)})": 100 * right[subset].mean()})
    return pd.DataFrame(rows).round(1)


def ablation_table(results: pd.DataFrame, paper_rows: dict[str, str]) -> pd.DataFrame:
    """PeakPatch Table 5's layout (MCQ Neg, MCQ Avg, negated-retrieval R@5 on val, in %) for each
    method, with the paper's row beside it; ``paper_rows`` maps our method name to the paper's."""
    from .papers import paper_numbers

    table5 = paper_numbers().query("table == 'Table 5'")
    paper = {row: dict(zip(group["column"], group["value"])) for row, group in table5.groupby("row")}
    rows = []
    for method, paper_row in paper_rows.items():
        mine = results[results["method"] == method]
        mcq = mine[(mine["task"] == "mcq") & mine["dataset"].str.endswith("/val")].iloc[0]
        ret = mine[mine["task"] == "retrieval_negated"].iloc[0]
        rows.append({"variant": method, "MCQ Neg": 100 * mcq["negative_accuracy"], "MCQ Avg": 100 * mcq["accuracy"],
                     "Ret R@5": 100 * ret["R@5"],
                     **{f"paper {k}": v for k, v in paper.get(paper_row, {}).items()}})
    return pd.DataFrame(rows).round(1)


def joint_peakpatch_scorer(session, layers, progress: bool = True) -> PeakPatchScorer:
    """Chapter 03's joint PeakPatch on this session's backbone, trained once from the feature cache
    (or loaded), as a scorer whose ``corrected`` is the ECN text encoder the KTN and LCSE chapters
    stack their methods on."""
    from .features import TextFeatures, extract_text_features
    from .negtrain import prepare_training_data
    from .peakpatch_train import PeakPatchConfig, ensure_peakpatch

    prof = session.profile
    root = prof.artifacts_dir() / "features"
    data = prepare_training_data(session.backbone, session.splits["negtrain"], session.data_key, root,
                                 progress=progress)
    features = TextFeatures(extract_text_features(session.backbone, data.captions, layers.l_p, layers.l_a, root,
                                                  session.data_key, progress=progress))
    config = PeakPatchConfig.from_settings(prof.peakpatch)
    model = ensure_peakpatch(features, data, config, prof.artifacts_dir() / "peakpatch", progress)
    return PeakPatchScorer(session.backbone, model, layers.l_p, layers.l_a, name="PeakPatch (joint)")
