"""The floor under KTN's and LCSE's elementwise edits in eager PyTorch: what one pass over the edited
(image, query) pairs costs, as a multiple of the holistic matrix product it is added to.

An edit that combines two concepts per query (KTN with one affirmed concept, LCSE's "A and not B")
cannot ride in the cosine's matrix product, so computed on every call it needs at least: two gathers
of the query's concept columns from the cached image x concept matrix, one transcendental (KTN's
sigmoid, LCSE's log) and one accumulation into the scores. (The scorers now compute each plan's edit
once per gallery, as a column, so this floor bounds a gallery's first call, not every call.) Each row
here times one such pass alone, in blocks of images, into preallocated buffers (no allocation counted), over the
same 21 edited queries of 64 that ``bench/training_free_overhead.py`` scores. The sum of the
cheapest passes plus that bench's "matrix product x vanilla" column is the least any eager,
unfused implementation can cost; a fused kernel (one loop doing all of it per pair) is what would
go below it.

    .venv/bin/python bench/edit_pass_costs.py [--galleries 10000 100000 500000]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402
from tap_overhead import best_of  # noqa: E402

from negutils.benchmarks.evaluate import rows_per_block, scores_in_blocks  # noqa: E402
from negutils.report.performance import eager_edit_floor, read_bench  # noqa: E402

QUERIES, EDITED, CONCEPTS = 64, 21, 40


def pass_costs(n: int, dim: int) -> list[dict]:
    generator = torch.Generator().manual_seed(0)
    gallery = torch.nn.functional.normalize(torch.randn(n, dim, generator=generator), dim=-1)
    text = torch.nn.functional.normalize(torch.randn(QUERIES, dim, generator=generator), dim=-1)
    bank = (gallery @ torch.randn(dim, CONCEPTS, generator=generator)).mul_(0.1)
    columns = torch.randint(0, CONCEPTS, (EDITED,), generator=generator)
    edited = torch.arange(EDITED) * 3                                   # the edited queries' positions
    scores = gallery @ text.T
    block = rows_per_block(QUERIES)        # the scorer's blocks of images
    buffer = torch.rand(block, EDITED, generator=generator).add_(0.5)

    def blocks(step):
        def run():
            for start in range(0, n, block):
                step(start, min(block, n - start))
        return run

    passes = {
        "gather one column per query": blocks(lambda s, b: torch.index_select(bank[s:s + b], 1, columns,
                                                                              out=buffer[:b])),
        "add in place": blocks(lambda s, b: buffer[:b].add_(buffer[:b])),
        "sigmoid in place": blocks(lambda s, b: buffer[:b].sigmoid_()),
        "log in place": blocks(lambda s, b: buffer[:b].abs_().log_()),
        "accumulate (index_add_)": blocks(lambda s, b: scores[s:s + b].index_add_(1, edited, buffer[:b])),
        "accumulate (scatter_add_)": blocks(lambda s, b: scores[s:s + b].scatter_add_(
            1, edited.expand(b, -1), buffer[:b])),
    }
    # holistic scoring in blocks, as ClipScorer.score ran it when these rows were measured (it is one product now)
    vanilla = best_of(lambda: scores_in_blocks(gallery, text), 5)
    return [{"embed dim": dim, "gallery": n, "queries": QUERIES, "edited queries": EDITED, "pass": name,
             "seconds": (t := best_of(run, 5)), "x vanilla": t / vanilla} for name, run in passes.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--galleries", type=int, nargs="+", default=[10000, 100000, 500000])
    parser.add_argument("--dims", type=int, nargs="+", default=[256, 512])
    args = parser.parse_args()
    frame = pd.DataFrame([row for dim in args.dims for n in args.galleries for row in pass_costs(n, dim)])
    write_result(frame, "edit_pass_costs", digits=4)
    print("the floor beside the measured latency (bench/results/training_free_overhead.csv):")
    print(eager_edit_floor(frame, read_bench("training_free_overhead")).round(3).to_string(index=False))


if __name__ == "__main__":
    main()
