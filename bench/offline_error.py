"""How long an uncached pretrained tag takes to fail offline, with HF_HUB_OFFLINE=1 and with
the network merely unreachable (one bounded probe). Each case runs in a fresh interpreter with
an empty cache; the time is the load_backbone call alone, imports excluded.

    .venv/bin/python bench/offline_error.py
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import pandas as pd

from common import write_result

CHILD = r"""
import json, sys, time
from negutils.models.backbone import load_backbone
from negutils.models.weights import WeightsUnavailableError
start = time.perf_counter()
try:
    load_backbone("ViT-B-32", "openai", cache_dir=sys.argv[1])
    outcome = "loaded"
except WeightsUnavailableError as err:
    outcome = "WeightsUnavailableError"
print(json.dumps({"seconds": time.perf_counter() - start, "outcome": outcome}))
"""


def measure(offline_env: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "NEGBOOK_OFFLINE")}
    if offline_env:
        env["HF_HUB_OFFLINE"] = "1"
    with tempfile.TemporaryDirectory() as cache:
        proc = subprocess.run([sys.executable, "-c", CHILD, cache], env=env, capture_output=True, text=True,
                              check=True)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"case": "HF_HUB_OFFLINE=1" if offline_env else "no flag, network unreachable", **result}


def main() -> None:
    frame = pd.DataFrame([measure(True), measure(False)])
    write_result(frame, "offline_error")


if __name__ == "__main__":
    main()
