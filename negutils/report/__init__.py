"""Stage 9, report: the papers' numbers, paper tables beside ours, verdicts, the unified table with
bootstrap intervals, performance, and the findings boxes and headline read from the results.

The names chapters use, importable from here; everything else from its module."""
from ..core.results import method_table, write_results
from .paper_tables import (BOOK_TABLES, NEGFULL, ablation_table, agreement_summary, beside_table,
                           best_negfull, differences, has_results, highlight_differences, line_label, load_ours,
                           our_values)
from .findings import (book_headline, chapter_findings, checked_findings, numbers_not_in_results,
                       show_findings)
from .papers import beside_paper, methods_beside_paper, our_numbers, paper_metric, paper_numbers, paper_value
from .performance import BOOK_BUDGET_SECONDS, eager_edit_floor, notebook_times, ratio_summary, read_bench, sweep_summary
from .unified import (bootstrap_ci, format_unified, leaders, read_items, record_evaluation, unified_findings,
                      unified_table, write_items)
from .verdicts import (NOT_MEASURED, NOT_REPRODUCED, PARTLY, REPRODUCED, VERDICTS, Claim, collapse_measures,
                       collapse_verdicts, judge, ktn_measures, ktn_verdicts, lcse_measures, lcse_verdicts,
                       peakpatch_verdicts, result_measures)

__all__ = ["BOOK_BUDGET_SECONDS", "BOOK_TABLES", "Claim", "NEGFULL", "NOT_MEASURED", "NOT_REPRODUCED", "PARTLY",
           "REPRODUCED", "VERDICTS", "judge", "ktn_measures", "lcse_measures", "result_measures", "ablation_table",
           "agreement_summary", "beside_paper", "beside_table", "best_negfull", "book_headline",
           "chapter_findings", "checked_findings", "numbers_not_in_results", "show_findings", "bootstrap_ci",
           "collapse_measures",
           "collapse_verdicts", "differences", "eager_edit_floor", "format_unified", "has_results", "line_label",
           "highlight_differences", "ktn_verdicts", "method_table", "methods_beside_paper", "lcse_verdicts", "leaders",
           "load_ours", "notebook_times", "our_numbers", "our_values", "paper_metric", "paper_numbers", "paper_value",
           "peakpatch_verdicts", "ratio_summary", "read_bench", "read_items", "record_evaluation", "sweep_summary",
           "unified_findings", "unified_table", "write_items", "write_results"]
