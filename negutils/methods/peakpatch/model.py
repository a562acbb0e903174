"""PeakPatch's two modules on frozen features (PeakPatch sec. 3.3, App. 0.I).

ECN (eq. 4-6): a learned query attends (8 heads, padding masked) over the layer-l_p tokens; the
post-attention LayerNorm'd summary a is concatenated with h^{l_p}_EOS, h^{l_a}_EOS and the mean
of the l_p tokens and mapped by a bottleneck MLP (4w -> 2w -> 2w -> d, GELU, LayerNorm, dropout
0.1) to a deviation delta; f_hat = normalize(f_T + alpha * delta) with alpha = exp(log alpha),
log alpha initialised at -0.7. The paper leaves the MLP's initialisation open; by default its
last layer starts at zero, so f_hat = f_T at step 0 and training starts from the frozen model
rather than from a random rotation of it (``identity_init=False``: PyTorch's default init, under
which cos(f_hat, f_T) starts far below 1; chapter 03 measures both).

SCN (eq. 7-8): a text-context encoder of [f^{l_p}_T; f_hat] and a cross-modal encoder of
f_I * f_hat (each 2 layers to d/4), two cosine features [cos(f^{l_p}_T, f_I); cos(f_hat, f_I)],
and a head (d/2 + 2 -> d/4 -> 1) bounded by alpha_max * tanh, alpha_max = 0.2.

Widths derive from the text width w and the embedding size d, so at CLIP ViT-B/32
(w = d = 512) the ECN has ~4.7M and the SCN ~0.5M parameters, as Table 14 reports.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

LOG_ALPHA_INIT = -0.7
ALPHA_MAX = 0.2


def _mlp_block(n_in: int, n_out: int, dropout: float) -> list[nn.Module]:
    return [nn.Linear(n_in, n_out), nn.GELU(), nn.LayerNorm(n_out), nn.Dropout(dropout)]


class ECN(nn.Module):
    def __init__(self, width: int, embed_dim: int, heads: int = 8, dropout: float = 0.1, use_anchor: bool = True,
                 identity_init: bool = True):
        super().__init__()
        if width % heads:
            raise ValueError(f"ECN: text width {width} is not divisible by {heads} heads")
        self.use_anchor = use_anchor
        self.query = nn.Parameter(torch.randn(width) / math.sqrt(width))
        self.attention = nn.MultiheadAttention(width, heads, batch_first=True)
        self.post_norm = nn.LayerNorm(width)
        n_in = (4 if use_anchor else 3) * width
        self.mlp = nn.Sequential(*_mlp_block(n_in, 2 * width, dropout), *_mlp_block(2 * width, 2 * width, dropout),
                                 nn.Linear(2 * width, embed_dim))
        if identity_init:
            nn.init.zeros_(self.mlp[-1].weight)
            nn.init.zeros_(self.mlp[-1].bias)
        self.log_alpha = nn.Parameter(torch.tensor(LOG_ALPHA_INIT))

    @property
    def alpha(self) -> torch.Tensor:
        return self.log_alpha.exp()

    def attend(self, tokens: torch.Tensor, mask: torch.Tensor, need_weights: bool = False):
        """The learned query's summary of the peak-layer tokens (and per-head weights [B, H, 1, T] on
        request): ``self.attention`` (a torch MultiheadAttention) with one query, computed without
        projecting every token. With a single query, head h's logits are tokens @ (W_k,h^T q_h)
        (the key bias adds a constant that softmax drops), and its output is W_v,h applied to the
        attention-weighted token mean plus b_v,h (the weights sum to 1): the same result for T x H
        instead of T x w multiply-adds per token and output width."""
        mha = self.attention
        heads, width = mha.num_heads, tokens.shape[-1]
        head_dim = width // heads
        w_q, w_k, w_v = mha.in_proj_weight.split(width)
        b_q, _, b_v = mha.in_proj_bias.split(width)
        q = (w_q @ self.query + b_q).view(heads, head_dim)                                 # [H, dh]
        u = torch.einsum("hd,hdw->wh", q, w_k.view(heads, head_dim, width)) / math.sqrt(head_dim)   # [w, H]
        logits = (tokens @ u).transpose(1, 2).masked_fill(~mask[:, None, :], float("-inf"))  # [B, H, T]
        weights = logits.softmax(dim=-1)
        mixed = weights @ tokens                                                              # [B, H, w]
        heads_out = torch.einsum("bhw,hdw->bhd", mixed, w_v.view(heads, head_dim, width)) + b_v.view(heads, head_dim)
        summary = mha.out_proj(heads_out.reshape(tokens.shape[0], width))
        return self.post_norm(summary), (weights[:, :, None, :] if need_weights else None)

    def forward(self, final: torch.Tensor, eos_lp: torch.Tensor, eos_la: torch.Tensor, tokens: torch.Tensor,
                mask: torch.Tensor) -> torch.Tensor:
        a, _ = self.attend(tokens, mask)
        pooled = (tokens * mask[..., None]).sum(dim=1) / mask.sum(dim=1, keepdim=True).clamp(min=1)
        parts = [eos_lp, a, eos_la, pooled] if self.use_anchor else [eos_lp, a, pooled]
        delta = self.mlp(torch.cat(parts, dim=-1))
        return F.normalize(final + self.alpha * delta, dim=-1)


class SCN(nn.Module):
    def __init__(self, embed_dim: int, alpha_max: float = ALPHA_MAX):
        super().__init__()
        hidden, context = embed_dim // 2, embed_dim // 4
        self.alpha_max = alpha_max
        self.text_context = nn.Sequential(nn.Linear(2 * embed_dim, hidden), nn.GELU(), nn.LayerNorm(hidden),
                                          nn.Linear(hidden, context))
        self.cross_context = nn.Sequential(nn.Linear(embed_dim, hidden), nn.GELU(), nn.LayerNorm(hidden),
                                           nn.Linear(hidden, context))
        self.head = nn.Sequential(nn.Linear(2 * context + 2, context), nn.GELU(), nn.Linear(context, 1))

    def forward(self, corrected: torch.Tensor, peak: torch.Tensor, image: torch.Tensor) -> torch.Tensor:
        """Delta s for aligned rows of unit-norm [N, d] corrected text, projected peak-layer text
        and image embeddings; every value lies in [-alpha_max, alpha_max]."""
        cosines = torch.stack([(peak * image).sum(-1), (corrected * image).sum(-1)], dim=-1)
        t = self.text_context(torch.cat([peak, corrected], dim=-1))
        c = self.cross_context(image * corrected)
        return self.alpha_max * torch.tanh(self.head(torch.cat([cosines, t, c], dim=-1))[..., 0])

    def pairwise(self, corrected: torch.Tensor, peak: torch.Tensor, images: torch.Tensor,
                 chunk: int = 16, rows: int = 256) -> torch.Tensor:
        """[I, C] Delta s for every image against every caption; the text context is computed once
        per caption, the cross-modal part per pair in tiles of ``chunk`` captions by ``rows`` images,
        so a tile's [rows, chunk, d] products stay in cache (``bench/scn_pairwise.py`` times it against
        whole columns of images: the same values bit for bit at these sizes on the CPUs measured; a tile of
        a few rows may run another matrix-product kernel, equal to float rounding)."""
        t = self.text_context(torch.cat([peak, corrected], dim=-1))              # [C, ctx]
        out = images.new_empty(len(images), len(corrected))
        for k in range(0, len(corrected), chunk):
            fc, pc, tc = corrected[k:k + chunk], peak[k:k + chunk], t[k:k + chunk]
            for r in range(0, len(images), rows):
                tile = images[r:r + rows]
                cosines = torch.stack([tile @ pc.T, tile @ fc.T], dim=-1)        # [i, c, 2]
                cross = self.cross_context(tile[:, None, :] * fc[None])          # [i, c, ctx]
                features = torch.cat([cosines, tc[None].expand(len(tile), -1, -1), cross], dim=-1)
                out[r:r + rows, k:k + chunk] = self.alpha_max * torch.tanh(self.head(features)[..., 0])
        return out


def parameter_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


VARIANTS = ("joint", "ecn_only", "scn_only", "no_anchor", "detached")


class PeakPatch(nn.Module):
    """ECN and SCN as one module, in one of the Table 5 variants: ``joint``, ``ecn_only``,
    ``scn_only`` (f_hat = f_T), ``no_anchor`` (ECN without h^{l_a}) and ``detached`` (the SCN sees
    f_hat without gradient, so L_SCN cannot shape the ECN)."""

    def __init__(self, width: int, embed_dim: int, variant: str = "joint", dropout: float = 0.1,
                 identity_init: bool = True):
        super().__init__()
        if variant not in VARIANTS:
            raise ValueError(f"unknown PeakPatch variant {variant!r}; expected one of {VARIANTS}")
        self.variant = variant
        self.ecn = None if variant == "scn_only" else ECN(width, embed_dim, dropout=dropout,
                                                          use_anchor=variant != "no_anchor",
                                                          identity_init=identity_init)
        self.scn = None if variant == "ecn_only" else SCN(embed_dim)

    def corrected(self, batch: dict) -> torch.Tensor:
        if self.ecn is None:
            return batch["final"]
        return self.ecn(batch["final"], batch["eos_lp"], batch["eos_la"], batch["tokens"], batch["mask"])

    def scn_view(self, corrected: torch.Tensor) -> torch.Tensor:
        """What the score-level loss may differentiate through: nothing of the ECN when detached."""
        return corrected.detach() if self.variant == "detached" else corrected

    def delta(self, corrected: torch.Tensor, peak: torch.Tensor, image: torch.Tensor) -> torch.Tensor:
        if self.scn is None:
            return torch.zeros(corrected.shape[:-1], device=corrected.device)
        return self.scn(self.scn_view(corrected), peak, image)

    def pairwise_scores(self, batch: dict, images: torch.Tensor) -> torch.Tensor:
        """[I, C] corrected similarity cos(f_I, f_hat) + Delta s (eq. 8)."""
        corrected = self.corrected(batch)
        scores = images @ corrected.T
        if self.scn is not None:
            scores = scores + self.scn.pairwise(corrected, batch["proj_lp"], images)
        return scores
