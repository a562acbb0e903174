"""Negation training data for the trained methods (NegFull, PeakPatch), as named protocols.

The papers disagree on what the negated training captions *are*:

* NegBench (sec. 2.2 of its summary) verifies with a detector that the negated object is
  **absent**, so its CC12M-NegCap captions are true of their image and train as positives under
  the plain CLIP loss, and its CC12M-NegMCQ questions draw the correct template at random from
  affirmative / negative / hybrid, with three hard-negative options.
* PeakPatch App. 0.J says it follows "NegBench's published generation protocol", but negates
  "one salient visual attribute or object" of the caption, uses the negated captions as hard
  negatives in the InfoNCE loss, and builds MCQs from the correct caption, "the negated version
  plus two randomly sampled captions from other images": every negated caption is then false.

Both readings are built here from the ``negtrain`` split (disjoint from every benchmark image),
deterministic by seed, and a *protocol* picks which parts train which loss:

``negbench`` (the default)
    positives: each image's affirmative caption and its NegCap captions (up to 3: the image's
    affirmative captions extended by the negation of an object the image does **not** contain,
    drawn by co-occurrence as the benchmarks draw N, in several phrasings); MCQ: NegMCQ, one
    question per image with the correct template drawn uniformly and the three wrong options
    built the way NegBench builds its distractors (``negbench.mcq_options``).
``hard-negatives``
    PeakPatch App. 0.J read literally: positives are the affirmative captions; the negation of a
    present-but-unnamed object is an in-batch hard negative (false); the MCQ is the caption
    against its false negation and two false captions of other images.
``mixed``
    ``negbench``'s positives and NegMCQ, plus the present-object negations as hard negatives.

All parts are built for every image once, so every protocol reads one feature cache, and the
held-out images' NegMCQ is the one selection set for all of them (checkpoints, NegFull's alpha,
PeakPatch's layers): it is neither a benchmark nor the shortcut-prone counterpart MCQ.

No training caption, nor any sentence of one, is an instance of a benchmark template (NegBench
MCQ and Retrieval-Neg, COCO-Confusion, FACTOR-Bench, VALSE): ``benchmark_phrasing`` finds one,
and the builder drops or re-phrases such captions, so the benchmarks never test memorised
sentences. In the embedded world the objects of every image are known, so "verified absent" and
"present but unnamed" are exact, with no detector.
"""
from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
import torch

from ..benchmarks.confusion import QUERY_TEMPLATES
from ..benchmarks.factor import COMPOUND_FORMS, FORMS
from ..benchmarks.negbench import (
    RETRIEVAL_TEMPLATES,
    TEMPLATES,
    claims_hold,
    cooccurrence_counts,
    mcq_options,
    sample_absent,
)
from ..benchmarks.paraphrase import PHRASINGS as MCQ_PHRASINGS
from ..benchmarks.valse import EXISTENCE_TEMPLATES
from ..core.metrics import choice_credit
from ..core.phrasing import (
    capitalise,
    has_negation_cue,
    negation_pair,
    plural,
    with_article,
)
from ..models.features import ensure_image_features
from ..world.coco import CocoSplit

# NegCap: an affirmative caption of the image extended by the negation of an absent object.
NEGCAP_PHRASINGS = (
    "{caption}, with no {n} in view.",
    "{caption}; not a single {n} appears.",
    "{caption}, though the scene has no {n}.",
    "{caption}, without any {n} around.",
    "{caption}; {a_n} is not part of the scene.",
)
# NegMCQ's options: the benchmark's four kinds of statement, in phrasings no benchmark uses.
TRAINING_MCQ_PHRASINGS: dict[str, tuple[str, ...]] = {
    "positive": ("The scene includes {A} and {B}.", "You can spot {A} and {B} here.",
                 "In this picture we find {A} and {B}.", "{A} and {B} appear in the frame."),
    "positive_single": ("The scene includes {A}.", "You can spot {A} here.", "In this picture we find {A}.",
                        "{A} appears in the frame."),
    "negative": ("The scene includes no {n}.", "You can't spot {N} here.", "Not a single {n} appears in the frame.",
                 "In this picture we find no {n}."),
    "hybrid": ("The scene includes {B}, with no {n} in view.", "You can spot {B} here, though not {N}.",
               "{B} appears in the frame, without any {n}.", "In this picture we find {B} and no {n}."),
}
PROTOCOL_NAMES = ("negbench", "hard-negatives", "mixed")
DEFAULT_PROTOCOL = "negbench"


