"""What an eval prints and the HTML report it writes: the pass rate of each case over its
runs, each run's checks with their reasons, and where its transcript is."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from jinja2 import Environment

from app.evals.runner import EvalResult

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Loopdesk eval</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem; color: #1d1d1b; }
table { border-collapse: collapse; margin-bottom: 1.5rem; }
th, td { border: 1px solid #ccc; padding: .3rem .6rem; text-align: left; vertical-align: top; }
.pass { color: #1f6f3f; } .fail { color: #a12a2a; font-weight: 600; }
code { font-size: 12px; }
pre { white-space: pre-wrap; font-size: 12px; background: #f6f6f2; padding: .6rem; }
</style></head><body>
<h1>Loopdesk eval</h1>
<p>{{ when }} · model <code>{{ model }}</code> · {{ passed }} of {{ total }} runs passed
(<span class="{{ 'pass' if ok else 'fail' }}">{{ '%.0f' % (rate * 100) }}%</span>,
threshold {{ '%.0f' % (threshold * 100) }}%)</p>
<h2>Cases</h2>
<table><tr><th>dataset</th><th>case</th><th>pass rate</th></tr>
{% for dataset, case, ok_runs, runs in rates %}
<tr><td>{{ dataset }}</td><td>{{ case }}</td>
<td class="{{ 'pass' if ok_runs == runs else 'fail' }}">{{ ok_runs }}/{{ runs }}</td></tr>
{% endfor %}</table>
<h2>Runs</h2>
{% for o in outcomes %}
<h3 class="{{ 'pass' if o.passed else 'fail' }}">{{ o.dataset }} · {{ o.case }} · run {{ o.run }}:
{{ 'passed' if o.passed else 'failed' }}</h3>
{% if o.error %}<p class="fail">{{ o.error }}</p>{% endif %}
{% if o.checks %}<table><tr><th>check</th><th>result</th><th>reason</th></tr>
{% for name, (ok_check, reason) in o.checks.items() %}
<tr><td>{{ name }}</td><td class="{{ 'pass' if ok_check else 'fail' }}">
{{ 'pass' if ok_check else 'fail' }}</td><td>{{ reason }}</td></tr>
{% endfor %}</table>{% endif %}
{% if o.transcript_file %}<p>Transcript: <code>{{ o.transcript_file }}</code></p>{% endif %}
{% if o.transcript_text %}<details><summary>What happened</summary>
<pre>{{ o.transcript_text }}</pre></details>{% endif %}
{% endfor %}
</body></html>
"""


def summary_lines(result: EvalResult, threshold: float) -> list[str]:
    """The pass-rate table printed after pydantic-evals' own tables."""
    rows = [("dataset", "case", "passed")] + [
        (dataset, case, f"{ok_runs}/{runs}") for dataset, case, ok_runs, runs in result.case_rates()
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    passed = sum(o.passed for o in result.outcomes)
    verdict = "PASS" if result.pass_rate >= threshold else "FAIL"
    lines.append("")
    lines.append(
        f"{verdict}: {passed}/{len(result.outcomes)} runs passed "
        f"({result.pass_rate:.0%}; threshold {threshold:.0%})"
    )
    return lines


def write_html(result: EvalResult, path: Path, *, threshold: float, model: str) -> None:
    page = Environment(autoescape=True).from_string(_PAGE)
    passed = sum(o.passed for o in result.outcomes)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        page.render(
            when=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            model=model,
            passed=passed,
            total=len(result.outcomes),
            rate=result.pass_rate,
            ok=result.pass_rate >= threshold,
            threshold=threshold,
            rates=result.case_rates(),
            outcomes=result.outcomes,
        ),
        encoding="utf-8",
    )
