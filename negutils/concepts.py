"""Concept proxy vectors e*_c (KTN App. B.2, eq. 19): the L2-normalised mean of four normalised
prompt embeddings. KTN scores with them; chapter 02 measures text coefficients against them."""
from __future__ import annotations

from typing import Callable, Sequence

import torch
import torch.nn.functional as F

from .phrasing import with_article

KTN_TEMPLATES: tuple[str, ...] = ("a photo of {a_c}", "a picture of {a_c}", "an image showing {a_c}",
                                  "{a_c} in a photo")


def concept_embeddings(encode: Callable[[Sequence[str]], torch.Tensor], concepts: Sequence[str],
                       templates: Sequence[str] = KTN_TEMPLATES) -> torch.Tensor:
    """[C, d] unit vectors e_c = normalize(mean_j normalize(f_T(T_j(c))))."""
    if not concepts:
        raise ValueError("concept_embeddings needs at least one concept")
    if any(not str(c).strip() for c in concepts):
        raise ValueError(f"concept_embeddings: empty concept name in {list(concepts)!r}")
    captions = [t.format(a_c=with_article(c), c=c) for c in concepts for t in templates]
    emb = F.normalize(encode(captions).float(), dim=-1).reshape(len(concepts), len(templates), -1)
    return F.normalize(emb.mean(dim=1), dim=-1)
