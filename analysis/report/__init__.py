"""The report floor: tables (:mod:`.tables`), the HTML and Markdown page (:mod:`.html`), its
figures (:mod:`.figures`), the names and notes they share (:mod:`.labels`) and the published
figures they are compared with (:mod:`.paper`).

The package re-exports the tables' functions and :func:`write_report`, so notebooks write
``report.table_one(analyses)`` and ``report.write_report(analyses, "out")``.
"""

from latscope.analysis.report.html import input_warnings, write_report
from latscope.analysis.report.tables import (
    GroupComparison,
    Table,
    class_comparison_table,
    common_names,
    compare_analyses,
    compare_classes,
    compare_grouped,
    comparison_table,
    fmt_ns,
    frames_table,
    grouped_comparison_tables,
    paper_table,
    percentile_table,
    plot_distributions,
    plot_histograms,
    plot_series,
    plot_size,
    plot_spectrum,
    plot_waterfall,
    size_data,
    size_fits,
    size_table,
    stage_table,
    stats_table,
    summary_text,
    table_one,
    waterfall_data,
)

__all__ = ["Table", "GroupComparison", "fmt_ns", "stats_table", "table_one", "percentile_table",
           "comparison_table", "size_table", "stage_table", "summary_text", "compare_analyses",
           "compare_grouped", "grouped_comparison_tables", "paper_table", "size_fits",
           "write_report", "input_warnings", "frames_table", "compare_classes",
           "class_comparison_table", "common_names", "size_data", "waterfall_data",
           "plot_histograms", "plot_spectrum", "plot_series", "plot_distributions",
           "plot_waterfall", "plot_size"]