def with_protocol(method: str, protocol: str = DEFAULT_PROTOCOL) -> str:
    """A results row's method name: the protocol in brackets unless it is the default, so the
    methods later chapters and the papers' rows refer to keep their plain names."""
    return method if protocol == DEFAULT_PROTOCOL else f"{method} [{protocol}]"


@dataclass(frozen=True)
class Protocol:
    """Which parts of the negation data train which loss."""
    name: str
    negcap_positives: bool     # NegCap captions join the affirmative ones as positives
    hard_negatives: bool       # present-object negations are in-batch hard negatives
    mcq: str                   # "negmcq" or "counterpart" (App. 0.J's caption vs its negation)


PROTOCOLS = {
    "negbench": Protocol("negbench", negcap_positives=True, hard_negatives=False, mcq="negmcq"),
    "hard-negatives": Protocol("hard-negatives", negcap_positives=False, hard_negatives=True, mcq="counterpart"),
    "mixed": Protocol("mixed", negcap_positives=True, hard_negatives=True, mcq="negmcq"),
}


def get_protocol(name: str) -> Protocol:
    if name not in PROTOCOLS:
        raise ValueError(f"unknown negation-data protocol {name!r}; choose one of {list(PROTOCOLS)}")
    return PROTOCOLS[name]


# ----------------------------------------------------------------------------- benchmark phrasings

def _slot_pattern(categories: tuple[str, ...]) -> str:
    """One or more object phrases: an optional article or "no", an optional adjective, a category
    (or its plural), joined by commas, "and", "or", "and no"."""
    names = sorted({c for c in categories} | {plural(c) for c in categories}, key=len, reverse=True)
    noun = r"(?:(?:an?|the|no) )?(?:[a-z'-]+ )?(?:" + "|".join(re.escape(n) for n in names) + ")"
    return rf"{noun}(?:(?:, | and | or | and no | or no |, and |, or ){noun})*"


def _template_regex(template: str, slot: str) -> str:
    """A template with ``{field}`` slots as a regex: object fields match ``slot``, ``{caption}``
    any text."""
    out, last = [], 0
    for m in re.finditer(r"\{(\w+)\}", template):
        out.append(re.escape(template[last:m.start()]))
        out.append(".+" if m.group(1) == "caption" else f"(?:{slot})")
        last = m.end()
    out.append(re.escape(template[last:]))
    return "".join(out)


def _sentences(text: str) -> list[str]:
    return [s.strip().rstrip(".;!?").strip().lower() for s in re.split(r"(?<=[.;!?])\s+", text.strip()) if s.strip()]


def benchmark_templates() -> list[tuple[str, str]]:
    """(benchmark, template) for every sentence frame a benchmark caption or query is built from."""
    out = [(f"NegBench MCQ ({kind})", t) for kind, ts in MCQ_PHRASINGS.items() for t in ts]
    for name, template in RETRIEVAL_TEMPLATES.items():
        out += [(f"Retrieval-Neg ({name})", s) for s in re.split(r"(?<=\.)\s+", template)
                if s.strip(". ") != "{caption}"]
    out += [(f"COCO-Confusion {kind}", t) for kind, t in QUERY_TEMPLATES.items()]
    out += [(f"FACTOR ({form})", t) for form, ts in FORMS.items() for t in ts]
    out += [("FACTOR (compound)", t) for t in COMPOUND_FORMS]
    out += [("VALSE existence", t) for t in EXISTENCE_TEMPLATES]
    return out


