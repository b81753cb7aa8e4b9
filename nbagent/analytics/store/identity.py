"""Who writes a run: the identity of the writing process, and whether that writer is gone.

Part of ``nbagent.analytics.store``. A run is written with the identity of the process writing it (host,
pid and, on Linux, the process's boot id and start time, which tell a reused pid apart), so a
reader can tell a run whose writer died (``"unfinished"``) from one still being written.

A pid is checked only on the machine it belongs to, and a host name does not tell machines
apart (containers, cloned VMs and hosts all named ``localhost`` share one): the boot id must
match too (``on_this_machine``). A writer elsewhere cannot be checked, so it counts as alive.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from pathlib import Path

from nbagent.analytics.store.schema import Writer


def process_start(pid: int) -> str | None:
    """The boot id and start time of process ``pid`` (Linux), which tell a reused pid apart."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses; the start time is field 22.
    return f"{boot}:{stat.rpartition(')')[2].split()[19]}"


def _boot(start: str | None) -> str | None:
    """The boot id in a ``process_start`` value (``None`` where there is none)."""
    return None if start is None else start.partition(":")[0]


_identity: tuple[int, Writer] | None = None


def this_writer() -> Writer:
    """(host, pid, start) of this process, recomputed after a fork."""
    global _identity
    pid = os.getpid()
    if _identity is None or _identity[0] != pid:
        _identity = (pid, (socket.gethostname(), pid, process_start(pid)))
    return _identity[1]


def on_this_machine(host: str | None, start: str | None) -> bool:
    """Whether a process that recorded ``host`` and ``start`` ran on this machine since its
    last boot, so that its pid means something here: the same host name and the same boot id.
    Where neither side has a boot id (not Linux), the host name is all there is to go by."""
    own_host, _, own_start = this_writer()
    return host == own_host and _boot(start) == _boot(own_start)


def pid_alive(pid: int) -> bool:
    if sys.platform == "win32":
        import ctypes

        kernel32 = ctypes.windll.kernel32  # type: ignore[attr-defined]
        handle = kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
        if not handle:
            return False
        code = ctypes.c_ulong()
        try:
            kernel32.GetExitCodeProcess(handle, ctypes.byref(code))
        finally:
            kernel32.CloseHandle(handle)
        return code.value == 259  # STILL_ACTIVE
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, owned by someone else
    return True


live_lock = threading.Lock()
live_run_ids: set[str] = set()
"""Runs this process is writing right now (across all stores)."""


def _writer_alive(host: str | None, pid: int | None, start: str | None) -> bool:
    """Could the writer of a run still be writing it? Unknown writers (other hosts) count as alive."""
    if pid is None:
        return False  # written before writers were recorded (schema 1): nobody is writing it now
    if not on_this_machine(host, start):
        return True
    if not pid_alive(pid):
        return False
    return start is None or process_start(pid) in (None, start)


def writer_gone(run_id: str, writer: Writer) -> bool:
    """True when a run stored as running can no longer be finished by its writer."""
    if writer == this_writer():
        with live_lock:
            return run_id not in live_run_ids
    return not _writer_alive(*writer)
