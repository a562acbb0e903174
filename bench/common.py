"""What every bench script ends with: its table written atomically to bench/results/<name>.csv and printed."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from negutils.core.cache import atomic_save

RESULTS = Path(__file__).resolve().parent / "results"


def write_result(frame: pd.DataFrame, name: str, digits: int | None = None) -> Path:
    out = atomic_save(RESULTS / f"{name}.csv", lambda tmp: frame.to_csv(tmp, index=False))
    print((frame.round(digits) if digits is not None else frame).to_string(index=False))
    print(f"written: {out}")
    return out