@lru_cache(maxsize=8)
def _compiled(categories: tuple[str, ...]) -> list[tuple[str, str, re.Pattern]]:
    slot = _slot_pattern(categories)
    return [(bench, template, re.compile(_template_regex(template.rstrip(". ").lower(), slot)))
            for bench, template in benchmark_templates()]


def benchmark_phrasing(caption: str, categories) -> tuple[str, str] | None:
    """(benchmark, template) when ``caption`` or one of its sentences is an instance of a
    benchmark template over these categories; None when it uses no benchmark phrasing."""
    return _benchmark_phrasing(caption, tuple(categories))


@lru_cache(maxsize=1 << 16)
def _benchmark_phrasing(caption: str, categories: tuple[str, ...]) -> tuple[str, str] | None:
    patterns = _compiled(categories)
    for text in [caption.strip().rstrip(".;!?").lower(), *_sentences(caption)]:
        for bench, template, regex in patterns:
            if regex.fullmatch(text):
                return bench, template
    return None


# ----------------------------------------------------------------------------- building

def mentioned(record: dict, categories) -> set[str]:
    """Categories a caption names: the world's exact ``mentioned`` list, else a word match."""
    if "mentioned" in record:
        return set(record["mentioned"])
    text = " " + " ".join(re.findall(r"[a-z]+", record["caption"].lower())) + " "
    return {c for c in categories if f" {c} " in text or f" {plural(c)} " in text}


def _affirmative_captions(split: CocoSplit, i: int) -> list[tuple[str, set[str]]]:
    """(caption, named objects) of image i's captions that negate nothing and use no benchmark phrasing."""
    out = []
    for record in split.captions[i]:
        text = str(record.get("caption") or "").strip()
        if not text or record.get("negated") or has_negation_cue(text):
            continue
        if benchmark_phrasing(text, split.categories) is None:
            out.append((text, mentioned(record, split.categories)))
    return out


def _draw(rng: np.random.Generator, options):
    return options[int(rng.integers(len(options)))]


def _phrase_safely(rng, phrasings, fields: dict, categories) -> str | None:
    """A phrasing drawn at random, else the next ones in order, whose result uses no benchmark phrasing."""
    start = int(rng.integers(len(phrasings)))
    for k in range(len(phrasings)):
        text = capitalise(phrasings[(start + k) % len(phrasings)].format(**fields))
        if benchmark_phrasing(text, categories) is None:
            return text
    return None


