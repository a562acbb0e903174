"""Layer-wise compositional divergence and visual alignment (PeakPatch sec. 3.2, eq. 2-3).

For a diagnostic set of (image, affirmative caption T+, negated caption T-) triples and every
text layer l, with f^l_T the layer-l EOS state through ``ln_final`` and the text projection:

    D_LCD(l) = mean_i 1 - cos(f^l_T(T+_i), f^l_T(T-_i))       how far apart the two captions are
    A(l)     = mean_i cos(f^l_T(T+_i), f_I(I_i))               how image-like layer l already is

``select_layers`` reads PeakPatch's two layers off these curves (sec. 3.2, "Deterministic layer
selection"); later chapters take their layers from it, never from a constant.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from ..core.results import choice_for, read_results
from ..core.stats import bootstrap_interval


def layer_embeddings(encoder, captions: Sequence[str], batch_size: int = 256) -> torch.Tensor:
    """[L, N, d] unit-norm projected EOS states of every layer, from one tapped pass per batch.
    ``encoder`` is a :class:`~negutils.models.backbone.Backbone` or anything with ``encode_text_layers``."""
    if len(captions) == 0:
        raise ValueError("layer_embeddings needs at least one caption")
    return encoder.encode_text_layers(list(captions), batch_size=batch_size).eos


def divergence_per_item(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    """[L, N] values of 1 - cos(a, b) per layer and item (eq. 2 before the mean)."""
    if a.shape != b.shape or a.ndim != 3:
        raise ValueError(f"expected two [L, N, d] tensors of one shape; got {tuple(a.shape)} and {tuple(b.shape)}")
    return (1.0 - torch.nn.functional.cosine_similarity(a, b, dim=-1)).double().numpy()


def alignment_per_item(text: torch.Tensor, images: torch.Tensor) -> np.ndarray:
    """[L, N] values of cos(f^l_T(T+_i), f_I(I_i)) (eq. 3 before the mean)."""
    if text.ndim != 3 or images.shape != text.shape[1:]:
        raise ValueError(f"expected text [L, N, d] and images [N, d]; got {tuple(text.shape)} "
                         f"and {tuple(images.shape)}")
    return torch.nn.functional.cosine_similarity(text, images[None], dim=-1).double().numpy()


def bootstrap_layer_means(values: np.ndarray, n_boot: int = 1000, level: float = 0.95,
                          seed: int = 0) -> pd.DataFrame:
    """Per-layer mean of ``values`` [L, N] with a percentile bootstrap interval. Items are
    resampled jointly across layers, so the curve's shape and its interval come from one draw."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 2 or values.shape[1] < 2:
        raise ValueError(f"values must be [layers, items] with at least 2 items; got {values.shape}")
    mean, lo, hi = bootstrap_interval(values, n_boot, level, seed)
    return pd.DataFrame({"layer": np.arange(1, values.shape[0] + 1), "mean": mean, "lo": lo, "hi": hi})


@dataclass(frozen=True)
class LayerChoice:
    l_a: int          # anchor: latest pre-peak layer with D_LCD rising, before alignment's ascent
    l_p: int          # compositional peak: argmax D_LCD
    ascent: int       # first layer of alignment's steep ascent (L + 1 when A never rises)
    reason: str


def select_layers(lcd: Sequence[float], alignment: Sequence[float]) -> LayerChoice:
    """PeakPatch's deterministic rule (sec. 3.2), layers numbered 1..L.

    * l_p = argmax_l D_LCD(l) (the earliest layer on ties).
    * Alignment's steep ascent begins at the first layer whose one-layer rise A(l) - A(l-1) is at
      least half the largest one-layer rise; layers before it are "pre-alignment".
    * l_a = the latest layer l < l_p that is pre-alignment and where D_LCD is still rising
      (D(l) < D(l+1)). If none qualifies, l_a = l_p - 1 (or l_p when the peak is layer 1), and the
      reason says so.
    """
    d, a = np.asarray(lcd, dtype=np.float64), np.asarray(alignment, dtype=np.float64)
    if d.ndim != 1 or d.shape != a.shape or len(d) < 2:
        raise ValueError(f"lcd and alignment must be 1-D curves of one length >= 2; got {d.shape} and {a.shape}")
    if not (np.isfinite(d).all() and np.isfinite(a).all()):
        raise ValueError("lcd and alignment curves must be finite")
    n_layers = len(d)
    l_p = int(np.argmax(d)) + 1
    rises = np.diff(a)                                   # rises[k] = A(k+2) - A(k+1)
    if rises.max() <= 0:
        ascent, ascent_text = n_layers + 1, "alignment never rises"
    else:
        ascent = int(np.flatnonzero(rises >= 0.5 * rises.max())[0]) + 2
        ascent_text = (f"alignment's steep ascent starts at layer {ascent} "
                       f"(A rises {rises[ascent - 2]:+.3f}; largest one-layer rise {rises.max():+.3f})")
    shape = ("D_LCD peaks at the final layer: no collapse" if l_p == n_layers
             else f"D_LCD falls {d[l_p - 1] - d[-1]:.3f} from the peak to layer {n_layers}")
    candidates = [layer for layer in range(1, l_p) if layer < ascent and d[layer - 1] < d[layer]]
    if candidates:
        l_a = candidates[-1]
        anchor_text = f"l_a = {l_a}: the latest pre-peak layer with D_LCD rising and before the ascent"
    elif l_p > 1:
        l_a = l_p - 1
        anchor_text = f"l_a = {l_a} = l_p - 1: no pre-peak layer is both rising and before the ascent (fallback)"
    else:
        l_a = l_p
        anchor_text = "l_a = l_p = 1: the peak is the first layer, so there is no pre-peak anchor (fallback)"
    reason = f"l_p = {l_p}: argmax D_LCD = {d[l_p - 1]:.3f}; {shape}; {ascent_text}; {anchor_text}."
    return LayerChoice(l_a=l_a, l_p=l_p, ascent=ascent, reason=reason)


