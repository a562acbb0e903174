"""Concept proxy vectors e*_c (KTN App. B.2, eq. 19): the L2-normalised mean of four normalised
prompt embeddings. KTN scores with them; chapter 02 measures text coefficients against them."""
from __future__ import annotations

from typing import Callable, Sequence

import torch
import torch.nn.functional as F

from ..core.phrasing import with_article

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


class ConceptBank:
    """Concept embeddings e_c computed once per concept, and image x concept similarities computed
    once per gallery: scoring a query then gathers columns instead of running an encoder.

    ``encode`` maps captions to [N, d] embeddings (the frozen text tower, or PeakPatch's ECN)."""

    def __init__(self, encode: Callable[[Sequence[str]], torch.Tensor], templates: Sequence[str] = KTN_TEMPLATES):
        self.encode, self.templates = encode, tuple(templates)
        self._vectors: dict[str, torch.Tensor] = {}
        self._gallery: torch.Tensor | None = None
        self._columns: dict[str, torch.Tensor] = {}

    def vectors(self, names: Sequence[str]) -> torch.Tensor:
        todo = [n for n in dict.fromkeys(names) if n not in self._vectors]
        if todo:
            for n, v in zip(todo, concept_embeddings(self.encode, todo, self.templates)):
                self._vectors[n] = v
        return torch.stack([self._vectors[n] for n in names]) if names else torch.empty(0)

    def similarities(self, image_features: torch.Tensor, names: Sequence[str]) -> torch.Tensor:
        """[I, len(names)] cosine of each image with each concept; columns are cached for the
        gallery tensor ``image_features`` (held, so its memory cannot be reused by another one)."""
        if image_features is not self._gallery:
            self._gallery, self._columns = image_features, {}
        todo = [n for n in dict.fromkeys(names) if n not in self._columns]
        if todo:
            sims = image_features.float() @ self.vectors(todo).float().T
            for k, n in enumerate(todo):
                self._columns[n] = sims[:, k]
        if not names:
            return torch.empty(len(image_features), 0)
        return torch.stack([self._columns[n] for n in names], dim=1)