@dataclass
class NegationData:
    """Every part of the negation training data of one split, over one list of distinct captions
    (what the feature cache holds), and the train / held-out split of its images.

    ``affirmative``, ``negcap`` and ``false_negation`` have one row per caption (``image_index``,
    ``caption`` id, the ``object`` negated where there is one); ``negmcq`` and ``counterpart_mcq``
    one row per question with ``option_0..3`` caption ids, the ``correct`` column and, for NegMCQ,
    the correct ``template`` and each option's ``claims``."""
    split: CocoSplit
    captions: list[str]
    affirmative: pd.DataFrame
    negcap: pd.DataFrame
    false_negation: pd.DataFrame
    negmcq: pd.DataFrame
    counterpart_mcq: pd.DataFrame
    train_images: np.ndarray
    held_images: np.ndarray
    images: torch.Tensor | None = None     # [len(split), d] image embeddings, when attached

    def summary(self) -> pd.DataFrame:
        """Rows, images and share of the split's images per part."""
        parts = {"affirmative captions": self.affirmative, "NegCap captions (true)": self.negcap,
                 "present-object negations (false)": self.false_negation, "NegMCQ questions": self.negmcq,
                 "counterpart MCQs (App. 0.J)": self.counterpart_mcq}
        return pd.DataFrame([{"part": k, "rows": len(v), "images": v["image_index"].nunique()}
                             for k, v in parts.items()])

    def mcq_frame(self, which: str = "negmcq") -> pd.DataFrame:
        return self.negmcq if which == "negmcq" else self.counterpart_mcq

    def held_out_mcq(self) -> pd.DataFrame:
        """The selection set: NegMCQ questions of the held-out images."""
        return self.negmcq[self.negmcq["image_index"].isin(set(self.held_images.tolist()))].reset_index(drop=True)

    def subset(self, images) -> "NegationData":
        """The same data restricted to ``images`` (train and held-out alike), captions re-indexed;
        MCQ options may still name captions of other images."""
        keep = set(int(i) for i in images)
        frames = {name: getattr(self, name) for name in
                  ("affirmative", "negcap", "false_negation", "negmcq", "counterpart_mcq")}
        frames = {n: f[f["image_index"].isin(keep)].reset_index(drop=True) for n, f in frames.items()}
        used = sorted({int(c) for n in ("affirmative", "negcap", "false_negation") for c in frames[n]["caption"]} |
                      {int(c) for n in ("negmcq", "counterpart_mcq") for k in range(4)
                       for c in frames[n][f"option_{k}"]})
        new_id = {old: new for new, old in enumerate(used)}
        for n, f in frames.items():
            columns = ["caption"] if "caption" in f else [f"option_{k}" for k in range(4)]
            for c in columns:
                f[c] = f[c].map(new_id).astype(np.int64)
        return NegationData(self.split, [self.captions[c] for c in used], **frames,
                            train_images=np.array([i for i in self.train_images if int(i) in keep], dtype=np.int64),
                            held_images=np.array([i for i in self.held_images if int(i) in keep], dtype=np.int64),
                            images=self.images)


def build_negation_data(split: CocoSplit, seed: int = 0, negcap_per_image: int = 3, held_out: float = 0.1,
                        max_images: int | None = None) -> NegationData:
    """Every protocol's parts for ``split`` (see the module docstring), deterministic by ``seed``; a split
    with released negation data (NegBench's CC12M sets) gives that data (``released_negation_data``)."""
    if split.released is not None:
        return released_negation_data(split, seed, held_out)
    rng = np.random.default_rng([seed, 0x4E5452])
    cats = split.categories
    cooc = cooccurrence_counts(split)
    ids: dict[str, int] = {}

    def cid(text: str) -> int:
        return ids.setdefault(text, len(ids))

    n_images = len(split) if max_images is None else min(max_images, len(split))
    affirmative, negcap, false_negation, negmcq, base_of = [], [], [], [], {}
    for i in range(n_images):
        present = sorted(split.objects[i])
        absent = split.absent_categories(i)
        captions = _affirmative_captions(split, i)
        if not present or not absent or not captions:
            continue
        # the base caption leaves a present object unnamed where one does, so App. 0.J's false
        # counterpart exists wherever the image allows one
        partial = [c for c in captions if set(present) - c[1]]
        base, named = _draw(rng, partial or captions)
        affirmative.append({"image_index": i, "caption": cid(base)})
        base_of[i] = (base, named)
        unnamed = [c for c in present if c not in named]
        if unnamed:
            obj = _draw(rng, unnamed)
            pair = negation_pair(base, obj, rng)
            if pair is not None and benchmark_phrasing(pair[0], cats) is None:
                false_negation.append({"image_index": i, "caption": cid(pair[0]), "object": obj})
        pool = list(absent)
        for _ in range(min(negcap_per_image, len(absent))):
            n = sample_absent(rng, present, pool, cooc)
            pool.remove(n)
            text, _ = _draw(rng, captions)
            fields = dict(caption=text.strip().rstrip("."), n=n, a_n=with_article(n))
            caption = _phrase_safely(rng, NEGCAP_PHRASINGS, fields, cats)
            if caption is not None:
                negcap.append({"image_index": i, "caption": cid(caption), "object": n})
        negmcq.append(_negmcq_question(rng, i, present, absent, cooc, cats, cid))
    if not affirmative:
        raise ValueError(f"split {split.name!r}: no image has an affirmative caption free of benchmark phrasing "
                         "and an absent category, so no negation training data can be built")
    counterpart = _counterpart_questions(rng, split, false_negation, base_of, cid)
    return _assemble(rng, split, ids, sorted(base_of), held_out, affirmative, negcap, false_negation, negmcq,
                     counterpart)


