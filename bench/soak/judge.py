"""The soak's verdict from its recorded samples (pure: no processes, no Locust), and its
section of docs/benchmarks.md.

Windows: W = five minutes, or a fifth of the run when the run is shorter than 25 minutes.
The first W is the warm-up. Latency: p99 of the first W against p99 of the last W, over all requests and per
request name where both windows hold at least `MIN_P99_SAMPLES`.
Memory, open files and database connections: the median of each process's readings in the
W after the warm-up (its level "after warm-up") against the median of its readings in the
last W. Goals (issue 36): 0 errors; the last p99 within `P99_RATIO` of the first (or within
`P99_SLACK_MS`: a few milliseconds' wobble of a fast route is not a trend); every process's
memory within `MEMORY_RATIO`; open files and connections at the end no higher than the
highest reading after warm-up (a leak climbs past it; the traffic's own ebb and flow does
not).
"""

from __future__ import annotations

import statistics
from collections import defaultdict

WINDOW_SECONDS = 300.0
P99_RATIO = 1.25
P99_SLACK_MS = 20.0
MEMORY_RATIO = 0.10
# Below this many requests in a window, a p99 is its slowest one or two: shown, not judged.
MIN_P99_SAMPLES = 100
MIB = 1024 * 1024


def window(seconds: float) -> float:
    return min(WINDOW_SECONDS, seconds / 5)


def p99(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]


def latency(requests: list[dict], start: float, end: float) -> dict:
    """p99 per request name and over all, in the first and last window."""
    span = window(end - start)
    first: dict[str, list[float]] = defaultdict(list)
    last: dict[str, list[float]] = defaultdict(list)
    for request in requests:
        if request["error"]:
            continue
        for name in (f"{request['kind']} {request['name']}", "all requests"):
            if request["at"] <= start + span:
                first[name].append(request["ms"])
            elif request["at"] >= end - span:
                last[name].append(request["ms"])
    rows = {}
    for name in sorted(set(first) | set(last)):
        before, after = p99(first[name]), p99(last[name])
        counts = [len(first[name]), len(last[name])]
        judged = name == "all requests" or min(counts) >= MIN_P99_SAMPLES
        rows[name] = {
            "count": counts,
            "p99_ms": [before, after],
            "steady": steady(before, after) if judged else None,
        }
    return rows


def steady(before: float | None, after: float | None) -> bool:
    if before is None or after is None:
        return True  # too rare to judge in one of the windows
    return after <= before * P99_RATIO or after - before <= P99_SLACK_MS


def _medians(readings: list[dict], key: str, since: float, until: float) -> dict[str, float]:
    grouped: dict[str, list[float]] = defaultdict(list)
    for reading in readings:
        if since <= reading["at"] <= until and reading.get(key) is not None:
            grouped[reading["process"]].append(reading[key])
    return {process: statistics.median(values) for process, values in grouped.items()}


def _highest(readings: list[dict], key: str, since: float, until: float) -> dict[str, float]:
    grouped: dict[str, float] = {}
    for reading in readings:
        if since <= reading["at"] <= until and reading.get(key) is not None:
            grouped[reading["process"]] = max(grouped.get(reading["process"], 0), reading[key])
    return grouped


def resources(readings: list[dict], start: float, end: float, clients: int = 0) -> dict:
    """Per process: memory, open files and database connections after warm-up and at the
    end. `readings`: `{at, process, rss, fds, connections}` (connections may be None).
    `clients`: the load's users, each holding at most a connection or two at a reading:
    open files may end that many above their median after warm-up (a leak of one per
    request climbs by thousands in half an hour)."""
    span = window(end - start)
    warm = (start + span, start + 2 * span)
    final = (end - span, end)
    out = {}
    for key in ("rss", "fds", "connections"):
        after_warm = _medians(readings, key, *warm)
        highest = _highest(readings, key, *warm)
        at_end = _medians(readings, key, *final)
        for process in sorted(after_warm.keys() & at_end.keys()):
            before, after = after_warm[process], at_end[process]
            if key == "rss":
                flat = abs(after - before) <= MEMORY_RATIO * before
            elif key == "fds":
                flat = after <= highest[process] or after - before <= clients
            else:
                flat = after <= highest[process]
            out.setdefault(process, {})[key] = {"after_warm_up": before, "end": after, "flat": flat}
    return out


