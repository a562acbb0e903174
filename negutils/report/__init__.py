"""Stage 9, report: the papers' numbers, paper tables beside ours, verdicts, the unified table with
bootstrap intervals, performance, and the findings boxes and headline read from the results.

The names chapters use, importable from here; everything else from its module."""
from .findings import show_findings
from .paper_tables import (ablation_table, agreement_summary, beside_table, best_negfull, BOOK_TABLES,
                           highlight_differences, line_label, load_ours, NEGFULL, result_profiles, table2_pairs,
                           training_domain)
from .papers import beside_paper, methods_beside_paper, our_numbers, paper_metric, paper_numbers, paper_value
from .performance import BOOK_BUDGET_SECONDS, notebook_times, ratio_summary, read_bench, sweep_summary
from .unified import (backbone_table, default_protocol_methods, format_unified, ITEM_TABLES, leaders, read_items,
                      record_evaluation, unified_findings, unified_table)
from .verdicts import (collapse_measures, collapse_verdicts, ktn_verdicts, lcse_measures, lcse_verdicts,
                       peakpatch_verdicts)
from ..core.results import method_table

__all__ = ["ablation_table", "agreement_summary", "backbone_table", "beside_paper", "beside_table", "best_negfull",
           "BOOK_BUDGET_SECONDS", "BOOK_TABLES", "collapse_measures", "collapse_verdicts", "default_protocol_methods",
           "format_unified", "highlight_differences", "ITEM_TABLES", "ktn_verdicts", "lcse_measures",
           "lcse_verdicts", "leaders", "line_label", "load_ours", "method_table", "methods_beside_paper", "NEGFULL",
           "notebook_times", "our_numbers", "paper_metric", "paper_numbers", "paper_value", "peakpatch_verdicts",
           "ratio_summary", "read_bench", "read_items", "record_evaluation", "result_profiles", "show_findings",
           "sweep_summary", "table2_pairs", "training_domain", "unified_findings", "unified_table"]
