#!/usr/bin/env bash
# Regenerates the committed example reports: a plan for all 2-way marginals over four
# Adult attributes, its report, a real release on ../shared/data/adult (OS randomness: the
# answers differ at every run), and the release's report — HTML and Markdown.
#   bash reports/example_adult/make.sh        (from the repository root)
set -euo pipefail
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
factorize plan --workload "marginals:2x5x6x2:2" --privacy "epsilon=1,delta=1e-6" \
  --domain ../../../shared/data/adult/adult-domain.json --attributes "sex,race,relationship,income>50K" \
  --postprocess nonneg --out "$tmp/adult.plan"
factorize report "$tmp/adult.plan" --out plan_report.html
factorize report "$tmp/adult.plan" --out plan_report.md
factorize run "$tmp/adult.plan" --data ../../../shared/data/adult/adult.csv --out answers.csv \
  --ignore-extra-columns --overwrite
factorize report --results answers.csv --out results_report.html
factorize report --results answers.csv --out results_report.md
