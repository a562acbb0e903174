"""Where the main job's time goes: every notebook's and every code cell's wall seconds from the
last `python -m negutils.run --profile <profile>` (papermill records each cell's duration in the
executed copies under artifacts/<profile>/book_src/chapters/), beside the book's budget.

    .venv/bin/python bench/main_job_profile.py [--profile cpu]

Writes bench/results/main_job_notebooks.csv and main_job_cells.csv. It reads a finished run, so it
costs seconds; the run itself is `make book`.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402

from negutils.config import get_profile  # noqa: E402
from negutils.report.performance import BOOK_BUDGET_SECONDS, main_job_profile  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="cpu")
    args = parser.parse_args(argv)
    chapters = get_profile(args.profile).artifacts_dir() / "book_src" / "chapters"
    executed = sorted(p for p in chapters.glob("*.ipynb") if not p.name.endswith(".input.ipynb"))
    if not executed:
        raise SystemExit(f"no executed notebooks in {chapters}: run `make book` (or negutils.run --profile "
                         f"{args.profile}) first")
    notebooks, cells = main_job_profile(executed)
    notebooks.insert(0, "profile", args.profile)
    notebooks["budget share"] = notebooks["seconds"] / BOOK_BUDGET_SECONDS
    write_result(notebooks, "main_job_notebooks", digits=3)
    write_result(cells.head(40).assign(profile=args.profile), "main_job_cells", digits=3)
    total, span = notebooks["seconds"].sum(), notebooks["ended s"].max()
    print(f"{args.profile}: {total / 60:.1f} min in code cells, the chapters done {span / 60:.1f} min after the first "
          f"started (chapters side by side overlap), against a {BOOK_BUDGET_SECONDS / 60:.0f}-minute budget")
    return 0


if __name__ == "__main__":
    sys.exit(main())
