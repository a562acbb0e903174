"""NegBench from any COCO-format split: MCQ-Neg and Retrieval-Neg, in NegBench's CSV schema.

MCQ-Neg (NegBench sec. 3.1). Each question pairs an image with four captions of which exactly
one is true. The correct caption uses one of three templates, with A, B present and N absent:

    positive  "This image features {A} and {B}."     ("... features {A}." with one object)
    negative  "This image does not feature {N}."
    hybrid    "This image features {B}, but not {N}."

and the three wrong options are always

    hybrid    "This image features {N}, but not {B}."   (affirms the absent, denies the present)
    positive  "This image features {N}."                (false affirmation)
    negative  "This image does not feature {A}."        (false negation)

NegBench's evaluation names a wrong pick by the template type of the chosen option; the CSVs
written here record it per option (``caption_k_type``) together with what each option claims
(``caption_k_claims``), so the answer can be checked against the ground truth. One question
per image with its correct template drawn uniformly, as NegBench builds it
(``questions_per_image`` up to 3 asks one question per template instead); the correct position
is balanced over the four positions by a seeded schedule. The negated object N is drawn among the absent categories in
proportion to how often it co-occurs with the image's objects (NegBench asks an LLM for a
plausible absent object; co-occurrence is the data-driven analogue), with add-one smoothing.

Retrieval-Neg (NegBench sec. 3.1): "[caption]. There is no {N}." and "There is no {N} in the
image. [caption]", whose ground truth is every image that contains the caption's objects and
lacks N (the source image among them); beside it the plain affirmative retrieval set.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.cache import atomic_save
from ..core.phrasing import with_article
from ..world.coco import CocoSplit
from .paraphrase import Rephraser, paraphrase

TEMPLATES = ("positive", "negative", "hybrid")
MCQ_COLUMNS = ["image_path", "correct_answer", "caption_0", "caption_1", "caption_2", "caption_3",
               "correct_answer_template"]
# NegBench's published CSVs put the correct answer first and the wrong options in this order
# (its evaluation maps the chosen index to a type: {1: hybrid, 2: positive, 3: negative}).
NEGBENCH_WRONG_ORDER = ("hybrid", "positive", "negative")


class BenchmarkFileError(ValueError):
    """A benchmark file that cannot be read as its schema says; the message names file and field."""


@dataclass(frozen=True)
class MCQConfig:
    seed: int = 0
    questions_per_image: int = 1     # NegBench: one question per image
    paraphrase: bool = True          # False: NegBench's canonical templates only
    max_images: int | None = None


@dataclass(frozen=True)
class Cooccurrence:
    """``counts[a, b]``: images containing both categories (diagonal: images containing one);
    ``position``: each category's row and column."""
    counts: np.ndarray
    position: dict[str, int]


def cooccurrence_counts(split: CocoSplit) -> Cooccurrence:
    """Images containing both categories, for every ordered pair of the split's categories."""
    cats = split.categories
    index = {c: k for k, c in enumerate(cats)}
    presence = np.zeros((len(split), len(cats)), dtype=np.int64)
    for i, objs in enumerate(split.objects):
        presence[i, [index[o] for o in objs]] = 1
    return Cooccurrence(presence.T @ presence, index)


def sample_absent(rng: np.random.Generator, present: list[str], candidates: list[str],
                  cooc: Cooccurrence) -> str:
    """An absent category, weighted by its co-occurrence with the present ones (+1 smoothing).
    (Array indexing: sampling thousands of questions through ``DataFrame.loc`` dominated building
    the negation data.)"""
    missing = [c for c in (*candidates, *present) if c not in cooc.position]
    if missing:
        raise KeyError(f"categories {missing[:3]} are not in the co-occurrence table")
    rows, columns = [cooc.position[c] for c in candidates], [cooc.position[c] for c in present]
    weights = cooc.counts[np.ix_(rows, columns)].sum(axis=1).astype(float) + 1.0
    return candidates[int(rng.choice(len(candidates), p=weights / weights.sum()))]


def _slots(A: str | None = None, B: str | None = None, N: str | None = None) -> dict[str, str]:
    slots = {}
    if A is not None:
        slots["A"] = with_article(A)
    if B is not None:
        slots["B"] = with_article(B)
    if N is not None:
        slots.update(N=with_article(N), n=N)
    return slots


