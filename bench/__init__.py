"""Benchmarks run by `make bench` (`python -m bench`).

Each benchmark is a module in this package, registered by name in `BENCHMARKS`, with:

- `run(*, quick: bool, databases: tuple[str, ...], rows: int | None, **options) -> dict`,
  which measures and returns a JSON-serialisable result (raising if a correctness check
  fails), and
- `format_table(result: dict) -> str`, the table printed to stdout.

After the benchmarks, the report (`bench.report`): `docs/benchmarks.md` with every table,
the budgets of issues 10, 22 and 29 checked line by line, the machine, and PNG plots. A full run writes
it to `docs/`; a partial one (`--only`, `--quick`) only when `--docs-dir` says where. The
exit status is non-zero when a benchmark raised (a correctness check failed); a budget
line that misses, or a server that could not keep up, is reported, not an error.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
import traceback
from pathlib import Path

BENCHMARKS: tuple[str, ...] = (
    "startup",
    "inserts",
    "turn_start",
    "search",
    "serving",
    "stall",
    "live_text",
    "turn_cost",
)
# Run only when asked (`--only suite`: over half an hour); the report keeps its last result.
ON_REQUEST: tuple[str, ...] = ("suite",)
DATABASES: tuple[str, ...] = ("sqlite", "postgresql")
ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "bench" / "results"
DOCS_DIR = ROOT / "docs"


def _names(value: str, allowed: tuple[str, ...], what: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in value.split(",") if name.strip())
    unknown = [name for name in names if name not in allowed]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown {what} {', '.join(unknown) or '(none)'}; choose from {', '.join(allowed)}"
        )
    return names


def _variants(value: str) -> tuple[str, ...]:
    from bench.servers import variant_names

    return _names(value, variant_names(), "server variant")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only",
        type=lambda v: _names(v, BENCHMARKS + ON_REQUEST, "benchmark"),
        help="comma-separated subset of: " + ", ".join(BENCHMARKS + ON_REQUEST),
    )
    parser.add_argument("--quick", action="store_true", help="fewer iterations (smoke test)")
    parser.add_argument(
        "--databases",
        type=lambda v: _names(v, DATABASES, "database"),
        default=DATABASES,
        help="comma-separated subset of: " + ", ".join(DATABASES),
    )
    parser.add_argument("--rows", type=int, help="rows per writer / long conversation size")
    parser.add_argument(
        "--variants",
        type=_variants,
        help="server variants of the serving benchmark (default: all; --quick: minimal,embedded)",
    )
    parser.add_argument(
        "--first-token-delay",
        type=float,
        default=0.2,
        help="the fake model's time to first token, seconds (default 0.2)",
    )
    parser.add_argument(
        "--results-dir", type=Path, default=RESULTS_DIR, help="where <name>.json is written"
    )
    parser.add_argument(
        "--docs-dir",
        type=Path,
        help="where benchmarks.md and its plots are written (default: docs/ on a full run, "
        "nowhere on a partial one)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    names = args.only or BENCHMARKS
    began = time.perf_counter()
    results: dict[str, dict] = {}
    failed = []
    for name in names:
        module = importlib.import_module(f"bench.{name}")
        print(f"== {name} ==", flush=True)
        load = os.getloadavg()[0]
        try:
            result = module.run(
                quick=args.quick,
                databases=args.databases,
                rows=args.rows,
                variants=args.variants,
                first_token_delay=args.first_token_delay,
            )
        except Exception:
            traceback.print_exc()
            print(f"!! benchmark {name} FAILED (no result written)", flush=True)
            failed.append(name)
            continue
        # Other work on the machine weighs on every figure: the report says how much.
        result["load_average_1m"] = [round(load, 2), round(os.getloadavg()[0], 2)]
        results[name] = result
        print(module.format_table(result), flush=True)
        args.results_dir.mkdir(parents=True, exist_ok=True)
        path = args.results_dir / f"{name}.json"
        path.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {path}\n", flush=True)

    from bench import report

    seconds = time.perf_counter() - began
    print("== budget (issue 10) ==")
    print(report.budget_table(results), flush=True)
    print("== budget (issue 22) ==")
    print(report.budget_22_table(results), flush=True)
    for name in ON_REQUEST:
        # Its last measurement is committed beside the benchmarks (bench/<name>-last.json).
        kept = ROOT / "bench" / f"{name}-last.json"
        if name in results:
            kept.write_text(json.dumps(results[name], indent=2) + "\n")
        elif kept.exists():
            results[name] = json.loads(kept.read_text())
    soak = ROOT / "bench" / "soak-last.json"  # `make soak` (bench/soak/) writes it
    if soak.exists():
        results["soak"] = json.loads(soak.read_text())
    print("== budget (issue 29) ==")
    print(report.budget_29_table(results), flush=True)
    print("== budget (issue 31) ==")
    print(report.budget_31_table(results), flush=True)
    print("== budget (issue 36) ==")
    print(report.budget_36_table(results), flush=True)
    full_run = not args.only and not args.quick
    docs = args.docs_dir or (DOCS_DIR if full_run else None)
    if docs is not None:
        path = report.write_report(results, docs, seconds, args.quick)
        print(f"wrote {path}", flush=True)
    print(f"took {seconds:.0f} s", flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0
