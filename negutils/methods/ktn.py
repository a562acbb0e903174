"""Know-Thy-Not (KTN sec. 4, App. B) and the Embedding Correction baseline it compares against
(Aggarwal et al., reimplemented per KTN App. C), as scorers for the shared evaluation.

KTN scores a query q with negated concept(s) c- and affirmed concepts C+ along two dimensions:

    s(q, i) = t~ . f_I(i)  -  w_n * p_c-(i)                                         (eq. 11)
    t~      = normalize(f_T(q) - proj_c- f_T(q))                                    (eq. 12)
    p_c-(i) = sigm(kappa (f_I(i).e_c- - tau(i))) - 1/2 sigm(kappa (f_I(i).e_c+ - tau(i)))   (eq. 13)
    tau(i)  = mean_{c in C+} f_I(i).e_c                                             (eq. 14)

with kappa = 50, w_n = 1/N (N: the candidate pool, 4 for MCQ, the gallery for retrieval), e_c the
four-template concept embeddings, and flip-averaged image features. t~ averages two views, the
query and its negation-stripped text, each with c- projected out (App. B.3).

Choices the paper leaves open, made here and printed by the chapter:
* several negated concepts (''neither A nor B''): t~ leaves the span of all of them, and the
  penalty sums p over them;
* C+ empty (''There is no kite.''): eq. 14 is undefined, so tau(i) is the image's mean
  similarity to the profile's category vocabulary, and the second term of eq. 13 (which needs
  e_c+) is dropped;
* with |C+| > 1 the second term averages sigm(kappa (alpha_c(i) - tau(i))) over c in C+; with one
  affirmed concept it is the constant 1/4, as eq. 13 and 14 imply.
A caption with no negated concept, or one the parser leaves unparsed, is scored holistically.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..core.cache import config_hash
from ..core.stats import sigmoid
from ..diagnosis.concepts import ConceptBank
from .parsed_scorer import EditPlan, Fold, ParsedTextScorer
from .parsing import CaptionParse

KAPPA = 50.0
EC_LAMBDA = 1.9
NEUTRAL_TEXT = "a photo."
# "a is a fixed anchor (mean embedding of semantically neutral words)" (PeakPatch App. 0.F)
NEUTRAL_WORDS = ("a photo.", "an image.", "a picture.", "something.", "a thing.")
EC_VARIANTS = ("formula", "direction")


def remove_directions(t: torch.Tensor, directions: torch.Tensor, lam: float = 1.0) -> torch.Tensor:
    """normalize(t - lam * P t), P the orthogonal projector onto the span of ``directions`` [k, d]."""
    q, _ = torch.linalg.qr(directions.double().T)                 # [d, k] orthonormal basis
    t = t.double()
    return F.normalize(t - lam * (t @ q) @ q.T, dim=-1).float()


def rejection_score(alpha: np.ndarray, neg: Sequence[int], pos: Sequence[int], tau_vocab: np.ndarray | None,
                    kappa: float = KAPPA) -> np.ndarray:
    """p_c-(i) of eq. 13-14 for every image: ``alpha`` [I, V] image x concept similarities,
    ``neg`` / ``pos`` column indices of c- and C+, ``tau_vocab`` [I] the reference when C+ is empty."""
    return rejection_penalty([alpha[:, c] for c in neg], [alpha[:, c] for c in pos], tau_vocab, kappa)


def rejection_penalty(negated: Sequence[np.ndarray], affirmed: Sequence[np.ndarray], tau_vocab: np.ndarray | None,
                      kappa: float = KAPPA) -> np.ndarray:
    """eq. 13-14 elementwise over arrays of any one shape (an image column, or images x queries):
    ``negated`` / ``affirmed`` the similarities with each c- and each c in C+, ``tau_vocab`` the
    reference when C+ is empty."""
    tau = np.mean(affirmed, axis=0) if len(affirmed) else tau_vocab
    p = sum(sigmoid(kappa * (a - tau)) for a in negated)
    if len(affirmed):
        p = p - 0.5 * np.mean([sigmoid(kappa * (a - tau)) for a in affirmed], axis=0)
    return p


def _sigmoid_term(alpha: torch.Tensor, tau: torch.Tensor, kappa: float) -> torch.Tensor:
    """sigm(kappa (alpha_c(i) - tau(i))) of eq. 13 in float32, in place on ``alpha`` (a fresh tensor):
    one expression for the elementwise blocks and the folded columns, so both round alike."""
    return alpha.sub_(tau).mul_(kappa).sigmoid_()


class HolisticScorer(ParsedTextScorer):
    """Plain cosine with another text encoder (e.g. PeakPatch's ECN embedding without its SCN)."""

    def __init__(self, image_scorer, encode, name: str = "holistic"):
        super().__init__(image_scorer, encode, name)

    def corrected(self, captions: Sequence[str]) -> torch.Tensor:
        return self.text(captions)          # no parse, so nothing falls back


class EmbeddingCorrectionScorer(ParsedTextScorer):
    """Aggarwal et al.'s embedding correction with lambda = 1.9 (KTN App. C), in two readings:

    * ``formula`` (default), as PeakPatch App. 0.F writes it:
      e* = normalize(e_c - lambda (proj(e_c, e_neg) - a)), the projection of the query e_c onto
      the negated concept(s) e_neg removed (over-subtracted) and the anchor a, the mean embedding
      of semantically neutral words, added back;
    * ``direction``, how KTN App. C words it ("projected out ..., anchored to a neutral text
      embedding"), the book's earlier reading: the direction normalize(e_neg - f_T("a photo."))
      projected out of the query with lambda, and no anchor added back.
    """

    def __init__(self, image_scorer, encode, name: str = "EC", lam: float = EC_LAMBDA, variant: str = "formula",
                 neutral: Sequence[str] = NEUTRAL_WORDS, bank: ConceptBank | None = None):
        super().__init__(image_scorer, encode, name)
        if variant not in EC_VARIANTS:
            raise ValueError(f"unknown Embedding Correction variant {variant!r}; choose one of {EC_VARIANTS}")
        self.lam, self.variant = lam, variant
        self.neutral = [NEUTRAL_TEXT] if variant == "direction" else list(neutral)
        self.bank = bank or ConceptBank(encode)

    def anchor(self) -> torch.Tensor:
        """a: the mean of the neutral texts' unit embeddings."""
        return F.normalize(self.text(self.neutral).float(), dim=-1).mean(0)

    def _correct(self, t: torch.Tensor, parse: CaptionParse) -> torch.Tensor:
        if not parse.negated:
            return t
        if self.variant == "direction":
            anchor = self.text([NEUTRAL_TEXT])[0]
            return remove_directions(t, F.normalize(self.bank.vectors(parse.negated) - anchor, dim=-1), self.lam)
        q, _ = torch.linalg.qr(self.bank.vectors(parse.negated).double().T)     # [d, k] basis of the e_neg
        e = t.double()
        projection = (e @ q) @ q.T
        return F.normalize(e - self.lam * (projection - self.anchor().double()), dim=-1).float()


class KtnScorer(ParsedTextScorer):
    """KTN (eq. 11-14). ``rejection=False`` keeps only Dimension 1 (KTN Table 3's "+ Proj");
    ``pool_weight`` fixes w_n instead of 1/N."""

    def __init__(self, image_scorer, encode, vocabulary: Sequence[str], name: str = "KTN", kappa: float = KAPPA,
                 rejection: bool = True, multiview: bool = True, pool_weight: float | None = None,
                 bank: ConceptBank | None = None, parses: dict | None = None):
        super().__init__(image_scorer, encode, name, parses)
        if not vocabulary:
            raise ValueError("KtnScorer needs a concept vocabulary (the categories) for tau(i) when C+ is empty")
        self.vocabulary = list(vocabulary)
        self.kappa, self.rejection, self.multiview, self.pool_weight = kappa, rejection, multiview, pool_weight
        self.bank = bank or ConceptBank(encode)
        self._vocabulary_key: str | None = None

    def weight(self, pool: int) -> float:
        return self.pool_weight if self.pool_weight is not None else 1.0 / pool

    def corrected(self, captions: Sequence[str]) -> torch.Tensor:
        """As ``ParsedTextScorer.corrected``, with every second view (the negation-stripped text)
        encoded in one batch first rather than one caption at a time."""
        if self.multiview:
            self.text([p.stripped for c, p in zip(captions, self.parses(captions))
                       if c not in self._corrected and p.parsed and self._second_view(p)])
        return super().corrected(captions)

    @staticmethod
    def _second_view(parse: CaptionParse) -> bool:
        return bool(parse.negated and parse.affirmed and parse.stripped.strip() and parse.stripped != parse.caption)

    def _correct(self, t: torch.Tensor, parse: CaptionParse) -> torch.Tensor:
        """t~ (eq. 12): c- projected out of the query and, when there is an affirmed part, out of
        its negation-stripped text too, the two views averaged."""
        if not parse.negated:
            return t
        directions = self.bank.vectors(parse.negated)
        views = [remove_directions(t, directions)]
        if self.multiview and self._second_view(parse):
            views.append(remove_directions(self.text([parse.stripped])[0], directions))
        return F.normalize(torch.stack(views).mean(0), dim=-1)

    def _rejection_plan(self, parse: CaptionParse) -> EditPlan | None:
        """The shape of eq. 13-14 for this parse: (number of c-, number of C+), read from the
        columns of c-, then C+, then (C+ empty) the vocabulary's mean vector, whose column is
        each image's mean concept similarity tau(i)."""
        if not (parse.parsed and parse.negated):
            return None
        affirmed = [n for n in parse.affirmed if n not in parse.negated]
        reference = [] if affirmed else [self._vocabulary_mean()]
        return EditPlan((len(parse.negated), len(affirmed)), tuple(parse.negated + affirmed + reference))

    def _vocabulary_mean(self) -> str:
        if self._vocabulary_key is None:
            self._vocabulary_key = (f"<mean of {len(self.vocabulary)} vocabulary concepts "
                                    f"{config_hash(self.vocabulary)}>")
            self.bank.add_vector(self._vocabulary_key, self.bank.vectors(self.vocabulary).mean(0))
        return self._vocabulary_key

    def _edit_plan(self, parse):
        return self._rejection_plan(parse) if self.rejection else None

    def _rejection(self, shape, slots: list[np.ndarray]) -> np.ndarray:
        n_neg, n_pos = shape
        return rejection_penalty(slots[:n_neg], slots[n_neg:n_neg + n_pos], None if n_pos else slots[-1], self.kappa)

    def _edit_values(self, shape, slots, pool):
        return -self.weight(pool) * self._rejection(shape, slots)

    def _fold(self, plan, image_features, pool):
        """With C+ empty, eq. 13 is a sum of one column per negated concept,
        sigm(kappa (alpha_c(i) - tau(i))), the same for every query that negates c: a ``Fold``."""
        n_neg, n_pos = plan.shape
        if n_pos:
            return None
        return Fold(derived=tuple((("rejection", c, plan.concepts[-1]), -self.weight(pool))
                                  for c in plan.concepts[:n_neg]))

    def _derived_column(self, image_features, key):
        _, concept, reference = key
        columns = self.bank.columns(image_features, [concept, reference])
        alpha = torch.from_numpy(self.bank.matrix[:, columns])
        return _sigmoid_term(alpha[:, 0].clone(), alpha[:, 1], self.kappa)

    def _edit_settings(self):
        return (self.kappa, self.rejection, self.pool_weight)

    def _block_edit(self, shape, slot_columns, pool):
        """eq. 13-14 for a block of images in float32 with in-place torch operations (the float64
        ``_edit_values`` differs by < 1e-6, tested)."""
        n_neg, n_pos = shape
        weight = -self.weight(pool)
        reference = None if n_pos else int(slot_columns[0, -1])    # C+ empty: every caption's reference column

        def edit(rows: torch.Tensor) -> torch.Tensor:
            if n_pos:
                tau = sum(rows.index_select(1, slot_columns[:, n_neg + k]) for k in range(n_pos)) / n_pos
            else:
                tau = rows[:, reference].unsqueeze(1)

            def term(slot: int) -> torch.Tensor:
                return _sigmoid_term(rows.index_select(1, slot_columns[:, slot]), tau, self.kappa)

            penalty = sum(term(k) for k in range(n_neg))
            if n_pos == 1:
                penalty.sub_(0.25)                                  # 1/2 sigm(0): tau(i) is alpha_c+(i)
            elif n_pos:
                penalty.sub_(sum(term(n_neg + k) for k in range(n_pos)), alpha=0.5 / n_pos)
            return penalty.mul_(weight)
        return edit

    def penalty(self, image_features: torch.Tensor, parse: CaptionParse) -> np.ndarray:
        """p_c-(i) for every image of ``image_features`` (zeros when there is nothing to reject)."""
        plan = self._rejection_plan(parse)
        if plan is None:
            return np.zeros(len(image_features))
        columns = self.bank.columns(image_features, plan.concepts)
        return self._rejection(plan.shape, [self.bank.matrix[:, c].astype(np.float64) for c in columns])