def verdict(
    requests: list[dict], readings: list[dict], start: float, end: float, clients: int = 0
) -> dict:
    errors = [request for request in requests if request["error"]]
    by_error: dict[str, int] = defaultdict(int)
    for request in errors:
        by_error[f"{request['kind']} {request['name']}: {request['error'][:100]}"] += 1
    rows = latency(requests, start, end)
    held = resources(readings, start, end, clients)
    return {
        "seconds": round(end - start, 1),
        "window_seconds": window(end - start),
        "requests": len(requests),
        "errors": len(errors),
        "error_kinds": dict(sorted(by_error.items(), key=lambda item: -item[1])[:8]),
        # When: a failure only in the last seconds is the load stopping, not the server.
        "first_errors": [
            f"{request['at'] - start:.1f} s: {request['kind']} {request['name']}"
            for request in errors[:5]
        ],
        "latency": rows,
        "resources": held,
        "flat": not errors
        and all(row["steady"] is not False for row in rows.values())
        and all(entry["flat"] for process in held.values() for entry in process.values()),
    }


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _mark(flat: bool | None) -> str:
    if flat is None:
        return f"(under {MIN_P99_SAMPLES} a window: not judged)"
    return "ok" if flat else "**MISSED**"


def setup_markdown(name: str, result: dict) -> list[str]:
    judged = result["verdict"]
    minutes = judged["seconds"] / 60
    out = [
        f"### {name}: {result['label']}",
        "",
        f"{minutes:.1f} minutes, {judged['requests']} requests, **{judged['errors']} errors**, "
        f"windows of {judged['window_seconds'] / 60:.1f} min; server log: "
        f"{result['log'].get('tracebacks', 0)} tracebacks; load average (1 min) "
        f"{result['load_average_1m'][0]} at the start, {result['load_average_1m'][1]} at the "
        f"end. Verdict: **{'flat' if judged['flat'] else 'NOT flat'}**.",
        "",
        "| requests | count first / last | p99 first (ms) | p99 last (ms) | steady |",
        "|---|---|---|---|---|",
    ]
    for label, row in judged["latency"].items():
        count = f"{row['count'][0]} / {row['count'][1]}"
        first, last = row["p99_ms"]
        out.append(f"| {label} | {count} | {_ms(first)} | {_ms(last)} | {_mark(row['steady'])} |")
    out += [
        "",
        "| process | RSS after warm-up → end (MiB) | open files | DB connections | flat |",
        "|---|---|---|---|---|",
    ]
    for process, held in judged["resources"].items():
        rss, fds, conns = held.get("rss"), held.get("fds"), held.get("connections")
        cells = [
            f"{rss['after_warm_up'] / MIB:.1f} → {rss['end'] / MIB:.1f}" if rss else "-",
            f"{fds['after_warm_up']:.0f} → {fds['end']:.0f}" if fds else "-",
            f"{conns['after_warm_up']:.0f} → {conns['end']:.0f}" if conns else "-",
        ]
        flat = all(entry["flat"] for entry in held.values())
        out.append(f"| {process} | {' | '.join(cells)} | {_mark(flat)} |")
    if judged["error_kinds"]:
        out += ["", "Errors:", ""]
        out += [f"- {count} × {kind}" for kind, count in judged["error_kinds"].items()]
    return out + [""]


def markdown(soak: dict) -> list[str]:
    """The "## Soak" section of docs/benchmarks.md from `bench/soak-last.json`."""
    minutes = soak["minutes"]
    shortened = (
        f" **A shortened run ({minutes:g} minutes a setup, `SOAK_MINUTES={minutes:g}`)**; the "
        "30-minute soak is `make soak`."
        if minutes < 30
        else ""
    )
    if soak.get("concurrently"):  # one `--setup` each, started together
        shortened += " The setups ran at the same time, each under the other's load."
    out = [
        "## Soak",
        "",
        f"`make soak` (bench/soak/): mixed traffic at a steady rate, driven by Locust "
        f"{soak['locust']} ({soak['http_users']} HTTP users at {soak['http_rate']} tasks/s "
        f"each: new chats, turns, card answers, uploads, search, exports; "
        f"{soak['socket_users']} socket "
        f"users at {soak['socket_rate']} tasks/s each joining chats' sockets, sometimes "
        "reading a turn, and leaving), on each setup; every server process's RSS, open "
        "files and database connections read every few seconds. Run {at}.{shortened} "
        "Goals: 0 errors, p99 of the last window within 25% (or 20 ms) of the first (over "
        f"all requests, and per name with at least {MIN_P99_SAMPLES} in each window), every "
        "process's memory within 10% of its level after warm-up, no growth in open files or "
        "connections (bench/soak/judge.py). `CARD`: a turn whose reply is an `ask_user` card "
        "(the stamped model asks on `card=ask`), the card answered through the loop route, "
        "and the run its answer starts, to its end.".replace("{at}", soak["started_at"]).replace(
            "{shortened}", shortened
        ),
        "",
    ]
    for name, result in soak["setups"].items():
        if "skipped" in result:
            out += [f"### {name}", "", f"Skipped: {result['skipped']}", ""]
        else:
            out += setup_markdown(name, result)
    return out