def _assemble(rng, split: CocoSplit, ids: dict[str, int], images: list[int], held_out: float, affirmative: list,
              negcap: list, false_negation: list, negmcq: list, counterpart: list) -> NegationData:
    """The parts as ``NegationData``: caption ids renumbered in order of caption length (so the feature
    cache encodes batches of similar length) and a seeded held-out share of ``images``."""
    captions = sorted(ids, key=lambda text: (len(text), text))
    new_id = {ids[text]: k for k, text in enumerate(captions)}
    for row in [*affirmative, *negcap, *false_negation]:
        row["caption"] = new_id[row["caption"]]
    for row in [*negmcq, *counterpart]:
        row.update({f"option_{k}": new_id[row[f"option_{k}"]] for k in range(4)})
    images = np.array(images, dtype=np.int64)
    held = np.sort(rng.choice(images, max(3, int(round(held_out * len(images)))), replace=False))
    train = np.setdiff1d(images, held)
    frame = lambda rows, cols: pd.DataFrame(rows, columns=cols)  # noqa: E731
    mcq_cols = ["image_index", *[f"option_{k}" for k in range(4)], "correct", "template",
                *[f"claims_{k}" for k in range(4)]]
    return NegationData(split, captions, frame(affirmative, ["image_index", "caption"]),
                        frame(negcap, ["image_index", "caption", "object"]),
                        frame(false_negation, ["image_index", "caption", "object"]),
                        frame(negmcq, mcq_cols), frame(counterpart, mcq_cols[:6]), train, held)


def released_negation_data(split: CocoSplit, seed: int = 0, held_out: float = 0.1) -> NegationData:
    """NegBench's released CC12M-NegCap / NegMCQ (``split.released``) as ``NegationData``: each image's
    affirmative caption, its negated captions as NegCap (true: NegBench's detector verified the absence),
    its released NegMCQ question (the claims of its options are not published: null). The release has
    no present-object negations and no counterpart MCQs, so only the ``negbench`` protocol can train on it."""
    if split.released is None:
        raise ValueError(f"split {split.name!r} carries no released negation data")
    rng = np.random.default_rng([seed, 0x4E5452])
    ids: dict[str, int] = {}

    def cid(text: str) -> int:
        return ids.setdefault(text, len(ids))

    affirmative = [{"image_index": i, "caption": cid(plain[0])} for i in range(len(split))
                   for plain in [[c["caption"] for c in split.captions[i] if not c.get("negated")]] if plain]
    negcap = [{"image_index": int(r.image_index), "caption": cid(r.caption), "object": None}
              for r in split.released["negcap"].itertuples(index=False)]
    negmcq = [{"image_index": int(r.image_index), **{f"option_{k}": cid(getattr(r, f"caption_{k}")) for k in range(4)},
               "correct": int(r.correct), "template": r.template, **{f"claims_{k}": "null" for k in range(4)}}
              for r in split.released["negmcq"].itertuples(index=False)]
    images = sorted({row["image_index"] for row in affirmative})
    if len(images) < 4:
        raise ValueError(f"released negation data {split.released.get('source')}: {len(images)} images with an "
                         "affirmative caption; at least 4 are needed (3 held out for selection)")
    return _assemble(rng, split, ids, images, held_out, affirmative, negcap, [], negmcq, [])


