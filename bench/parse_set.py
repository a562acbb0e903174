"""The caption parser on the labelled parse set (tests/data/parse_set.tsv), for this checkout's parser
and for the parser of earlier git revisions, loaded from git into the package's namespace so both run
on the same spaCy pipeline in one run. Chapter 04 shows the committed rows beside the live number.

    .venv/bin/python bench/parse_set.py --revisions 934bf9c
"""
from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402

import negutils.methods  # noqa: E402,F401  (the package the old parser's relative imports resolve in)
from negutils.methods.parse_set import (PARSE_SET, parse_set_summary, read_parse_set,  # noqa: E402
                                        score_parses)
from negutils.methods.parsing import parse_captions, parser_key  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def parser_at(revision: str):
    """``parse_captions`` of ``negutils/methods/parsing.py`` as it was at ``revision``."""
    source = subprocess.run(["git", "show", f"{revision}:negutils/methods/parsing.py"], cwd=REPO, check=True,
                            capture_output=True, text=True).stdout
    name = f"negutils.methods._parsing_{revision}"
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader=None))
    module.__package__, module.__file__ = "negutils.methods", str(REPO / "negutils/methods/parsing.py")
    sys.modules[name] = module
    exec(compile(source, f"{revision}:negutils/methods/parsing.py", "exec"), module.__dict__)
    # parse with a fresh memo: the default pipeline, no cache shared with this checkout's parser
    return lambda captions: module.parse_captions(captions, nlp=module.load_pipeline())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--revisions", nargs="*", default=[], help="earlier git revisions to measure too")
    args = parser.parse_args()
    labelled = read_parse_set(PARSE_SET)
    rows = []
    for revision in args.revisions:
        rev = subprocess.run(["git", "rev-parse", "--short", revision], cwd=REPO, check=True, capture_output=True,
                             text=True).stdout.strip()
        rows.append({**parse_set_summary(score_parses(labelled, parser_at(revision)), f"the parser at {rev}"),
                     "parser key": ""})
    # the key of this checkout's parser (its code and spaCy's version): chapter 04 shows its live number instead
    rows.append({**parse_set_summary(score_parses(labelled, parse_captions), "this checkout's parser"),
                 "parser key": parser_key()})
    write_result(pd.DataFrame(rows), "parse_set", digits=3)


if __name__ == "__main__":
    main()
