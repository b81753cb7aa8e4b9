"""The command line: ``python -m nbagent demo`` runs the offline demo agent in the terminal.

The run prints once, live, through the ``TextView``, and ends with its summary line. Ctrl-C stops
the run at once (mid model reply or mid tool): the view prints the cut step and the summary, and
the command exits 130, the shell's code for "stopped by SIGINT", so a script calling it stops too.
With no command it prints its help and exits 0: asking a tool what it does is not an error.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from types import FrameType
from typing import Any

from nbagent import __version__
from nbagent.api import start
from nbagent.demo import DEMO_TASK, demo_agent
from nbagent.errors import StoppedByKeyboard
from nbagent.runtime.handle import Run
from nbagent.view.terminal import TextView

EXIT_SIGINT = 130
DESCRIPTION = (
    "nbagent runs LLM agents with live steps, a Stop that stops now, and every run kept as "
    "pandas DataFrames. From the command line it runs an offline demo."
)
DEMO_ABOUT = "run the offline demo agent (no network, no API key); Ctrl-C stops it"


def _parser() -> argparse.ArgumentParser:
    # Under ``python -m`` argv[0] is ".../__main__.py"; the console script is plain "nbagent".
    prog = "python -m nbagent" if os.path.basename(sys.argv[0]) == "__main__.py" else "nbagent"
    parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTION, epilog=f"Try: {prog} demo")
    parser.add_argument("--version", action="version", version=f"nbagent {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="command")
    demo = commands.add_parser("demo", help=DEMO_ABOUT, description=DEMO_ABOUT + ".")
    demo.add_argument("task", nargs="?", default=DEMO_TASK, help="what to ask (default: %(default)r)")
    demo.add_argument("--fast", action="store_true", help="stream without delays")
    return parser


class _CtrlC:
    """Ctrl-C while the demo runs: the handler itself ends the line the terminal echoed ``^C`` on
    (so what the view prints next starts on a line of its own) and stops the run with the reason
    ``"keyboard"``. It does not raise: a ``KeyboardInterrupt`` raised from a signal handler can land
    in a weakref callback (an import's module lock, say) and be swallowed, and then the press would
    be lost. A press while the run is being launched is held until the handle exists. Later presses
    raise ``KeyboardInterrupt`` as usual, for ``run.wait()`` to handle (see ``run_demo``)."""

    def __init__(self, view: TextView) -> None:
        self.view = view
        self.presses = 0
        self.run: Run | None = None
        self._previous: Any = None

    def watch(self, run: Run) -> None:
        """Stop ``run`` on a press from now on, and at once if one came while it was launched."""
        self.run = run
        if self.presses:
            run.interrupt(reason="keyboard")

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        self.presses += 1
        self.view.break_line()
        if self.presses > 1:
            signal.default_int_handler(signum, frame)
        if self.run is not None:
            self.run.interrupt(reason="keyboard")

    def __enter__(self) -> _CtrlC:
        if threading.current_thread() is threading.main_thread():  # only there can it be set
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def run_demo(task: str, *, fast: bool = False) -> int:
    """Run the demo agent on ``task``, printing it live; the exit code of its end state."""
    agent = demo_agent(tokens_per_s=1e9, first_token_s=0.0) if fast else demo_agent()
    view = TextView(sys.stdout)
    with _CtrlC(view) as keys:
        try:
            run = start(agent, task, sinks=[view], display=False)
            keys.watch(run)
            try:
                record = run.wait()
            except StoppedByKeyboard:  # a second press, which wait() took: the record is complete
                return EXIT_SIGINT  # the view has printed the cut step and the summary
        except KeyboardInterrupt:  # a third press while the run was still stopping
            print("nbagent: stopped before the run's record was complete", file=sys.stderr)
            return EXIT_SIGINT
    if keys.presses:
        return EXIT_SIGINT  # the view has printed the cut step and the summary
    return 0 if record.status == "success" else 1


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return run_demo(args.task, fast=args.fast)


if __name__ == "__main__":
    sys.exit(main())
