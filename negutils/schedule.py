"""Which chapters the runner may execute at the same time: each chapter's needs (the chapters whose
files it reads), the order in which ready chapters start, and the run's remaining time replayed from
earlier chapter times. Pure functions of chapter names and seconds; ``negutils.run`` executes them."""
from __future__ import annotations

# The chapters whose files each chapter reads (results, trained models, benchmark files): it starts
# once they have finished. 03 reads 02's layers and 01's benchmark files; 04, 05 and 07 read 03's
# PeakPatch and design; 06 tabulates 03-05; 90 reads every chapter's recorded time. A chapter missing
# here needs every chapter before it, so a new chapter runs correctly before anyone lists it.
CHAPTER_NEEDS: dict[str, tuple[str, ...]] = {
    "00_world_and_backbone": (),
    "01_data_construction": ("00_world_and_backbone",),
    "02_representational_collapse": ("00_world_and_backbone",),
    "03_peakpatch": ("01_data_construction", "02_representational_collapse"),
    "04_ktn": ("03_peakpatch",),
    "05_lcse": ("03_peakpatch",),
    "06_benchmark_tables": ("03_peakpatch", "04_ktn", "05_lcse"),
    "07_negation_rate": ("03_peakpatch",),
}
# bench/chapter_concurrency.py: two chapters at a time with every OpenMP thread spinning while it waits
# burn the cores the other chapter needs (more CPU seconds than one at a time, and slower than it),
# so a kernel that may share the cores gets passive waits, unless the caller chose a policy.
SHARED_CORES_ENVIRONMENT = {"OMP_WAIT_POLICY": "PASSIVE"}


def chapter_needs(chapters: list[str]) -> dict[str, set[str]]:
    """{chapter: the chapters of this run it waits for}: ``CHAPTER_NEEDS`` restricted to ``chapters``
    (an ``--only`` run takes the others' files as they are), every earlier one for an unlisted chapter."""
    order = sorted(chapters)
    return {c: set(CHAPTER_NEEDS.get(c, order[:order.index(c)])) & set(chapters) for c in order}


def _ancestors(chapter: str, needs: dict[str, set[str]]) -> set[str]:
    found, stack = set(), list(needs[chapter])
    while stack:
        c = stack.pop()
        if c not in found:
            found.add(c)
            stack += needs[c]
    return found


def chapter_reads(chapter: str, book: list[str]) -> set[str]:
    """The chapters whose shared outputs ``chapter`` may read: itself and every chapter it waits for
    in the whole ``book``, directly or not (the same set in an ``--only`` run and a full one)."""
    return {chapter} | _ancestors(chapter, chapter_needs(sorted({*book, chapter})))


def may_share_cores(needs: dict[str, set[str]], jobs: int) -> set[str]:
    """The chapters that can run while another does: those with a chapter that is neither before
    nor after them in ``needs``. The others (the world's, PeakPatch's) always run alone and keep
    OpenMP's spinning waits."""
    if jobs < 2:
        return set()
    before = {c: _ancestors(c, needs) for c in needs}
    return {c for c in needs if any(o != c and o not in before[c] and c not in before[o] for o in needs)}


def chapters_to_start(waiting: list[str], done: set[str], free: int, needs: dict[str, set[str]],
                      last_times: dict[str, float]) -> list[str]:
    """Up to ``free`` waiting chapters whose needs are done, the longest chain of work still behind
    them first (by ``last_times``; ties and untimed chapters in book order): with two slots after 03,
    chapter 07's pilot starts beside 04 rather than after 04 and 05."""
    def chain(c: str) -> float:
        return last_times.get(c, 0.0) + max((chain(d) for d in needs if c in needs[d]), default=0.0)

    ready = [c for c in sorted(waiting) if needs[c] <= done]
    return sorted(ready, key=lambda c: -chain(c))[:max(free, 0)]


def estimate_seconds(waiting: list[str], running: dict[str, float], last_times: dict[str, float],
                     needs: dict[str, set[str]], jobs: int) -> float:
    """Seconds until the run ends if each chapter takes its ``last_times`` (0 when unknown): the
    runner's own schedule replayed, with ``running`` {chapter: seconds it has run so far}. One job
    at a time this is the sum of the times left."""
    clock, finish = 0.0, {c: max(last_times.get(c, 0.0) - ran, 0.0) for c, ran in running.items()}
    waiting, done = list(waiting), set(needs) - set(waiting) - set(running)
    while waiting or finish:
        for c in chapters_to_start(waiting, done, jobs - len(finish), needs, last_times):
            waiting.remove(c)
            finish[c] = clock + last_times.get(c, 0.0)
        if not finish:
            raise ValueError(f"chapters {waiting} wait for chapters that are not in the run")
        chapter = min(finish, key=finish.get)
        clock = finish.pop(chapter)
        done.add(chapter)
    return clock
