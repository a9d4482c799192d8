"""Children that die with the gateway: a parent-death signal armed before the CLI runs.

Linux sends a process its parent-death signal (``PR_SET_PDEATHSIG``) when the *thread* that
forked it exits, and keeps it across ``execve`` (unless the program is set-uid). So every child
the runner starts is forked from the one long-lived spawner thread (``SPAWNER``) and runs
``SHIM`` first: a few lines of this interpreter that arm SIGKILL as that signal, check that
the gateway has not died already, restore the signal dispositions Python changed, and
``execvp`` the CLI in place, in the same process. A gateway killed with SIGKILL, its spawner
thread with it, therefore takes every child it started along. (Descendants of a child are not
signalled by the kernel; the start-up sweep, app/process/orphans.py, finds them.)

``subprocess.Popen`` cannot arm it itself without ``preexec_fn``, which makes it ``fork``
instead of ``vfork`` and stalls the event loop for the copy of the gateway's page tables
(measured: 8 ms with 60 MB resident, 14 ms with 450 MB). The shim costs about 14 ms of the
spawner thread instead, with the loop free.

Whether the CLI's own ``execvp`` failed is reported the way ``Popen`` reports its own: the
shim writes the ``errno`` to a pipe that a successful exec closes, and ``exec_error`` turns
it back into the ``OSError`` (``FileNotFoundError``, ``PermissionError``…) ``Popen`` raises.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger(__name__)

SHIM = """\
import os, signal, sys
report, parent, group, data = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
argv = sys.argv[5:]
try:
    import ctypes
    ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
    if os.getppid() != parent:
        os._exit(1)  # the gateway died before the signal was armed
    try:
        if group:
            with open(group, "w") as procs:
                procs.write(str(os.getpid()))
        if data:
            import resource
            resource.setrlimit(resource.RLIMIT_DATA, (int(data), int(data)))
    except OSError as exc:
        os.write(report, b"limits " + str(exc.errno or 0).encode())
        os._exit(127)
    for name in ("SIGPIPE", "SIGXFSZ"):  # ignored by Python; ignored signals survive exec
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    os.set_inheritable(report, False)
    os.execvp(argv[0], argv)
except OSError as exc:
    os.write(report, str(exc.errno or 0).encode())
    os._exit(127)
"""
"""Run as ``python -I -S -c SHIM <report fd> <gateway pid> <cgroup.procs> <data> <argv...>``:
the child joins the group whose ``cgroup.procs`` is given and sets ``RLIMIT_DATA`` to
``data`` bytes (each skipped when empty; see app/process/bounds.py) before it execs."""

SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agw-spawner")
"""The thread every child is forked from. Never shut down: its exit would signal every child
it forked. Created with the module, it lives until the gateway's process ends."""


def _interpreter() -> str | None:
    executable = sys.executable
    if executable and os.access(executable, os.X_OK):
        return executable
    log.warning("no interpreter to arm the parent-death signal; children may outlive a crash")
    return None


INTERPRETER = _interpreter()
"""This process's Python, which runs ``SHIM``; None where it cannot be executed."""


class LimitSetupError(OSError):
    """The child could not join its cgroup or set its resource limit before exec."""


def shim_argv(
    argv: list[str],
    report_fd: int,
    *,
    cgroup_procs: str | None = None,
    data_bytes: int | None = None,
) -> list[str]:
    """``argv`` started through ``SHIM``, which reports a failed exec on ``report_fd``."""
    assert INTERPRETER is not None
    group = cgroup_procs or ""
    data = "" if data_bytes is None else str(data_bytes)
    return [
        INTERPRETER,
        "-I",
        "-S",
        "-c",
        SHIM,
        str(report_fd),
        str(os.getpid()),
        group,
        data,
        *argv,
    ]


def exec_error(report_fd: int, argv0: str) -> OSError | None:
    """Wait until the shim has exec'd the CLI or failed to; the failure, as ``Popen`` raises
    it. Closes ``report_fd``; blocks (run it off the loop)."""
    try:
        data = b""
        while chunk := os.read(report_fd, 64):
            data += chunk
    finally:
        os.close(report_fd)
    if not data:
        return None  # closed by a successful exec (or the shim died before reporting)
    if data.startswith(b"limits "):
        with contextlib.suppress(ValueError):
            number = int(data.removeprefix(b"limits "))
            return LimitSetupError(number, f"cannot apply its limits: {os.strerror(number)}")
    with contextlib.suppress(ValueError):
        number = int(data)
        return OSError(number, os.strerror(number), argv0)
    return OSError(f"the process shim reported {data!r}")
