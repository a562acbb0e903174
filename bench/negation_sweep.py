"""Chapter 07's full negation-rate sweep, timed: every rate of the profile's sweep pretrained at the
organism's full budget, measured, and PeakPatch, KTN and LCSE run on it, through the chapter's own
``run_rate`` (so the chapter's `-p full_sweep=True` afterwards only reads the cached runs).

    .venv/bin/python bench/negation_sweep.py [--profile cpu]

Writes bench/results/negation_sweep.csv (one row per rate: pretraining and measurement seconds as
recorded when the run was made, the wall seconds of this invocation's side-by-side pretraining and
of each rate's measurement, the headline measures) and
negation_sweep_verdicts.csv (the chapter's verdict per paper claim). Needs the profile's world and
benchmarks (run chapters 00-03 first). Every rate pretrains at the full budget, so it runs far longer
than the chapter's pilot; how long is in the CSV's wall-seconds columns.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402

from negutils.config import get_profile  # noqa: E402
from negutils.report.performance import SWEEP_PRETRAINING_WALL  # noqa: E402
from negutils.experiments import (organism_session, rate_verdicts, sweep_rates, # noqa: E402
                                  sweep_tables)
from negutils.experiments.negation_rate import pretrain_rates, run_rate

HEADLINES = ("MCQ", "MCQ negative", "polarity AUC", "LCD peak", "LCD interior peak", "retrieval R@5")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="cpu")
    args = parser.parse_args(argv)
    session = organism_session(get_profile(args.profile))
    settings = session.profile.negation_rate
    bench = session.benchmarks(("val",))["val"]
    rates, samples = sweep_rates(session.profile, full_sweep=True)
    runs, walls = [], []
    started = time.perf_counter()
    pretrain_rates(session, rates, samples)             # side by side, as the chapter does
    pretraining_wall = time.perf_counter() - started
    print(f"pretraining every rate: {pretraining_wall / 60:.1f} min", flush=True)
    for rate in rates:
        t = time.perf_counter()
        runs.append(run_rate(session, bench, rate, samples, settings))
        walls.append(time.perf_counter() - t)
        print(f"rate {rate:g}: {walls[-1] / 60:.1f} min; {(time.perf_counter() - started) / 60:.1f} min so far",
              flush=True)
    measures, _, methods = sweep_tables(runs)
    table = measures[["rate", "pretrain s", "measure s", *HEADLINES]].assign(
        samples=samples, **{SWEEP_PRETRAINING_WALL: pretraining_wall,
                            "measure wall s (this run)": walls})
    gains = methods.pivot_table(index="rate", columns="method", values="MCQ gain").add_prefix("MCQ gain ")
    table = table.join(gains, on="rate")
    table.insert(0, "profile", args.profile)
    write_result(table, "negation_sweep", digits=3)
    write_result(rate_verdicts(measures, methods), "negation_sweep_verdicts")
    print(f"{len(rates)} rates at {samples:,} pairs: {(time.perf_counter() - started) / 60:.1f} min wall in this run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