def mcq_options(template: str, A: str, B: str, N: str) -> list[dict]:
    """The correct option followed by the three wrong ones, each as (kind, slots, claims)."""
    single = A == B
    if template == "positive":
        correct = ("positive_single" if single else "positive", _slots(A=A, B=B),
                   {"present": sorted({A, B}), "absent": []})
    elif template == "negative":
        correct = ("negative", _slots(N=N), {"present": [], "absent": [N]})
    elif template == "hybrid":
        correct = ("hybrid", _slots(B=B, N=N), {"present": [B], "absent": [N]})
    else:
        raise ValueError(f"unknown MCQ template {template!r}; NegBench has {TEMPLATES}")
    wrong = [  # NegBench order: hybrid, positive, negative
        ("hybrid", _slots(B=N, N=B), {"present": [N], "absent": [B]}),
        ("positive_single", _slots(A=N), {"present": [N], "absent": []}),
        ("negative", _slots(N=A), {"present": [], "absent": [A]}),
    ]
    return [{"kind": k, "slots": s, "claims": c, "type": template if j == 0 else NEGBENCH_WRONG_ORDER[j - 1]}
            for j, (k, s, c) in enumerate([correct, *wrong])]


def claims_hold(claims: dict, present: frozenset[str] | set[str]) -> bool:
    return all(c in present for c in claims["present"]) and not any(c in present for c in claims["absent"])


