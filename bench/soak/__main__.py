"""`python -m bench.soak --minutes N --setup make-run,scaled` (`make soak`)."""

from __future__ import annotations

import argparse
import json
import signal
import sys

from bench.soak import run


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.soak")
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument(
        "--setup",
        type=lambda value: [name for name in value.split(",") if name],
        default=list(run.SETUPS),
        help="make-run, scaled or both (comma-separated; default both)",
    )
    parser.add_argument("--http-users", type=int, default=8)
    parser.add_argument("--socket-users", type=int, default=4)
    parser.add_argument("--http-rate", type=float, default=0.5, help="tasks/s per HTTP user")
    parser.add_argument("--socket-rate", type=float, default=0.25, help="tasks/s per socket user")
    parser.add_argument("--no-docs", action="store_true", help="leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    unknown = set(args.setup) - set(run.SETUPS)
    if unknown:
        parser.error(f"unknown setup {', '.join(sorted(unknown))} (of {', '.join(run.SETUPS)})")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM as an exception: the servers, the model and Locust are stopped on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    soak = run.run(args)
    run.LAST.write_text(json.dumps(soak, indent=1) + "\n")
    print(f"wrote {run.LAST}", flush=True)
    if not args.no_docs:
        run.write_docs(soak)
        print(f"wrote {run.DOCS}", flush=True)
    judged = [setup["verdict"]["flat"] for setup in soak["setups"].values() if "verdict" in setup]
    return 0 if judged and all(judged) else 1


if __name__ == "__main__":
    sys.exit(main())
