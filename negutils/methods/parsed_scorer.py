"""The scorer EC, KTN and LCSE share: a caption is parsed (``parsing``), its text embedding
corrected once per caption, and a per-image edit added to the cosine; captions the parser
refuses are scored holistically and counted. Subclasses override ``_correct`` (the embedding),
and ``_edit_plan`` / ``_edit_values`` (the per-image score change, computed for every caption
of one parse shape at once from the gallery's cached image x concept matrix).

An edit that is a fixed weighted sum of per-image columns (LCSE's "not A": -2 (s_A - mu), linear in
the image; KTN's rejection with C+ empty: a sigmoid of one concept column, the same for every
query that negates that concept) is a ``Fold``: its columns are appended to the gallery's image
features once per gallery and its weights to the query's text vector, so the cosine's one matrix
product computes it. Only edits that combine several concepts per query (KTN with C+, LCSE's AND)
are computed elementwise."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Hashable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..core.logic import literals
from .parsing import CaptionParse, parse_captions

BLOCK_VALUES = 1 << 18      # image x slot values per block: a few MB, so a block's temporaries stay in cache


@dataclass(frozen=True)
class EditPlan:
    """A parsed caption's score edit as data: captions of the same ``shape`` are edited by one
    array expression, reading the image x concept similarities of ``concepts`` (one per slot)."""
    shape: Hashable
    concepts: tuple[str, ...]


@dataclass(frozen=True)
class Fold:
    """A score edit ``image . vector + constant + sum_k weight_k * column_k(image)``, computed inside
    the cosine's matrix product; ``derived`` holds (column key, weight) pairs of the scorer's
    per-gallery ``_derived_column``s."""
    vector: torch.Tensor | None = None
    constant: float = 0.0
    derived: tuple[tuple[Hashable, float], ...] = ()


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
        self._extended: tuple[torch.Tensor | None, dict, torch.Tensor] = (None, {}, torch.empty(0))

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
        if not captions:
            return torch.empty(0)
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

    def _edit_plan(self, parse: CaptionParse) -> EditPlan | None:
        """How a method edits the scores of a parsed caption: None leaves the cosine alone."""
        return None

    def _fold(self, plan: EditPlan, image_features: torch.Tensor, pool: int) -> Fold | None:
        """The plan's edit as a ``Fold`` on this gallery, or None to compute it elementwise."""
        return None

    def _derived_column(self, image_features: torch.Tensor, key) -> torch.Tensor:
        """[I] float32 per-image column ``key`` of a ``Fold`` on this gallery."""
        raise NotImplementedError

    def _extended_features(self, image_features: torch.Tensor, keys: Sequence) -> tuple[torch.Tensor, dict]:
        """[I, d + 1 + K + zeros] the gallery's features, a column of ones (for constants) and every
        derived column asked for so far, built once per gallery (grown when a new key appears), with
        the position of each key. The width is padded with zero columns to a multiple of 8, the
        width the matrix-multiply kernels block by (``bench/training_free_overhead.py``'s "matrix
        product" column is the cost of the whole product)."""
        gallery, position, extended = self._extended
        if gallery is not image_features:
            gallery, position = image_features, {"ones": image_features.shape[1]}
            extended = torch.cat([image_features.float(), torch.ones(len(image_features), 1)], dim=1)
        new = [k for k in dict.fromkeys(keys) if k not in position]
        if new or extended.shape[1] % 8:
            used = 1 + max(position.values())
            columns = [extended[:, :used]] + [self._derived_column(image_features, k)[:, None] for k in new]
            position.update({k: used + j for j, k in enumerate(new)})
            width = used + len(new)
            columns.append(torch.zeros(len(image_features), -width % 8))
            extended = torch.cat(columns, dim=1)
        self._extended = (gallery, position, extended)
        return extended, position

    def _edit_values(self, shape, slots: list[np.ndarray], pool: int) -> np.ndarray:
        """The score change for every caption of one ``shape`` at once: ``slots[k]`` holds the
        similarity (float64) of each image with the k-th concept of each caption's plan."""
        raise NotImplementedError

    def score(self, image_features: torch.Tensor, captions: Sequence[str]) -> torch.Tensor:
        return self._score(image_features, list(captions), pool=len(image_features))

    def score_rows(self, image_features: torch.Tensor, captions_per_row: list[list[str]]) -> torch.Tensor:
        """Each image against its own k options (MCQ: N = 4; pairwise: N = 2)."""
        k = len(captions_per_row[0])
        flat = [c for row in captions_per_row for c in row]
        images = image_features.repeat_interleave(k, dim=0)
        return self._score_pairs(images, flat, pool=k).reshape(len(captions_per_row), k)

    def _plans(self, captions: Sequence[str]) -> list[EditPlan | None]:
        return [self._edit_plan(p) if p.parsed else None for p in self.parses(captions)]

    def _score(self, image_features, captions, pool) -> torch.Tensor:
        """Holistic cosines with every ``Fold`` inside their matrix product, then one array
        expression per remaining plan shape over the gallery's cached image x concept matrix, in
        blocks of images that stay in cache."""
        scores, groups = self.folded_scores(image_features, captions, pool)
        if not groups:
            return scores
        columns = {shape: self.bank.columns(image_features, [n for plan in plans for n in plan.concepts])
                   .reshape(len(plans), -1) for shape, (_, plans) in groups.items()}
        matrix = torch.from_numpy(self.bank.matrix)
        for shape, (queries, plans) in groups.items():
            slot_columns, queries = torch.from_numpy(columns[shape]), torch.from_numpy(queries)
            block = max(256, BLOCK_VALUES // max(1, slot_columns.numel()))
            for start in range(0, len(scores), block):
                edit = self._edit_block(shape, matrix[start:start + block], slot_columns, pool)
                scores[start:start + block].index_add_(1, queries, edit)
        return scores

    def folded_scores(self, image_features, captions, pool) -> tuple[torch.Tensor, dict]:
        """The first step of ``_score``: the cosines with every ``Fold`` applied (one matrix product),
        and the plans left to edit elementwise, grouped by shape. Timed alone by
        ``bench/training_free_overhead.py`` to show what the elementwise edits cost."""
        text, plans = self.corrected(captions), self._plans(captions)
        folds = [None if plan is None else self._fold(plan, image_features, pool) for plan in plans]
        if any(f is not None for f in folds):
            extended, position = self._extended_features(
                image_features, [key for f in folds if f is not None for key, _ in f.derived])
            weights = torch.zeros(len(captions), extended.shape[1])
            weights[:, :text.shape[1]] = text
            for j, fold in enumerate(folds):
                if fold is not None:
                    if fold.vector is not None:
                        weights[j, :text.shape[1]] += fold.vector
                    weights[j, position["ones"]] = fold.constant
                    for key, weight in fold.derived:
                        weights[j, position[key]] += weight
            scores = extended @ weights.T
        else:
            scores = image_features.float() @ text.T
        return scores, _group_by_shape([plan if fold is None else None for plan, fold in zip(plans, folds)])

    def _edit_block(self, shape, rows: torch.Tensor, slot_columns: torch.Tensor, pool: int) -> torch.Tensor:
        """[B, G] float32 edits of G captions of one ``shape`` on a block of images: ``rows`` is the
        block of the image x concept matrix [B, V], ``slot_columns`` [G, S] the column of each
        caption's slot. By default ``_edit_values`` in float64; methods override it with a faster
        form of the same expression."""
        slots = [rows.index_select(1, slot_columns[:, k]).double().numpy() for k in range(slot_columns.shape[1])]
        return torch.from_numpy(self._edit_values(shape, slots, pool).astype(np.float32))

    def _score_pairs(self, images, captions, pool) -> torch.Tensor:
        """Score image j against caption j; one array expression per plan shape over the pairs."""
        out = (images.float() * self.corrected(captions)).sum(-1)
        groups = _group_by_shape(self._plans(captions))
        if groups:
            names = list(dict.fromkeys(n for _, plans in groups.values() for plan in plans for n in plan.concepts))
            sims = (images.float() @ self.bank.vectors(names).float().T).numpy()
            column = {n: k for k, n in enumerate(names)}
            flat = out.numpy()
            for shape, (pairs, plans) in groups.items():
                slot_columns = np.array([[column[n] for n in plan.concepts] for plan in plans])
                slots = [sims[pairs, slot_columns[:, k]].astype(np.float64) for k in range(slot_columns.shape[1])]
                flat[pairs] += self._edit_values(shape, slots, pool).astype(np.float32)
        return out


def _group_by_shape(plans: Sequence[EditPlan | None]) -> dict:
    """{shape: (positions, plans)} of the captions that have a plan."""
    groups: dict = {}
    for j, plan in enumerate(plans):
        if plan is not None:
            positions, members = groups.setdefault(plan.shape, ([], []))
            positions.append(j)
            members.append(plan)
    return {shape: (np.array(positions), members) for shape, (positions, members) in groups.items()}
