"""Command line: `python -m jobs.scheduling explain SCENARIO.json` prints the cycle as JSON."""

from __future__ import annotations

import argparse
import json
import sys

from ._loader import load

load()  # the compiled core, if fresh, before any core module is imported

from .cycle import run_cycle  # noqa: E402
from .scenario import load_scenario, render_result  # noqa: E402
from .types import ScenarioError  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; exit code 2 for a malformed scenario."""
    parser = argparse.ArgumentParser(prog="python -m jobs.scheduling")
    sub = parser.add_subparsers(dest="command", required=True)
    explain = sub.add_parser("explain", help="print one cycle's decisions for a scenario")
    explain.add_argument("scenario", help="path to a scenario JSON file ('-' for stdin)")
    args = parser.parse_args(argv)
    try:
        if args.scenario == "-":
            data = json.load(sys.stdin)
        else:
            with open(args.scenario, encoding="utf-8") as fh:
                data = json.load(fh)
        snapshot = load_scenario(data)
        result = run_cycle(snapshot)
    except OSError as exc:
        print(f"error: cannot read {args.scenario}: {exc.strerror}", file=sys.stderr)
        return 2
    except json.JSONDecodeError as exc:
        print(
            f"error: {args.scenario} is not valid JSON: {exc.msg} at line {exc.lineno}",
            file=sys.stderr,
        )
        return 2
    except ScenarioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    json.dump(render_result(result), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
