"""Independent jobs side by side: results in job order, one torch thread each, and a failure raised
only after the other jobs have written what they made."""
import time
from pathlib import Path

import pytest
import torch

from negutils.core.workers import run_in_workers


def _write(folder: Path, job: int) -> tuple[int, int]:
    if job == 1:
        raise ValueError("job 1 fails")
    time.sleep(0.2 * (job == 2))                       # finishes after job 1 has failed
    (folder / f"{job}.txt").write_text(str(job))
    return job, torch.get_num_threads()


@pytest.mark.parametrize("workers", [1, 2])
def test_results_come_in_job_order_on_one_thread(tmp_path, workers):
    threads = torch.get_num_threads()
    assert run_in_workers(_write, (tmp_path,), [3, 0, 2], workers, progress=False) == [(3, 1), (0, 1), (2, 1)]
    assert torch.get_num_threads() == threads


def test_a_failed_job_is_raised_after_the_others_have_written_their_files(tmp_path):
    with pytest.raises(ValueError, match="job 1 fails"):
        run_in_workers(_write, (tmp_path,), [0, 1, 2, 3], workers=2, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0.txt", "2.txt", "3.txt"]