def curve_shape(curve: pd.DataFrame) -> str:
    """'rise-and-fall', 'rising' or 'flat/falling' for a bootstrap curve (``layer, mean, lo, hi``):
    rise-and-fall needs an interior peak whose interval lies above both layer 1's and layer L's."""
    means, lo, hi = curve["mean"].to_numpy(), curve["lo"].to_numpy(), curve["hi"].to_numpy()
    p = int(np.argmax(means))
    rose = lo[p] > hi[0]
    fell = lo[p] > hi[-1]
    if rose and fell and 0 < p < len(means) - 1:
        return "rise-and-fall"
    if rose:
        return "rising"
    return "flat/falling"


def probe_accuracy(affirmative: torch.Tensor, negated: torch.Tensor, test_share: float = 0.2,
                   seed: int = 0) -> np.ndarray:
    """Per-layer held-out accuracy of a logistic-regression probe telling negated from
    affirmative EOS embeddings (PeakPatch App. 0.D). Pairs, not captions, are split into train
    and test, so a caption's counterpart never leaks across."""
    from sklearn.linear_model import LogisticRegression  # scikit-learn loads slowly; only the probe needs it

    if affirmative.shape != negated.shape or affirmative.ndim != 3:
        raise ValueError(f"expected two [L, N, d] tensors of one shape; got {tuple(affirmative.shape)} "
                         f"and {tuple(negated.shape)}")
    n = affirmative.shape[1]
    order = np.random.default_rng(seed).permutation(n)
    n_test = max(1, round(test_share * n))
    test, train = order[:n_test], order[n_test:]
    labels = np.r_[np.zeros(n), np.ones(n)]
    out = []
    for layer in range(affirmative.shape[0]):
        x = torch.cat([affirmative[layer], negated[layer]]).double().numpy()
        rows_train, rows_test = np.r_[train, train + n], np.r_[test, test + n]
        clf = LogisticRegression(max_iter=2000).fit(x[rows_train], labels[rows_train])
        out.append(clf.score(x[rows_test], labels[rows_test]))
    return np.asarray(out)


# condition -> the two diagnostic-set columns whose divergence it measures
CONDITIONS: dict[str, tuple[str, str]] = {
    "negated": ("affirmative", "negated"),        # PeakPatch's D_LCD
    "minimal pair": ("affirmed", "negated"),      # "... with a cup" vs "... without a cup": the cue alone
    "paraphrase": ("affirmative", "paraphrase"),  # sec. 4.4 control: should stay near zero
    "random": ("affirmative", "random"),          # sec. 4.4 control: should rise
}


@dataclass
class LcdAnalysis:
    curves: pd.DataFrame      # condition, quantity (D_LCD | A), layer, mean, lo, hi
    choice: LayerChoice
    probe: pd.DataFrame       # layer, probe accuracy

    def curve(self, condition: str = "negated", quantity: str = "D_LCD") -> pd.DataFrame:
        rows = self.curves[(self.curves["condition"] == condition) & (self.curves["quantity"] == quantity)]
        return rows.reset_index(drop=True)


def lcd_analysis(encoder, diagnostic: pd.DataFrame, image_features: torch.Tensor, n_boot: int = 1000,
                 seed: int = 0, batch_size: int = 256) -> LcdAnalysis:
    """D_LCD per layer for the negated pairs and the two controls, A(l), the layer choice and the
    linear probe, on a diagnostic set from ``build_diagnostic_set`` (``image_features`` [N, d] in
    its row order)."""
    columns = sorted({c for pair in CONDITIONS.values() for c in pair})
    missing = [c for c in columns if c not in diagnostic.columns]
    if missing:
        raise KeyError(f"diagnostic set lacks column(s) {missing}; build it with build_diagnostic_set")
    if len(image_features) != len(diagnostic):
        raise ValueError(f"{len(image_features)} image features for {len(diagnostic)} diagnostic rows")
    emb = {c: layer_embeddings(encoder, diagnostic[c].tolist(), batch_size) for c in columns}
    parts = []
    for condition, (first, second) in CONDITIONS.items():
        curve = bootstrap_layer_means(divergence_per_item(emb[first], emb[second]), n_boot, seed=seed)
        parts.append(curve.assign(condition=condition, quantity="D_LCD"))
    alignment = bootstrap_layer_means(alignment_per_item(emb["affirmative"], image_features.float()), n_boot, seed=seed)
    parts.append(alignment.assign(condition="affirmative", quantity="A"))
    curves = pd.concat(parts, ignore_index=True)[["condition", "quantity", "layer", "mean", "lo", "hi"]]
    choice = select_layers(parts[0]["mean"], alignment["mean"])
    accuracy = probe_accuracy(emb["affirmative"], emb["negated"], seed=seed)
    probe = pd.DataFrame({"layer": np.arange(1, len(accuracy) + 1), "probe accuracy": accuracy})
    return LcdAnalysis(curves, choice, probe)


