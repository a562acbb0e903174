"""Stage 10, experiments: the negation-rate experiment (chapter 07).

The names chapters use, importable from here; everything else from its module."""
from .negation_rate import (organism_session, rate_captions, rate_verdicts, run_rates, sweep_rates, sweep_tables,
                            untrained_measures)

__all__ = ["organism_session", "rate_captions", "rate_verdicts", "run_rates", "sweep_rates", "sweep_tables",
           "untrained_measures"]