def _negmcq_question(rng, i, present, absent, cooc, categories, cid) -> dict:
    """One NegMCQ question: the correct template uniform over NegBench's three, the wrong options
    NegBench's false templates over the same objects, at a random position."""
    template = _draw(rng, TEMPLATES)
    A, B = (str(x) for x in rng.choice(present, size=2, replace=False)) if len(present) >= 2 else (present[0],) * 2
    N = sample_absent(rng, present, absent, cooc)
    options = mcq_options(template, A, B, N)
    order = rng.permutation(4)
    row = {"image_index": i, "correct": int(np.flatnonzero(order == 0)[0]), "template": template}
    for k, j in enumerate(order):
        option = options[int(j)]
        text = _phrase_safely(rng, TRAINING_MCQ_PHRASINGS[option["kind"]], option["slots"], categories)
        if text is None:   # the phrasings above are disjoint from the benchmarks' by construction
            raise AssertionError(f"every training phrasing of {option['kind']!r} matches a benchmark template")
        row[f"option_{k}"] = cid(text)
        row[f"claims_{k}"] = json.dumps(option["claims"], sort_keys=True)
    return row


def _counterpart_questions(rng, split, false_negation: list[dict], base_of: dict, cid) -> list[dict]:
    """App. 0.J's MCQs: an image's caption (correct), its false negation, and the captions of two
    other images that are false of this one (they name an object it lacks)."""
    bases = sorted(base_of)
    rows = []
    for row in false_negation:
        i = row["image_index"]
        present = split.objects[i]
        others = []
        for j in rng.permutation(len(bases)):
            other = bases[int(j)]
            if other != i and not base_of[other][1] <= present:
                others.append(cid(base_of[other][0]))
            if len(others) == 2:
                break
        if len(others) < 2:
            continue
        options = [cid(base_of[i][0]), row["caption"], *others]
        order = rng.permutation(4)
        rows.append({"image_index": i, **{f"option_{k}": options[int(j)] for k, j in enumerate(order)},
                     "correct": int(np.flatnonzero(order == 0)[0])})
    return rows