def peak_with_rising_alignment(d_lcd: pd.DataFrame, alignment: pd.DataFrame) -> bool:
    """PeakPatch's Fig. 2 shape: D_LCD has an interior maximum above both ends ('rise-and-fall')
    while the caption's alignment with its image A(l) rises with depth."""
    return curve_shape(d_lcd) == "rise-and-fall" and curve_shape(alignment) != "flat/falling"


def lcd_by_structure(encoder, diagnostic: pd.DataFrame, image_features: torch.Tensor, n_boot: int = 1000,
                     seed: int = 0, min_rows: int = 30, batch_size: int = 256) -> tuple[pd.DataFrame, pd.DataFrame]:
    """D_LCD (T+ against T-) and A(l) per layer for each grammatical structure of T+ (the
    diagnostic set's ``structure`` column: list, attributes, relation, count, relative clause),
    skipping structures with fewer than ``min_rows`` rows. Returns (curves: structure, quantity,
    layer, mean, lo, hi; summary: one row per structure with its peak layer, both shapes and
    whether PeakPatch's shape appeared)."""
    if "structure" not in diagnostic.columns:
        raise KeyError("diagnostic set lacks the 'structure' column; build it with build_diagnostic_set "
                       "from a split whose captions record their structure")
    if len(image_features) != len(diagnostic):
        raise ValueError(f"{len(image_features)} image features for {len(diagnostic)} diagnostic rows")
    affirmative = layer_embeddings(encoder, diagnostic["affirmative"].tolist(), batch_size)
    negated = layer_embeddings(encoder, diagnostic["negated"].tolist(), batch_size)
    divergence = divergence_per_item(affirmative, negated)
    alignment = alignment_per_item(affirmative, image_features.float())
    curves, summary = [], []
    for structure, rows in diagnostic.groupby("structure", sort=False).indices.items():
        if len(rows) < min_rows:
            continue
        d = bootstrap_layer_means(divergence[:, rows], n_boot, seed=seed)
        a = bootstrap_layer_means(alignment[:, rows], n_boot, seed=seed)
        curves += [d.assign(structure=structure, quantity="D_LCD"), a.assign(structure=structure, quantity="A")]
        summary.append({"structure": structure, "pairs": len(rows), "peak layer": int(d["mean"].idxmax()) + 1,
                        "D_LCD shape": curve_shape(d), "A shape": curve_shape(a),
                        "interior peak with rising A": peak_with_rising_alignment(d, a)})
    if not summary:
        raise ValueError(f"no caption structure has {min_rows} diagnostic rows; "
                         f"counts: {diagnostic['structure'].value_counts().to_dict()}")
    curves = pd.concat(curves, ignore_index=True)[["structure", "quantity", "layer", "mean", "lo", "hi"]]
    return curves, pd.DataFrame(summary)


def load_layer_choice(profile, backbone: str | None = None, pretrained: str | None = None) -> LayerChoice:
    """The (l_a, l_p) chapter 02 selected for ``profile`` (a :class:`~negutils.config.Profile`),
    read from ``results/02_layer_selection.csv``: how later chapters get their layers. With ``backbone``
    and ``pretrained`` (the session's model name and label), a selection made on another backbone is an
    error (``choice_for``)."""

    table = read_results(profile, "02_layer_selection")
    row = choice_for(table, "02_layer_selection", backbone, pretrained).iloc[0]
    return LayerChoice(l_a=int(row["l_a"]), l_p=int(row["l_p"]), ascent=int(row["ascent"]), reason=str(row["reason"]))


def against_untrained(trained: LcdAnalysis, untrained: LcdAnalysis) -> pd.DataFrame:
    """Per layer, D_LCD and probe accuracy of the trained encoder beside the same architecture at
    random initialisation, and the share of the untrained divergence that training *retained*.
    A residual stream averages tokens more with depth, so raw D_LCD can fall with depth before any
    training; ``retained`` isolates what contrastive training removed, layer by layer."""
    a, b = trained.curve("negated"), untrained.curve("negated")
    if len(a) != len(b):
        raise ValueError(f"trained and untrained encoders differ in depth ({len(a)} vs {len(b)} layers)")
    return pd.DataFrame({"layer": a["layer"], "D_LCD trained": a["mean"], "D_LCD untrained": b["mean"],
                         "retained": a["mean"] / b["mean"],
                         "probe trained": trained.probe["probe accuracy"],
                         "probe untrained": untrained.probe["probe accuracy"]})
