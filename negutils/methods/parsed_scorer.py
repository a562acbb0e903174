"""The scorer EC, KTN and LCSE share: a caption is parsed (``parsing``), its text embedding
corrected once per caption, and a per-image edit added to the cosine; captions the parser
refuses are scored holistically and counted. Subclasses override ``_correct`` (the embedding)
and ``_edit`` (the per-image score change)."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..core.logic import literals
from .parsing import CaptionParse, parse_captions


class ParsedTextScorer:
    """What EC, KTN and LCSE share: image features from an image scorer (flip-averaged for KTN),
    text embeddings from ``encode`` (the frozen tower or PeakPatch's ECN), parses cached per caption,
    and a count of captions that fell back to holistic scoring."""

    def __init__(self, image_scorer, encode: Callable[[Sequence[str]], torch.Tensor], name: str,
                 parses: dict[str, CaptionParse | dict] | None = None):
        self.image_scorer, self.encode, self.name = image_scorer, encode, name
        self._parses: dict[str, CaptionParse] = {}
        self._oracle = dict(parses or {})
        self._text: dict[str, torch.Tensor] = {}
        self._corrected: dict[str, torch.Tensor] = {}
        self.fallbacks: set[str] = set()

    def image_features(self, split, indices) -> torch.Tensor:
        return self.image_scorer.image_features(split, indices)

    def parses(self, captions: Sequence[str]) -> list[CaptionParse]:
        todo = [c for c in dict.fromkeys(captions) if c not in self._parses and c not in self._oracle]
        if todo:
            self._parses.update(parse_captions(todo))
        return [self._oracle_parse(c) if c in self._oracle else self._parses[c] for c in captions]

    def _oracle_parse(self, caption: str) -> CaptionParse:
        parse = self._oracle[caption]
        if isinstance(parse, CaptionParse):
            return parse
        concepts = literals(parse)
        return CaptionParse(caption, parse, "", [c["name"] for c in concepts if c["negated"]],
                            [c["name"] for c in concepts if not c["negated"]], caption)

    def text(self, captions: Sequence[str]) -> torch.Tensor:
        todo = [c for c in dict.fromkeys(captions) if c not in self._text]
        if todo:
            for c, f in zip(todo, F.normalize(self.encode(todo).float(), dim=-1)):
                self._text[c] = f
        return torch.stack([self._text[c] for c in captions])

    def corrected(self, captions: Sequence[str]) -> torch.Tensor:
        """The text embedding each caption is scored with: ``_correct`` of f_T(caption) and its
        parse, once per caption; captions the parser refuses keep f_T and are counted."""
        for c, parse in zip(captions, self.parses(captions)):
            if c not in self._corrected:
                if not parse.parsed:
                    self.fallbacks.add(c)
                t = self.text([c])[0]
                self._corrected[c] = self._correct(t, parse) if parse.parsed else t
        return torch.stack([self._corrected[c] for c in captions])

    def _correct(self, t: torch.Tensor, parse: CaptionParse) -> torch.Tensor:
        return t

    def _edit(self, image_features: torch.Tensor, parse: CaptionParse, pool: int) -> np.ndarray | None:
        """What a method adds to the cosine of each image with a parsed caption (None: nothing)."""
        return None

    def score(self, image_features: torch.Tensor, captions: Sequence[str]) -> torch.Tensor:
        return self._score(image_features, list(captions), pool=len(image_features))

    def score_rows(self, image_features: torch.Tensor, captions_per_row: list[list[str]]) -> torch.Tensor:
        """Each image against its own k options (MCQ: N = 4; pairwise: N = 2)."""
        k = len(captions_per_row[0])
        flat = [c for row in captions_per_row for c in row]
        images = image_features.repeat_interleave(k, dim=0)
        return self._score_pairs(images, flat, pool=k).reshape(len(captions_per_row), k)

    def _score(self, image_features, captions, pool) -> torch.Tensor:
        scores = image_features.float() @ self.corrected(captions).T
        for j, parse in enumerate(self.parses(captions)):
            edit = self._edit(image_features, parse, pool) if parse.parsed else None
            if edit is not None:
                scores[:, j] += torch.from_numpy(edit).float()
        return scores

    def _score_pairs(self, images, captions, pool) -> torch.Tensor:
        """Score image j against caption j; an edit is computed once per distinct caption."""
        out = (images.float() * self.corrected(captions)).sum(-1)
        by_caption: dict[str, list[int]] = {}
        for j, c in enumerate(captions):
            by_caption.setdefault(c, []).append(j)
        for c, rows in by_caption.items():
            parse = self.parses([c])[0]
            rows_t = torch.tensor(rows)
            edit = self._edit(images[rows_t], parse, pool) if parse.parsed else None
            if edit is not None:
                out[rows_t] += torch.from_numpy(edit).float()
        return out
