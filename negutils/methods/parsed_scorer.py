"""The scorer EC, KTN and LCSE share: a caption is parsed (``parsing``), its text embedding
corrected once per caption, and a per-image edit added to the cosine; captions the parser
refuses are scored holistically and counted. Subclasses override ``_correct`` (the embedding),
and ``_edit_plan`` / ``_block_edit`` (the per-image score change, computed for every caption
of one parse shape at once from the gallery's cached image x concept matrix).

A caption's edit depends on the image and on its plan (parse shape and concepts), not on the rest
of the caption, so it is a per-gallery column like the image x concept matrix: an edit that is a
fixed weighted sum of per-image columns (LCSE's "not A": -2 (s_A - mu), linear in the image; KTN's
rejection with C+ empty: a sigmoid of one concept column, the same for every query that negates
that concept) is a ``Fold``, its vector joining the query's text vector; any other plan's edit
(KTN with C+, LCSE's AND) is computed by ``_block_edit`` over the gallery once, the first time a
caption with that plan is scored on it (``PlanColumn``). Scoring a gallery is then one matrix product
in plain PyTorch: the gallery's image features with its K derived columns appended (kept per gallery;
a fold's constant is the weight of a column of ones) against each query's text vector with its
columns' weights appended. The edit costs K more multiply-adds per (image, query) inside the product,
as K more embedding dimensions would, so about (d + K) / d of holistic scoring's time
(``bench/training_free_overhead.py``), and it is one path on every machine."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Hashable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..core.logic import literals
from .parsing import CaptionParse, parse_captions

@dataclass(frozen=True)
class EditPlan:
    """A parsed caption's score edit as data: captions of the same ``shape`` are edited by one
    array expression, reading the image x concept similarities of ``concepts`` (one per slot)."""
    shape: Hashable
    concepts: tuple[str, ...]


@dataclass(frozen=True)
class PlanColumn:
    """The key of a derived column holding a plan's whole edit on the gallery for one candidate pool
    (KTN's w_n = 1/N), computed by the scorer's ``_block_edit`` once per gallery and setting."""
    plan: EditPlan
    pool: int


@dataclass(frozen=True)
class QueryEdit:
    """One caption on one gallery: the text vector it is scored with (a ``Fold``'s vector in it) and
    the (position in the gallery's derived matrix, weight) pairs added to its cosines, the positions
    looked up once per caption and gallery rather than on every call."""
    text: torch.Tensor
    columns: tuple[tuple[int, float], ...]


# images per block of ``_plan_columns``: a block's edit temporaries (about this many values) stay in cache
SCORE_BLOCK_VALUES = 1 << 18


def rows_per_block(columns: int) -> int:
    """How many images a block of ``columns`` values per image holds: ``SCORE_BLOCK_VALUES`` values, at
    least 256 images."""
    return max(256, SCORE_BLOCK_VALUES // max(1, columns))


# the key of the derived column of ones: a ``Fold``'s constant is its weight
ONES = ("ones",)


@dataclass(frozen=True)
class Fold:
    """A score edit ``image . vector + constant + sum_k weight_k * column_k(image)``: the vector joins the
    query's text vector, the constant weighs the column of ones (``ONES``); ``derived`` holds (column key,
    weight) pairs of the scorer's per-gallery ``_derived_column``s."""
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
        self._derived: tuple[torch.Tensor | None, Hashable, dict, torch.Tensor] = (None, (), {}, torch.empty(0))
        self._gallery_queries: tuple[torch.Tensor | None, tuple, dict[str, QueryEdit]] = (None, (), {})
        self._augmented: tuple[torch.Tensor | None, torch.Tensor] = (None, torch.empty(0))
        self._last_call: tuple[torch.Tensor | None, Hashable, torch.Tensor] = (None, (), torch.empty(0))

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

    def _edit_settings(self) -> Hashable:
        """The settings a caption's edit depends on beyond its parse (KTN's w_n, LCSE's calibration):
        a change (``pool_weight_sweep``) works the queries out again."""
        return ()

    def _fold(self, plan: EditPlan, image_features: torch.Tensor, pool: int) -> Fold | None:
        """The plan's edit as a ``Fold`` on this gallery, or None for a ``PlanColumn`` (``_block_edit``, once)."""
        return None

    def _derived_column(self, image_features: torch.Tensor, key) -> torch.Tensor:
        """[I] float32 per-image column ``key`` of a ``Fold`` on this gallery."""
        raise NotImplementedError

    def _derived_matrix(self, image_features: torch.Tensor, keys: Sequence) -> tuple[torch.Tensor, dict]:
        """[I, K] every derived column asked for so far on this gallery, computed once per gallery and
        setting (grown when a new key appears), with the position of each key."""
        gallery, settings, position, matrix = self._derived
        if gallery is not image_features or settings != self._edit_settings():
            gallery, position, matrix = image_features, {}, torch.empty(len(image_features), 0)
            settings = self._edit_settings()
        new = [k for k in dict.fromkeys(keys) if k not in position]
        if new:
            position.update({k: matrix.shape[1] + j for j, k in enumerate(new)})
            planned = self._plan_columns(image_features, [k for k in new if isinstance(k, PlanColumn)])
            columns = [planned[k] if k in planned else torch.ones(len(image_features)) if k == ONES
                       else self._derived_column(image_features, k) for k in new]
            matrix = torch.cat([matrix, torch.stack(columns, dim=1)], dim=1)
        self._derived = (gallery, settings, position, matrix)
        return matrix, position

    def edit_columns(self, image_features: torch.Tensor) -> int:
        """How many derived columns the gallery has so far: each costs one more multiply-add per image and
        query in the product (``bench/training_free_overhead.py`` reports it beside the ratios)."""
        gallery, settings, _, matrix = self._derived
        return matrix.shape[1] if gallery is image_features and settings == self._edit_settings() else 0

    def _plan_columns(self, image_features: torch.Tensor, keys: Sequence[PlanColumn]) -> dict[PlanColumn, torch.Tensor]:
        """[I] float32 edit of each plan over the whole gallery: one ``_block_edit`` per shape and pool,
        applied to the image x concept matrix a block of images at a time (so its temporaries stay in cache)."""
        groups: dict = {}
        for key in keys:
            groups.setdefault((key.plan.shape, key.pool), []).append(key)
        columns = {}
        for (shape, pool), members in groups.items():
            slot_columns = self.bank.columns(image_features, [n for key in members for n in key.plan.concepts])
            block_edit = self._block_edit(shape, torch.from_numpy(slot_columns.reshape(len(members), -1)), pool)
            concepts = torch.from_numpy(self.bank.matrix)            # after this group's columns exist
            edits = torch.empty(len(image_features), len(members))
            rows = rows_per_block(len(members))
            for start in range(0, len(image_features), rows):
                edits[start:start + rows] = block_edit(concepts[start:start + rows])
            columns.update(zip(members, edits.T))
        return columns

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

    def _queries(self, image_features: torch.Tensor, captions: Sequence[str], pool: int) -> list[QueryEdit]:
        """What each caption adds to the gallery's cosines, worked out once per caption and gallery:
        its text vector with any ``Fold``'s vector in it, and the fold's columns, its constant the weight
        of the column of ones (a plan that does not fold is one ``PlanColumn``)."""
        gallery, key, known = self._gallery_queries
        if gallery is not image_features or key != (pool, self._edit_settings()):
            key, known = (pool, self._edit_settings()), {}
            self._gallery_queries = (image_features, key, known)
        todo = [c for c in dict.fromkeys(captions) if c not in known]
        if todo:
            folds = {}
            for caption, text, plan in zip(todo, self.corrected(todo), self._plans(todo)):
                fold = Fold() if plan is None else (self._fold(plan, image_features, pool)
                                                    or Fold(derived=((PlanColumn(plan, pool), 1.0),)))
                derived = fold.derived + (((ONES, fold.constant),) if fold.constant else ())
                folds[caption] = (text if fold.vector is None else text + fold.vector, derived)
            _, position = self._derived_matrix(image_features, [k for _, d in folds.values() for k, _ in d])
            known.update({caption: QueryEdit(vector, tuple((position[k], w) for k, w in derived))
                          for caption, (vector, derived) in folds.items()})
        return [known[c] for c in captions]

    def _score(self, image_features, captions, pool) -> torch.Tensor:
        """The cosines with every ``Fold``'s vector plus each query's weighted derived columns, as one
        product: [I, d + K] the gallery with its derived columns appended against ``_right_hand_side``."""
        gallery, key, text = self._last_call       # kept for the next call with the same captions
        call = (pool, self._edit_settings(), tuple(captions))
        if gallery is not image_features or key != (*call, self.edit_columns(image_features)):
            text = self._right_hand_side(image_features, captions, pool)
            self._last_call = (image_features, (*call, self.edit_columns(image_features)), text)
        width = text.shape[1] - image_features.shape[1]
        images = self._augmented_gallery(image_features) if width else image_features.float()
        return images @ text.T

    def _right_hand_side(self, image_features, captions, pool) -> torch.Tensor:
        """[Q, d + K] the queries' text vectors with their weights on the gallery's K derived columns
        appended; [Q, d] when no query adds a column."""
        queries = self._queries(image_features, captions, pool)
        text = _text_of(queries, image_features.shape[1])
        pairs = [(column, j, weight) for j, q in enumerate(queries) for column, weight in q.columns]
        if not pairs:
            return text
        matrix, _ = self._derived_matrix(image_features, ())     # the columns ``_queries`` asked for
        columns, targets, weights = torch.tensor(pairs, dtype=torch.float64).T
        appended = torch.zeros(len(queries), matrix.shape[1]).index_put_(
            (targets.long(), columns.long()), weights.float(), accumulate=True)
        return torch.cat([text, appended], dim=1)

    def _augmented_gallery(self, image_features: torch.Tensor) -> torch.Tensor:
        """[I, d + K] the gallery's image features with its derived columns appended, kept while the
        derived matrix is the same tensor (a new gallery, setting or column makes a new one)."""
        source, augmented = self._augmented
        matrix, _ = self._derived_matrix(image_features, ())
        if source is not matrix:
            augmented = torch.cat([image_features.float(), matrix], dim=1)
            self._augmented = (matrix, augmented)
        return augmented

    def product_scores(self, image_features, captions) -> torch.Tensor:
        """The cosines with the queries' text vectors alone, no derived columns
        (``bench/training_free_overhead.py`` times it to show what the edits cost)."""
        queries = self._queries(image_features, list(captions), len(image_features))
        return image_features.float() @ _text_of(queries, image_features.shape[1]).T

    def _block_edit(self, shape, slot_columns: torch.Tensor, pool: int) -> Callable[[torch.Tensor], torch.Tensor]:
        """The elementwise edit of G plans of one ``shape``, as a function of one block of images'
        rows [B, V] of the image x concept matrix giving [B, G] float32 edits; ``slot_columns`` [G, S]
        holds the column of each plan's slot. By default ``_edit_values`` in float64; methods
        override it with a faster form of the same expression (chosen once per call, not per block)."""
        def float64_edit(rows: torch.Tensor) -> torch.Tensor:
            slots = [rows.index_select(1, slot_columns[:, k]).double().numpy() for k in range(slot_columns.shape[1])]
            return torch.from_numpy(self._edit_values(shape, slots, pool).astype(np.float32))
        return float64_edit

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


def _text_of(queries: Sequence[QueryEdit], width: int) -> torch.Tensor:
    """[Q, width] the text vectors the queries are scored with ([0, width] for none)."""
    return torch.stack([q.text for q in queries]) if queries else torch.empty(0, width)


def _group_by_shape(plans: Sequence[EditPlan | None]) -> dict:
    """{shape: (positions, plans)} of the captions that have a plan."""
    groups: dict = {}
    for j, plan in enumerate(plans):
        if plan is not None:
            positions, members = groups.setdefault(plan.shape, ([], []))
            positions.append(j)
            members.append(plan)
    return {shape: (np.array(positions), members) for shape, (positions, members) in groups.items()}
