"""``python -m nbagent demo ["task"]``: run the offline demo agent in the terminal.

Steps stream as text; Ctrl-C interrupts the run gracefully and the record summary is printed.
"""

from __future__ import annotations

import argparse
import sys

from .demo import DEMO_TASK, demo_agent
from .runner import start
from .textview import TextView


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nbagent", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    about = "run the offline demo agent (no network, no API key); Ctrl-C stops it"
    demo = sub.add_parser("demo", help=about, description=about)
    demo.add_argument("task", nargs="?", default=DEMO_TASK, help="what to ask (default: %(default)r)")
    demo.add_argument("--fast", action="store_true", help="stream without delays")
    args = parser.parse_args(argv)

    agent = demo_agent(tokens_per_s=1e9, first_token_s=0.0) if args.fast else demo_agent()
    run = start(agent, args.task, sinks=[TextView(sys.stdout)], display=False)
    record = run.wait()  # Ctrl-C here interrupts the run and waits for its record
    print()
    print(record)
    return 0 if record.status in ("success", "interrupted") else 1


if __name__ == "__main__":
    sys.exit(main())
