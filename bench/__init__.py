"""Benchmarks run by `make bench` (`python -m bench`).

Each benchmark is a module in this package, registered by name in `BENCHMARKS`, with:

- `run(*, quick: bool, databases: tuple[str, ...], rows: int | None) -> dict`, which measures
  and returns a JSON-serialisable result (raising if a correctness check fails), and
- `format_table(result: dict) -> str`, the table printed to stdout.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import traceback
from pathlib import Path

BENCHMARKS: tuple[str, ...] = ("inserts", "turn_start", "relay")
DATABASES: tuple[str, ...] = ("sqlite", "postgresql")
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def _databases(value: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in value.split(",") if name.strip())
    unknown = [name for name in names if name not in DATABASES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown database {', '.join(unknown) or '(none)'}; choose from {', '.join(DATABASES)}"
        )
    return names


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=BENCHMARKS, help="run just this benchmark")
    parser.add_argument("--quick", action="store_true", help="fewer iterations (smoke test)")
    parser.add_argument(
        "--databases",
        type=_databases,
        default=DATABASES,
        help="comma-separated subset of: " + ", ".join(DATABASES),
    )
    parser.add_argument("--rows", type=int, help="rows per writer (overrides the default)")
    parser.add_argument(
        "--results-dir", type=Path, default=RESULTS_DIR, help="where <name>.json is written"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    names = (args.only,) if args.only else BENCHMARKS
    failed = []
    for name in names:
        module = importlib.import_module(f"bench.{name}")
        print(f"== {name} ==", flush=True)
        try:
            result = module.run(quick=args.quick, databases=args.databases, rows=args.rows)
        except Exception:
            traceback.print_exc()
            print(f"!! benchmark {name} FAILED (no result written)", flush=True)
            failed.append(name)
            continue
        print(module.format_table(result), flush=True)
        args.results_dir.mkdir(parents=True, exist_ok=True)
        path = args.results_dir / f"{name}.json"
        path.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {path}\n", flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0
