"""PeakPatch as a scorer for the shared evaluation, and its analyses (App. 0.H, Fig. 5, Fig. 7)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import torch

from .evaluate import ClipScorer, image_index
from .features import TextFeatures, extract_text_features
from .peakpatch import PeakPatch
from .peakpatch_train import PeakPatchConfig, ensure_peakpatch, load_design
from .recipes import NEGATION_CUES, has_negation_cue
from .training_data import DEFAULT_PROTOCOL, prepare_negation_data, with_protocol
from .verdicts import result_value


class PeakTaps:
    """What PeakPatch reads from the frozen backbone for a caption (final and peak-layer projected
    EOS, the l_p and l_a EOS states, the l_p tokens), tapped once per caption and shared by every
    PeakPatch model on the same (backbone, l_p, l_a). Values are rounded through float16 exactly
    as the training cache stores them."""

    def __init__(self, backbone, l_p: int, l_a: int, batch_size: int = 256):
        self.backbone, self.l_p, self.l_a, self.batch_size = backbone, l_p, l_a, batch_size
        self._store: dict[str, tuple[torch.Tensor, ...]] = {}

    def _tap(self, captions: list[str]) -> None:
        taps = self.backbone.encode_text_layers(captions, token_layers=sorted({self.l_p, self.l_a}),
                                                batch_size=self.batch_size)
        rows = torch.arange(len(captions))
        eos_lp, eos_la = taps.tokens[self.l_p][rows, taps.eos_index], taps.tokens[self.l_a][rows, taps.eos_index]
        for j, caption in enumerate(captions):
            n = int(taps.mask[j].sum())
            self._store[caption] = (taps.final[j].half(), taps.layer(self.l_p)[j].half(), eos_lp[j].half(),
                                    eos_la[j].half(), taps.tokens[self.l_p][j, :n].half())

    def batch(self, captions: Sequence[str]) -> dict:
        """The feature batch ``PeakPatch.corrected`` takes, float32, tokens padded and masked."""
        todo = sorted((c for c in dict.fromkeys(captions) if c not in self._store), key=len)   # similar lengths batch
        for k in range(0, len(todo), self.batch_size):
            self._tap(todo[k:k + self.batch_size])
        stored = [self._store[c] for c in captions]
        lengths = [len(s[4]) for s in stored]
        tokens = torch.zeros(len(stored), max(lengths), stored[0][4].shape[-1])
        mask = torch.zeros(len(stored), max(lengths), dtype=torch.bool)
        for j, s in enumerate(stored):
            tokens[j, :lengths[j]], mask[j, :lengths[j]] = s[4].float(), True
        stack = lambda k: torch.stack([s[k] for s in stored]).float()  # noqa: E731
        return {"final": stack(0), "proj_lp": stack(1), "eos_lp": stack(2), "eos_la": stack(3),
                "tokens": tokens, "mask": mask}


class PeakPatchScorer:
    """cos(f_I, f_hat) + Delta s for any caption: the frozen backbone is tapped at (l_p, l_a) on the
    fly (through ``taps``, which several scorers may share)."""

    def __init__(self, backbone, model: PeakPatch, l_p: int, l_a: int, name: str = "PeakPatch",
                 batch_size: int = 256, taps: PeakTaps | None = None, images: ClipScorer | None = None):
        self.backbone, self.model, self.l_p, self.l_a = backbone, model.eval(), l_p, l_a
        self.name, self.batch_size = name, batch_size
        if taps is not None and (taps.backbone is not backbone or (taps.l_p, taps.l_a) != (l_p, l_a)):
            raise ValueError(f"shared taps are of layers ({taps.l_p}, {taps.l_a}) of another backbone or layers; "
                             f"this scorer reads ({l_p}, {l_a})")
        self.taps = taps or PeakTaps(backbone, l_p, l_a, batch_size)
        self._images = images or ClipScorer(backbone, batch_size=batch_size)   # the frozen image tower
        self._text: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    def image_features(self, split, indices) -> torch.Tensor:
        return self._images.image_features(split, indices)

    def text_batch(self, captions: Sequence[str]) -> dict:
        return self.taps.batch(captions)

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


PROTOCOL_TASKS = ("mcq", "retrieval", "retrieval_negated", "confusion_2c", "factor_operator", "valse_existence",
                  "retention")   # what the protocol table reads: the suite of the non-default protocols


def evaluate_methods(scorers: dict, bench: dict, splits: dict, dataset: str, model: str, pretrained: str,
                     ood_tasks: tuple[str, ...] = ("mcq",), retention_reference=None,
                     items: dict | None = None, tasks=None) -> pd.DataFrame:
    """Every scorer on the full ``val`` suite (or only ``tasks``) and, on ``ood``, the tasks in
    ``ood_tasks`` (the papers report VOC for MCQ only): one results frame, ``method`` naming the
    scorer. With ``retention_reference`` (the vanilla scorer) a ``retention`` row adds LCSE's
    Spearman rho. ``items`` (a dict) receives the per-item outcomes, keyed (method, dataset, task, metric)."""
    from .benchmarks import evaluate_benchmarks
    from .evaluate import evaluate_mcq, evaluate_retention, result_row, results_frame, retrieval_scores

    rows, reference_scores = [], {}

    def add(name, split_name, task, metrics, outcomes):
        rows.append(result_row(f"{dataset}/{split_name}", model, pretrained, task, {"method": name, **metrics}))
        if items is not None:
            items.update({(name, f"{dataset}/{split_name}", task, m): v for m, v in outcomes.items()})

    for name, scorer in scorers.items():
        scorer.name = name
        scores = {}
        rows += evaluate_benchmarks(scorer, bench["val"], splits["val"], f"{dataset}/val", model, pretrained,
                                    items=items, tasks=tasks, retrieval=scores)
        if retention_reference is not None and (tasks is None or "retention" in tasks):
            queries = bench["val"].retrieval_affirmative
            if scorer is retention_reference:
                reference_scores.setdefault("affirmative", scores.get("retrieval_affirmative"))
            if reference_scores.get("affirmative") is None:
                reference_scores["affirmative"] = retrieval_scores(retention_reference, queries, splits["val"])
            outcomes = {}
            add(name, "val", "retention", evaluate_retention(scorer, retention_reference, queries, splits["val"],
                                                             items=outcomes, scores=scores.get("retrieval_affirmative"),
                                                             reference_scores=reference_scores["affirmative"]),
                outcomes)
        if "ood" in bench and "mcq" in ood_tasks:
            outcomes = {}
            add(name, "ood", "mcq", evaluate_mcq(scorer, bench["ood"].mcq, splits["ood"], items=outcomes), outcomes)
    return results_frame(rows)


MCQ_COLUMNS = {"positive_accuracy": "Aff", "negative_accuracy": "Neg", "hybrid_accuracy": "Hyb", "accuracy": "Avg"}
VARIANT_NAMES = {"joint": "PeakPatch (joint)", "ecn_only": "ECN only", "scn_only": "SCN only",
                 "no_anchor": "w/o anchor", "detached": "Detached SCN"}


def method_name(variant: str, protocol: str = DEFAULT_PROTOCOL) -> str:
    """A PeakPatch variant's results name (the protocol in brackets unless it is the default)."""
    return with_protocol(VARIANT_NAMES.get(variant, variant), protocol)


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


