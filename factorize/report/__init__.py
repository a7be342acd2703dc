"""Reports people would rather look at than read: plan and results reports as
self-contained HTML or Markdown with matplotlib figures.

``model``: the document (sections, tables, figures, per-table panels, pages of a long table,
linked data files, the quoted numbers). ``plan_report``: a plan of any kind → Report
(guarantee and noise in words, ρ as (ε, δ), certificate, per-query error, precision per table,
error vs n, baselines). ``results_report``: released answers → Report (one panel per table in
value labels, every answer, the guarantee, the dataset's ledger history). ``baselines``:
standard strategies computed on the spot. ``plots``: the figures (Agg backend, PNG bytes).
``render``: HTML and Markdown writers. ``errors``: ``ReportError`` (bad figure data, an
unknown report format). matplotlib is a dependency.
"""
