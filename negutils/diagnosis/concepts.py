"""Concept proxy vectors e*_c (KTN App. B.2, eq. 19): the L2-normalised mean of four normalised
prompt embeddings. KTN scores with them; chapter 02 measures text coefficients against them."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
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
    """Concept embeddings e_c computed once per concept, and the image x concept similarity matrix
    computed once per gallery: scoring a batch of queries then gathers columns of that matrix
    instead of running an encoder or a matrix product per query.

    ``encode`` maps captions to [N, d] embeddings (the frozen text tower, or PeakPatch's ECN).
    ``add_vector`` registers a derived column (e.g. the mean of the vocabulary's vectors, whose
    column is each image's mean concept similarity, by linearity)."""

    def __init__(self, encode: Callable[[Sequence[str]], torch.Tensor], templates: Sequence[str] = KTN_TEMPLATES):
        self.encode, self.templates = encode, tuple(templates)
        self._vectors: dict[str, torch.Tensor] = {}
        self._gallery: torch.Tensor | None = None
        self._matrix = np.empty((0, 0), dtype=np.float32)     # [I, capacity]; the first len(_column) are filled
        self._column: dict[str, int] = {}
        self._range = np.empty((2, 0), dtype=np.float32)       # per filled column: min and max over the gallery

    def vectors(self, names: Sequence[str]) -> torch.Tensor:
        todo = [n for n in dict.fromkeys(names) if n not in self._vectors]
        if todo:
            for n, v in zip(todo, concept_embeddings(self.encode, todo, self.templates)):
                self._vectors[n] = v
        return torch.stack([self._vectors[n] for n in names]) if names else torch.empty(0)

    def add_vector(self, name: str, vector: torch.Tensor) -> None:
        """A column that is not a concept prompt; replacing a name's vector invalidates its column."""
        if name in self._vectors and not torch.equal(self._vectors[name], vector):
            self._gallery, self._column = None, {}
        self._vectors[name] = vector.float()

    def columns(self, image_features: torch.Tensor, names: Sequence[str]) -> np.ndarray:
        """The column index of each name in ``matrix`` for the gallery ``image_features``,
        computing the missing columns (once per gallery; the tensor is held, so its memory cannot be
        reused by another gallery)."""
        if image_features is not self._gallery:
            self._gallery, self._column = image_features, {}
            self._matrix = np.empty((len(image_features), 0), dtype=np.float32)
            self._range = np.empty((2, 0), dtype=np.float32)
        todo = [n for n in dict.fromkeys(names) if n not in self._column]
        if todo:
            sims = (image_features.float() @ self.vectors(todo).float().T).numpy()
            filled = len(self._column)
            if filled + len(todo) > self._matrix.shape[1]:       # grow by doubling: warm-up only
                grown = np.empty((len(image_features), max(2 * self._matrix.shape[1], filled + len(todo), 8)),
                                 dtype=np.float32)
                grown[:, :filled] = self._matrix[:, :filled]
                self._matrix = grown
            self._matrix[:, filled:filled + len(todo)] = sims
            self._range = np.concatenate([self._range, np.stack([sims.min(0), sims.max(0)]) if len(sims)
                                          else np.zeros((2, len(todo)), dtype=np.float32)], axis=1)
            self._column.update({n: filled + k for k, n in enumerate(todo)})
        return np.array([self._column[n] for n in names], dtype=np.int64)

    def column_range(self, columns) -> np.ndarray:
        """[2, len(columns)]: the smallest and largest similarity of each column over the gallery."""
        return self._range[:, np.asarray(columns, dtype=np.int64)]

    @property
    def matrix(self) -> np.ndarray:
        """[I, capacity] float32 similarities of the current gallery; index it with ``columns``."""
        return self._matrix

    def similarities(self, image_features: torch.Tensor, names: Sequence[str]) -> torch.Tensor:
        """[I, len(names)] cosine of each image with each concept."""
        if not names:
            return torch.empty(len(image_features), 0)
        columns = self.columns(image_features, names)
        return torch.from_numpy(self._matrix[:, columns])
