"""Stage 1, core: cache and atomic writes, result I/O, statistics (metrics, the sigmoid, the bootstrap),
text helpers, oracle logic, offline checks.

No chapter imports from this stage directly, so it exports nothing: import from its modules (``cache``,
``logic``, ``metrics``, ``phrasing``, ``results``, ``stats``, ...)."""

__all__: list[str] = []
