"""Independent work side by side: worker processes with one torch thread each.

On 2 cores, two trainings on one thread each do more work than one training on two threads,
because a small model's matrix products do not split well over threads, for PeakPatch runs on
cached features and for the organism's pretraining steps alike (measured by bench/thread_scaling.py). One
thread per training also makes its numbers independent of the machine: a float sum split over
another number of threads rounds differently, so a run trained on two threads and the same run on
sixteen would drift apart.
"""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

import torch
from tqdm.auto import tqdm

TRAINING_THREADS = 1
WORKERS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """torch's intra-op threads set to ``n`` for the block, restored after it."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


_shared: tuple = ()


def _start_worker(shared: tuple) -> None:
    global _shared
    torch.set_num_threads(TRAINING_THREADS)
    _shared = shared


def _call(function: Callable, job) -> object:
    return function(*_shared, job)


def run_in_workers(function: Callable, shared: tuple, jobs: Sequence, workers: int = WORKERS,
                   desc: str = "runs", progress: bool = True) -> list:
    """``function(*shared, job)`` for every job, at most ``workers`` at a time, each in a worker
    process with one torch thread (``shared`` is handed over once per process); results in job
    order. With one worker or one job it runs here, on the same single thread, so the numbers do
    not depend on ``workers``. ``function`` must be importable (module level). A job's failure is
    raised here once the other jobs have finished, so what they wrote to disk is kept."""
    jobs = list(jobs)
    with tqdm(total=len(jobs), desc=desc, disable=not progress or not jobs) as bar:
        if workers <= 1 or len(jobs) <= 1:
            results = []
            with torch_threads(TRAINING_THREADS):
                for job in jobs:
                    results.append(function(*shared, job))
                    bar.update()
            return results
        results = [None] * len(jobs)
        # fork, as torch's DataLoader workers do, and one thread in the child (what makes a fork after
        # OpenMP safe); spawn would re-run a script without a __main__ guard, and cannot run from stdin
        context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
        with ProcessPoolExecutor(min(workers, len(jobs)), mp_context=context, initializer=_start_worker,
                                 initargs=(shared,)) as pool:
            futures = {pool.submit(_call, function, job): k for k, job in enumerate(jobs)}
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                bar.update()
        return results
