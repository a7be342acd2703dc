"""Reports people would rather look at than read: plan and results reports as
self-contained HTML or Markdown with matplotlib figures.

``model``: the document (sections, tables, figures, the quoted numbers). ``plan_report``: a
plan → Report (guarantee and noise in words, certificate, per-query error, error vs n,
baselines). ``results_report``: released answers → Report. ``baselines``: standard strategies
computed on the spot. ``plots``: the figures (Agg backend, PNG bytes). ``render``: HTML and
Markdown writers. ``errors``: ``ReportError`` (bad figure data, an unknown report
format). matplotlib is a dependency.
"""
