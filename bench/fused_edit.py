"""What a fused kernel buys LCSE's two-concept edit: the eager closed form the scorer ran on every call
(it now computes it once per gallery and plan, ``PlanColumn``)
against the same expression compiled by ``torch.compile`` (one generated loop per pair), as
multiples of holistic scoring, beside the eager floor of ``bench/edit_pass_costs.py``.

The edit is LCSE's "A and not B" on 21 edited queries of 64 (as in ``training_free_overhead.py``),
read from a cached image x concept matrix of 40 concepts, and accumulated into the [images, queries]
score matrix with ``index_add_``. Variants:

* eager, image-major: ``LcseScorer._edit_block``'s float32 closed form, in the scorer's blocks;
* compiled, image-major: the same expression compiled, gathering from the [images, concepts] matrix;
* compiled, concept-major: the matrix stored [concepts, images], so each gathered column is contiguous;
* compiled, cached terms: concept-major, with the per-concept terms e = exp(-z), 1/e, p = 1/(1+e) and
  e p computed once per gallery (they do not depend on the query), leaving one log per pair.

Each row: seconds of the edit plus its accumulation, "x vanilla" over the holistic matrix product
at the same width, the seconds ``torch.compile`` took on first call, and the largest difference from
the eager edit. "LCSE total x vanilla" adds LCSE's measured matrix product x vanilla
(``bench/results/training_free_overhead.csv``) where that bench has the same width and gallery.

    .venv/bin/python bench/fused_edit.py [--galleries 10000 100000 500000] [--dims 256 512]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402
from tap_overhead import best_of  # noqa: E402

from negutils.benchmarks.evaluate import rows_per_block, scores_in_blocks  # noqa: E402
from negutils.report.performance import read_bench  # noqa: E402

QUERIES, EDITED, CONCEPTS = 64, 21, 40
MU, BETA = 0.22, 30.0            # the calibration training_free_overhead.py scores with


def and_not(za: torch.Tensor, zb: torch.Tensor) -> torch.Tensor:
    """beta * LCSE's correction for "A and not B" from z = beta (s - mu), the closed form of
    ``LcseScorer._edit_block`` (harmonic mean of the literals' probabilities), divided by beta."""
    ea, eb = torch.exp(-za), torch.exp(-zb)
    pa, pb = 1.0 / (1.0 + ea), 1.0 / (1.0 + eb)
    return torch.log(2.0 * (ea * pa + eb * pb) / ((ea + 1.0 / eb) * (pa + pb))) / BETA


def image_major(bank: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return and_not((bank[:, a] - MU) * BETA, (bank[:, b] - MU) * BETA)          # [images, edited]


def concept_major(bank_t: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return and_not((bank_t[a] - MU) * BETA, (bank_t[b] - MU) * BETA)            # [edited, images]


def cached_terms(bank_t: torch.Tensor) -> dict[str, torch.Tensor]:
    """The per-concept terms of the closed form, once per gallery: [concepts, images] each."""
    e = torch.exp(-(bank_t - MU) * BETA)
    p = 1.0 / (1.0 + e)
    return {"e": e, "inv_e": 1.0 / e, "p": p, "q": e * p}


def from_terms(e, inv_e, p, q, a, b) -> torch.Tensor:
    return torch.log(2.0 * (q[a] + q[b]) / ((e[a] + inv_e[b]) * (p[a] + p[b]))) / BETA


def variants(n: int, dim: int) -> list[dict]:
    generator = torch.Generator().manual_seed(0)
    gallery = torch.nn.functional.normalize(torch.randn(n, dim, generator=generator), dim=-1)
    text = torch.nn.functional.normalize(torch.randn(QUERIES, dim, generator=generator), dim=-1)
    bank = (gallery @ torch.randn(dim, CONCEPTS, generator=generator)).mul_(0.1).add_(MU)
    bank_t = bank.T.contiguous()
    a = torch.randint(0, CONCEPTS, (EDITED,), generator=generator)
    b = (a + 1 + torch.randint(0, CONCEPTS - 1, (EDITED,), generator=generator)) % CONCEPTS
    edited = torch.arange(EDITED) * 3
    scores = gallery @ text.T
    block = rows_per_block(QUERIES)        # the scorer's blocks of images

    def eager():
        for start in range(0, n, block):
            scores[start:start + block].index_add_(1, edited, image_major(bank[start:start + block], a, b))

    compiled_image = torch.compile(image_major, dynamic=False)
    compiled_concept = torch.compile(concept_major, dynamic=False)
    compiled_terms = torch.compile(from_terms, dynamic=False)
    terms = cached_terms(bank_t)
    runs = {
        "eager, image-major (today)": (eager, lambda: image_major(bank, a, b)),
        "compiled, image-major": (lambda: scores.index_add_(1, edited, compiled_image(bank, a, b)),
                                  lambda: compiled_image(bank, a, b)),
        "compiled, concept-major": (lambda: scores.index_add_(1, edited, compiled_concept(bank_t, a, b).T),
                                    lambda: compiled_concept(bank_t, a, b).T),
        "compiled, cached terms": (lambda: scores.index_add_(1, edited, compiled_terms(**terms, a=a, b=b).T),
                                   lambda: compiled_terms(**terms, a=a, b=b).T),
    }
    reference = image_major(bank, a, b)
    # holistic scoring in blocks, as ClipScorer.score ran it when these rows were measured (it is one product now)
    vanilla = best_of(lambda: scores_in_blocks(gallery, text), 5)
    rows = []
    for name, (run, edit) in runs.items():
        started = time.perf_counter()
        result = edit()                         # the first call compiles
        first = time.perf_counter() - started
        seconds = best_of(run, 5)
        rows.append({"embed dim": dim, "gallery": n, "queries": QUERIES, "edited queries": EDITED, "variant": name,
                     "seconds": seconds, "x vanilla": seconds / vanilla,
                     "first call s": first, "max abs diff": float((result - reference).abs().max())})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--galleries", type=int, nargs="+", default=[10000, 100000, 500000])
    parser.add_argument("--dims", type=int, nargs="+", default=[256, 512])
    args = parser.parse_args()
    frame = pd.DataFrame([row for dim in args.dims for n in args.galleries for row in variants(n, dim)])
    latency = read_bench("training_free_overhead")
    product = latency[latency["method"] == "LCSE"].set_index(["embed dim", "gallery"])["matrix product x vanilla"]
    keys = list(zip(frame["embed dim"], frame["gallery"]))
    frame["LCSE total x vanilla"] = [product.get(k, float("nan")) for k in keys] + frame["x vanilla"]
    write_result(frame, "fused_edit", digits=4)


if __name__ == "__main__":
    main()