def joint_peakpatch_scorer(session, layers, progress: bool = True, max_images: int | None = None) -> PeakPatchScorer:
    """Chapter 03's joint PeakPatch (``negbench`` protocol, the profile's measured choices) on this
    session's backbone, trained once from the feature cache (or loaded), as a scorer whose
    ``corrected`` is the ECN text encoder the KTN, LCSE and negation-rate chapters stack on.
    ``max_images`` trains on the first that many training images only (the held-out ones stay)."""
    prof = session.profile
    root = prof.artifacts_dir() / "features"
    data = prepare_negation_data(session.backbone, session.splits["negtrain"], session.data_key, root,
                                 progress=progress)
    if max_images is not None:
        data = data.subset(list(data.train_images[:max_images]) + list(data.held_images))
    features = TextFeatures(extract_text_features(session.backbone, data.captions, layers.l_p, layers.l_a, root,
                                                  session.data_key, progress=progress))
    config = PeakPatchConfig.from_settings(prof.peakpatch, protocol="negbench", **load_design(prof))
    model, _ = ensure_peakpatch(features, data, config, prof.artifacts_dir() / "peakpatch", progress)
    return PeakPatchScorer(session.backbone, model, layers.l_p, layers.l_a, name="PeakPatch (joint)")


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
    frozen = by_protocol.set_index("method").loc["vanilla"]
    rows = by_protocol[by_protocol["method"] == VARIANT_NAMES[variant]].set_index("protocol")
    mean = deltas.groupby(["protocol", "negated", "true"])["delta s"].mean()
    lines = []
    for protocol, r in rows.iterrows():
        curve = history[history["run"] == method_name(variant, protocol)].set_index("epoch")["held-out MCQ accuracy"]
        lines.append(f"{VARIANT_NAMES[variant]} under {protocol}: {r['Neg']:.1f}% of negative-template questions "
                     f"right (frozen {frozen['Neg']:.1f}%); "
                     f"the SCN moves true negated options by {mean[(protocol, True, True)]:+.3f} and true affirmative "
                     f"ones by {mean[(protocol, False, True)]:+.3f}; {r['wrong: positive']:.1f}% of wrong picks are the "
                     f"positive option (frozen {frozen['wrong: positive']:.1f}%); held-out NegMCQ "
                     f"{100 * curve.iloc[0]:.1f}% untrained, best {100 * curve.max():.1f}% at epoch {int(curve.idxmax())}, "
                     f"{100 * curve.iloc[-1]:.1f}% at the last epoch.")
    closest = (rows["Neg"] - paper_neg).abs().idxmin()
    lines.append(f"Closest to the paper's {paper_neg:.1f}% negative-template accuracy: {closest} "
                 f"({rows.loc[closest, 'Neg']:.1f}%).")
    return lines


@torch.no_grad()
def gallery_offsets(scorer: PeakPatchScorer, queries: pd.DataFrame, split, n_queries: int = 200) -> dict:
    """How the SCN's Delta s behaves on a retrieval gallery: its mean absolute value and the share
    of its variance over (query, image) that is a per-image offset (each image's mean over the
    first ``n_queries`` queries). An MCQ loss compares the options of one image, so it cannot see
    such an offset; in retrieval it re-ranks the images for every query."""
    if scorer.model.scn is None:
        raise ValueError("this PeakPatch variant has no SCN")
    corrected, peak = scorer.text_features(queries["query"].iloc[:n_queries].tolist())
    images = scorer.image_features(split, np.arange(len(split)))
    delta = scorer.model.scn.pairwise(corrected, peak, images).double()          # [I, Q]
    return {"mean |delta s|": float(delta.abs().mean()),
            "per-image share of variance": float(delta.mean(dim=1).var(unbiased=False) / delta.var(unbiased=False))}