def build_mcq(split: CocoSplit, config: MCQConfig = MCQConfig(), rephraser: Rephraser | None = None) -> pd.DataFrame:
    """MCQ-Neg questions for ``split`` in NegBench's CSV schema plus provenance columns."""
    rng = np.random.default_rng([config.seed, 0x4E4547])
    cooc = cooccurrence_counts(split)
    questions = []
    n_images = len(split) if config.max_images is None else min(config.max_images, len(split))
    for i in range(n_images):
        present = sorted(split.objects[i])
        absent = split.absent_categories(i)
        if not present or not absent:
            continue
        allowed = list(TEMPLATES)
        order = rng.permutation(len(allowed))[:min(config.questions_per_image, len(allowed))]
        for t in sorted(order):
            template = allowed[int(t)]
            if len(present) >= 2:
                A, B = (str(x) for x in rng.choice(present, size=2, replace=False))
            else:
                A = B = present[0]
            N = sample_absent(rng, present, absent, cooc)
            options = mcq_options(template, A, B, N)
            for opt in options:
                opt["caption"] = paraphrase(opt["kind"], opt["slots"], rng if config.paraphrase else None, rephraser)
            questions.append({"index": i, "template": template, "A": A, "B": B, "N": N, "options": options})
    positions = np.tile(np.arange(4), -(-len(questions) // 4))[:len(questions)]
    rng.shuffle(positions)
    rows = []
    for q, pos in zip(questions, positions):
        wrong_slots = [p for p in range(4) if p != pos]
        wrong_order = rng.permutation(3)
        placed = [None] * 4
        placed[pos] = q["options"][0]
        for slot, w in zip(wrong_slots, wrong_order):
            placed[slot] = q["options"][1 + int(w)]
        i = q["index"]
        row = {"image_path": split.file_names[i], "correct_answer": int(pos),
               **{f"caption_{k}": placed[k]["caption"] for k in range(4)},
               "correct_answer_template": q["template"], "image_id": split.image_ids[i],
               "positive_objects": json.dumps(sorted(split.objects[i])), "negative_object": q["N"]}
        for k in range(4):
            row[f"caption_{k}_type"] = "correct" if k == pos else placed[k]["type"]
            row[f"caption_{k}_claims"] = json.dumps(placed[k]["claims"], sort_keys=True)
        rows.append(row)
    return pd.DataFrame(rows)


# How a NegBench MCQ file without ``caption_k_type`` columns orders its options: NegBench's benchmark files
# ("published") put the correct answer first and the wrong ones in NEGBENCH_WRONG_ORDER, so the position gives the
# type; its create_mcq.py output ("shuffled", CC12M-NegMCQ) shuffles all four, whose wrong types are then unknown.
MCQ_LAYOUTS = ("published", "shuffled")


def negbench_position_types(frame: pd.DataFrame, source: str | os.PathLike = "") -> pd.DataFrame:
    """Add ``caption_k_type`` to a NegBench MCQ CSV in its published layout (correct first, then hybrid,
    positive, negative), which is how NegBench's own evaluation reads wrong-answer types. A row whose
    correct answer sits elsewhere is an error naming it: the file is not in that layout, and reading
    its options by position would count wrong picks under the wrong types."""
    elsewhere = np.flatnonzero(frame["correct_answer"].to_numpy() != 0)
    if len(elsewhere):
        row = int(elsewhere[0])
        raise BenchmarkFileError(
            f"{source}: row {row} has correct_answer {frame['correct_answer'].iloc[row]} ({len(elsewhere)} of "
            f"{len(frame)} rows have it outside column 0); NegBench's published MCQ layout puts the correct answer in "
            f"column 0 and the {'/'.join(NEGBENCH_WRONG_ORDER)} options after it, which is how the options' types "
            "are read: read a file that shuffles its options with layout='shuffled' (no types)")
    frame = frame.copy()
    frame["caption_0_type"] = "correct"
    for k, kind in enumerate(NEGBENCH_WRONG_ORDER, start=1):
        frame[f"caption_{k}_type"] = kind
    return frame


def write_mcq_csv(frame: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Write atomically; same frame, same bytes."""
    missing = [c for c in MCQ_COLUMNS if c not in frame.columns]
    if missing:
        raise BenchmarkFileError(f"cannot write {path}: the MCQ frame lacks columns {missing}")
    extra = [c for c in frame.columns if c not in MCQ_COLUMNS]
    return atomic_save(path, lambda p: frame[MCQ_COLUMNS + extra].to_csv(p, index=False, lineterminator="\n"))


def read_benchmark_csv(path: Path, columns: list[str], what: str) -> pd.DataFrame:
    """A benchmark CSV read as text (no NA guessing), or ``BenchmarkFileError`` naming the file and
    what is likely wrong: not UTF-8, malformed rows, another separator, missing columns."""
    try:
        frame = pd.read_csv(path, keep_default_na=False)
    except UnicodeDecodeError as err:
        raise BenchmarkFileError(f"{path} is not UTF-8 text ({err.reason} at byte {err.start}); re-encode it, e.g. "
                                 f"iconv -f latin1 -t utf-8") from err
    except pd.errors.EmptyDataError as err:
        raise BenchmarkFileError(f"{path} is empty") from err
    except pd.errors.ParserError as err:
        raise BenchmarkFileError(f"{path} could not be parsed as CSV ({str(err).strip()}); check that fields are "
                                 "separated by commas and quotes are balanced") from err
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        header = ",".join(map(str, frame.columns))
        hint = "; its header looks separated by another character than a comma" if len(frame.columns) == 1 and \
            any(sep in header for sep in (";", "\t", "|")) else ""
        raise BenchmarkFileError(f"{path}: missing column(s) {missing}; a {what} has {columns}{hint}")
    return frame


def read_mcq_csv(path: str | os.PathLike, image_root: str | os.PathLike | None = None,
                 check_images: bool = False, templates: tuple[str, ...] = TEMPLATES,
                 layout: str | None = None) -> pd.DataFrame:
    """Read a NegBench MCQ CSV (ours or the published ones) and validate it; ``templates`` are the
    correct-answer templates it may hold (CC12M-NegMCQ adds ``modified_positive``).

    A file with ``caption_k_type`` columns (ours) keeps them; without, ``layout`` (``MCQ_LAYOUTS``)
    says how its options are ordered: ``"published"`` adds the types NegBench's order gives
    (``negbench_position_types``), ``"shuffled"`` adds none. None: ``"published"`` for the
    benchmark's templates, ``"shuffled"`` for others (CC12M-NegMCQ, create_mcq.py's output).

    ``image_root`` remaps ``image_path``: relative paths are joined to it, and absolute paths from
    another machine are re-rooted on the shortest tail that exists under it. With
    ``check_images`` every image must exist (the error gives the count and the first paths).
    """
    layout = layout or ("published" if set(templates) <= set(TEMPLATES) else "shuffled")
    if layout not in MCQ_LAYOUTS:
        raise ValueError(f"read_mcq_csv: layout must be one of {MCQ_LAYOUTS}, got {layout!r}")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"MCQ CSV {path} does not exist")
    frame = read_benchmark_csv(path, MCQ_COLUMNS, "NegBench MCQ CSV")
    frame = frame.drop(columns=[c for c in frame.columns if c.startswith("Unnamed:")])
    bad_template = ~frame["correct_answer_template"].isin(templates)
    if bad_template.any():
        row = int(np.flatnonzero(bad_template)[0])
        raise BenchmarkFileError(f"{path}: row {row} has correct_answer_template "
                                 f"{frame['correct_answer_template'].iloc[row]!r}; expected one of {templates}")
    answers = pd.to_numeric(frame["correct_answer"], errors="coerce")
    bad_answer = ~answers.isin([0, 1, 2, 3])
    if bad_answer.any():
        row = int(np.flatnonzero(bad_answer)[0])
        raise BenchmarkFileError(f"{path}: row {row} has correct_answer {str(frame['correct_answer'].iloc[row])!r}; "
                                 "expected 0, 1, 2 or 3")
    frame["correct_answer"] = answers.astype(int)
    for k in range(4):
        empty = frame[f"caption_{k}"].astype(str).str.strip() == ""
        if empty.any():
            row = int(np.flatnonzero(empty)[0])
            raise BenchmarkFileError(f"{path}: row {row} has an empty caption in column caption_{k}")
    if "caption_0_type" not in frame.columns and layout == "published":
        frame = negbench_position_types(frame, path)
    if image_root is not None or check_images:
        frame["image_path"] = resolve_image_paths(frame["image_path"].tolist(), image_root or path.parent,
                                                  source=path, check=check_images)
    return frame


def resolve_image_paths(paths: list[str], image_root: str | os.PathLike, source: str | os.PathLike = "",
                        check: bool = True) -> list[str]:
    """Absolute image paths under ``image_root``; missing files are one error listing the first."""
    root = Path(image_root)
    out, missing = [], []
    for row, raw in enumerate(paths):
        if not isinstance(raw, str) or not raw.strip():
            raise BenchmarkFileError(f"{source}: row {row} has an empty image path")
        p = Path(raw)
        candidate = root / p if not p.is_absolute() else p
        if p.is_absolute() and not candidate.exists():
            for k in range(1, len(p.parts)):
                tail = root.joinpath(*p.parts[-k:])
                if tail.exists():
                    candidate = tail
                    break
            else:
                candidate = root / p.name
        if check and not candidate.is_file():          # a folder is no image
            missing.append(str(candidate))
        out.append(str(candidate))
    if missing:
        raise FileNotFoundError(f"{source}: {len(missing)} of {len(paths)} images are missing (or not files) under "
                                f"{root}, e.g. {missing[:3]}")
    return out


# ----------------------------------------------------------------------------- Retrieval-Neg

RETRIEVAL_TEMPLATES = {
    "suffix": "{caption}. There is no {n}.",
    "prefix": "There is no {n} in the image. {caption}.",
}


def _strip_period(caption: str) -> str:
    return caption.strip().rstrip(".").strip()


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


def affirmative_captions(split: CocoSplit) -> list[tuple[int, dict]]:
    """(image index, caption record) of each image's first affirmative caption."""
    out = []
    for i, caps in enumerate(split.captions):
        for cap in caps:
            if not cap.get("negated") and str(cap.get("caption", "")).strip():
                out.append((i, cap))
                break
    return out


def build_retrieval(split: CocoSplit, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(affirmative retrieval set, negated retrieval set). Both have ``query``, ``image_id``
    (the source image) and ``positives`` (JSON list of image ids that satisfy the query)."""
    rng = np.random.default_rng([seed, 0x524554])
    cooc = cooccurrence_counts(split)
    affirmative, negated = [], []
    for i, cap in affirmative_captions(split):
        text = str(cap["caption"])
        affirmative.append({"query": text, "image_id": split.image_ids[i], "image_path": split.file_names[i],
                            "positives": json.dumps([split.image_ids[i]])})
        present = sorted(split.objects[i])
        absent = split.absent_categories(i)
        if not present or not absent:
            continue
        N = sample_absent(rng, present, absent, cooc)
        which = "suffix" if rng.random() < 0.5 else "prefix"
        body = _strip_period(text)
        if which == "prefix":
            body = _lower_first(body)
        query = RETRIEVAL_TEMPLATES[which].format(caption=body, n=N)
        mentioned = cap.get("mentioned")
        if mentioned:  # the world knows which objects the caption names: every satisfying image counts
            need = set(mentioned)
            positives = [split.image_ids[j] for j, objs in enumerate(split.objects) if need <= objs and N not in objs]
        else:          # real captions: NegBench's protocol, the source image only
            positives = [split.image_ids[i]]
        negated.append({"query": query, "image_id": split.image_ids[i], "image_path": split.file_names[i],
                        "negated_object": N, "template": which, "caption": text,
                        "positives": json.dumps(positives)})
    # explicit columns: a split without captions (VOC2007) gives empty sets that still write a header
    return (pd.DataFrame(affirmative, columns=["query", "image_id", "image_path", "positives"]),
            pd.DataFrame(negated, columns=["query", "image_id", "image_path", "negated_object", "template", "caption",
                                           "positives"]))