def released_frames(data: NegationData) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``data``'s ``negbench`` parts in the rows NegBench's release has (what
    ``negutils.benchmarks.cc12m.write_cc12m_negations`` writes): per image with NegCap captions its
    affirmative caption, negated captions, present and negated objects; per NegMCQ question its four
    options as text, the correct one and its template."""
    text = data.captions
    affirmative = data.affirmative.set_index("image_index")["caption"]
    grouped = data.negcap.groupby("image_index")
    negcap = pd.DataFrame([{"image_index": int(i), "caption": text[int(affirmative[i])],
                            "negative_captions": [text[int(c)] for c in rows["caption"]],
                            "extracted_objects": sorted(data.split.objects[int(i)]),
                            "negative_objects": sorted(rows["object"])} for i, rows in grouped])
    negmcq = pd.DataFrame({"image_index": data.negmcq["image_index"],
                           **{f"caption_{k}": [text[int(c)] for c in data.negmcq[f"option_{k}"]] for k in range(4)},
                           "correct_answer": data.negmcq["correct"],
                           "correct_answer_template": data.negmcq["template"]})
    return negcap, negmcq


def check_truth(data: NegationData) -> dict[str, int]:
    """Counts of captions whose truth contradicts their role under the split's ground truth:
    NegCap captions must be true (negated object absent), present-object negations false, and
    each NegMCQ question must have exactly one true option, the correct one. All zero when sound.
    Released data (NegBench's CC12M sets) publishes no ground truth to check against: its rows are counted
    under a name that says so."""
    if data.split.released is not None:
        return {"released NegCap captions (absence verified by NegBench's detector, not checkable here)":
                len(data.negcap),
                "released NegMCQ questions (option claims unpublished, not checkable here)": len(data.negmcq)}
    objects = data.split.objects
    bad_negcap = sum(r.object in objects[r.image_index] for r in data.negcap.itertuples())
    bad_false = sum(r.object not in objects[r.image_index] for r in data.false_negation.itertuples())
    bad_mcq = 0
    for r in data.negmcq.itertuples():
        truth = [claims_hold(json.loads(getattr(r, f"claims_{k}")), objects[r.image_index]) for k in range(4)]
        bad_mcq += truth != [k == r.correct for k in range(4)]
    return {"NegCap captions false of their image": int(bad_negcap),
            "present-object negations true of their image": int(bad_false),
            "NegMCQ questions without exactly one true option": int(bad_mcq)}


# ----------------------------------------------------------------------------- protocol views

@dataclass
class ProtocolView:
    """One protocol's training data over the images of ``images``: per image the caption ids of
    its positives and hard negatives (ragged, as offsets), and its MCQ (or none)."""
    protocol: Protocol
    images: np.ndarray                 # image indices that can be trained on
    positive_ids: np.ndarray
    positive_offsets: np.ndarray       # positives of images[k]: positive_ids[offsets[k]:offsets[k+1]]
    negative_ids: np.ndarray
    negative_offsets: np.ndarray
    mcq_options: np.ndarray            # [len(images), 4] caption ids, -1 where an image has no MCQ
    mcq_correct: np.ndarray            # [len(images)] correct column, -1 where none

    def batch(self, rows: np.ndarray, rng: np.random.Generator) -> dict:
        """Caption ids of one batch of view rows: one positive per image drawn at random, one hard
        negative per image that has some, and the images' MCQs, as indices into ``unique``."""
        pos = np.array([self._draw(self.positive_ids, self.positive_offsets, r, rng) for r in rows])
        neg = [self._draw(self.negative_ids, self.negative_offsets, r, rng) for r in rows]
        neg = np.array([n for n in neg if n >= 0], dtype=np.int64)
        has_mcq = self.mcq_correct[rows] >= 0
        mcq = self.mcq_options[rows][has_mcq]
        unique, inverse = np.unique(np.concatenate([pos, neg, mcq.ravel()]), return_inverse=True)
        n_pos, n_neg = len(pos), len(neg)
        return {"captions": unique, "positives": inverse[:n_pos], "negatives": inverse[n_pos:n_pos + n_neg],
                "mcq": inverse[n_pos + n_neg:].reshape(-1, 4), "mcq_rows": np.flatnonzero(has_mcq),
                "mcq_correct": self.mcq_correct[rows][has_mcq]}

    @staticmethod
    def _draw(ids, offsets, row, rng) -> int:
        lo, hi = offsets[row], offsets[row + 1]
        return int(ids[lo + int(rng.integers(hi - lo))]) if hi > lo else -1


def protocol_view(data: NegationData, protocol: str | Protocol, images=None) -> ProtocolView:
    """The training view of ``protocol`` over ``images`` (default: the training images)."""
    protocol = get_protocol(protocol) if isinstance(protocol, str) else protocol
    images = np.asarray(data.train_images if images is None else images, dtype=np.int64)
    parts = [data.affirmative] + ([data.negcap] if protocol.negcap_positives else [])
    positives = pd.concat(parts).groupby("image_index")["caption"].apply(list)
    negatives = data.false_negation.groupby("image_index")["caption"].apply(list) if protocol.hard_negatives else {}
    mcq = data.mcq_frame(protocol.mcq).set_index("image_index")
    images = np.array([i for i in images if i in positives.index], dtype=np.int64)

    def ragged(by_image):
        lists = [list(by_image.get(i, [])) for i in images]
        return (np.array([c for image_captions in lists for c in image_captions], dtype=np.int64),
                np.concatenate([[0], np.cumsum([len(image_captions) for image_captions in lists])]).astype(np.int64))

    pos_ids, pos_off = ragged(positives)
    neg_ids, neg_off = ragged(negatives)
    options = np.full((len(images), 4), -1, dtype=np.int64)
    correct = np.full(len(images), -1, dtype=np.int64)
    for k, i in enumerate(images):
        if i in mcq.index:
            q = mcq.loc[i]
            options[k] = [int(q[f"option_{j}"]) for j in range(4)]
            correct[k] = int(q["correct"])
    return ProtocolView(protocol, images, pos_ids, pos_off, neg_ids, neg_off, options, correct)


def prepare_negation_data(backbone, split: CocoSplit, backbone_label: str, feature_root, seed: int = 0,
                          held_out: float = 0.1, progress: bool = True) -> NegationData:
    """``build_negation_data`` with the split's image embeddings attached (cached on disk). The
    data depends on the split and seed only, so a process builds it once per split object for every
    backbone (chapter 07 asks once per negation rate); each call gets its own copy to attach
    embeddings to. The key is the split object itself (kept alive here, so its id is never reused):
    two splits that share a folder may differ in captions, and a recaptioned split must not alias."""
    key = (id(split), seed, held_out)
    if key not in _NEGATION_DATA:
        _NEGATION_DATA[key] = (split, build_negation_data(split, seed=seed, held_out=held_out))
    images = ensure_image_features(backbone, split, backbone_label, feature_root, progress=progress)
    return dataclasses.replace(_NEGATION_DATA[key][1], images=images)


_NEGATION_DATA: dict[tuple, tuple[CocoSplit, NegationData]] = {}


# ----------------------------------------------------------------------------- the two losses both methods share

def contrastive_loss(images: torch.Tensor, texts: torch.Tensor, scale: float | torch.Tensor) -> torch.Tensor:
    """Symmetric InfoNCE for B unit-norm images against their B positive captions, which come
    first in ``texts``; any further rows of ``texts`` are hard negatives, in the image -> text
    denominator only (PeakPatch sec. 3.4: the sum runs over every caption of the batch)."""
    n = len(images)
    logits = scale * images @ texts.T                                           # [B, B + H]
    targets = torch.arange(n, device=images.device)
    return (torch.nn.functional.cross_entropy(logits, targets)
            + torch.nn.functional.cross_entropy(logits[:, :n].T, targets)) / 2


def mcq_loss(scores: torch.Tensor, correct, scale: float | torch.Tensor) -> torch.Tensor:
    """K-way cross-entropy of [Q, K] option scores (NegBench eq. 1, PeakPatch's SCN objective)."""
    target = torch.as_tensor(np.asarray(correct), dtype=torch.long, device=scores.device)
    return torch.nn.functional.cross_entropy(scale * scores, target)


def mcq_accuracy(scores, correct) -> float:
    """Mean credit of the correct options, a tie between k options earning 1/k and a NaN an error
    (NegBench's published files keep the answer in column 0, so argmax would reward both)."""
    scores = scores.detach().cpu().numpy() if isinstance(scores, torch.Tensor) else np.asarray(scores)
    return float(choice_credit(scores, correct).mean()) if len(scores) else float("nan")


def examples(data: NegationData, image: int | None = None) -> pd.DataFrame:
    """Every training caption of one image (default: the first with a present-object negation),
    with its part, its truth and, for MCQ options, whether it is the answer: what each protocol sees."""
    if image is None:
        image = int(data.false_negation["image_index"].iloc[0]) if len(data.false_negation) else \
            int(data.affirmative["image_index"].iloc[0])
    rows = []
    for part, frame, true in (("affirmative", data.affirmative, True), ("NegCap", data.negcap, True),
                              ("present-object negation", data.false_negation, False)):
        rows += [{"part": part, "caption": data.captions[c], "true of the image": true}
                 for c in frame.loc[frame["image_index"] == image, "caption"]]
    for part, frame in (("NegMCQ option", data.negmcq), ("counterpart MCQ option", data.counterpart_mcq)):
        for q in frame[frame["image_index"] == image].itertuples():
            rows += [{"part": part + (" (answer)" if k == q.correct else ""),
                      "caption": data.captions[getattr(q, f"option_{k}")],
                      "true of the image": k == q.correct} for k in range(4)]
    return pd.DataFrame(rows)
