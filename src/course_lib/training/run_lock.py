"""One run per output folder: `course pretrain` holds `<output-dir>/.course-run.lock` while it runs.

The file names the run (pid, host, start time, command line); an exclusive `fcntl.flock` on it
lives exactly as long as the process, so a run that was killed leaves a stale file that the
next run detects and takes over. Where flock does not exist (Windows) the file alone decides:
a lock whose pid no longer runs on this host is stale. The lock is released on every exit path
(a `with` block), and the folders it created for nothing are removed again.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = ".course-run.lock"


class RunLocked(Exception):
    """Another live run holds the lock on the folder: the message names it (pid, start time)."""


@dataclass
class RunLock:
    """A held lock: the open file (its flock) and what it replaced, if it took over a stale one."""

    path: Path
    fd: int
    created_dirs: list[Path]
    took_over: dict[str, Any] | None = None


def _pid_alive(pid: Any) -> bool:
    """Whether process `pid` still runs here (a pid we may not signal counts as alive)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True
    return True


def _read_holder(fd: int) -> dict[str, Any]:
    """The lock file's record of its run ({} when empty or unreadable: a run that died writing it)."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = json.loads(os.read(fd, 65536).decode("utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def describe(holder: dict[str, Any]) -> str:
    """'pid 123 on host, started 2025-01-01 12:00:00' from a lock record."""
    started = holder.get("started")
    when = (
        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started))
        if isinstance(started, (int, float))
        else "at an unknown time"
    )
    host = holder.get("host")
    where = f" on {host}" if isinstance(host, str) and host != socket.gethostname() else ""
    return f"pid {holder.get('pid', '?')}{where}, started {when}"


def _try_flock(fd: int) -> bool:
    """Take the exclusive flock without waiting; False if another open file holds it."""
    if fcntl is None:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:  # a filesystem without flock: the pid in the file decides
        return True
    return True


def _stale(holder: dict[str, Any], have_flock: bool) -> bool:
    """A lock whose flock we could take is stale; without flock, one whose pid is gone from this
    host (or that records nothing)."""
    if have_flock:
        return True
    if holder.get("host") not in (None, socket.gethostname()):
        return False  # another machine's run: its pid cannot be checked from here
    return not _pid_alive(holder.get("pid"))


def acquire(folder: str | Path) -> RunLock:
    """Take the lock on `folder` (created if needed); RunLocked (naming the holder) if a live run
    has it. A stale lock is taken over; `took_over` then holds its record."""
    folder = Path(folder)
    created, parent = [], folder
    while not parent.exists() and parent != parent.parent:
        created.append(parent)
        parent = parent.parent
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_NAME
    record = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
    record["command"] = " ".join(["course", *sys.argv[1:]])[:300]
    for _ in range(20):
        try:
            fd, fresh = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644), True
        except FileExistsError:
            try:
                fd, fresh = os.open(path, os.O_RDWR), False
            except FileNotFoundError:
                continue  # released between the two opens: try again
        if not _try_flock(fd):
            holder = _read_holder(fd)
            os.close(fd)
            raise RunLocked(describe(holder) if holder else "a run that is still starting")
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # the file we locked was released and removed meanwhile
            os.close(fd)
            continue
        holder = None if fresh else _read_holder(fd)
        if holder is not None and not _stale(holder, fcntl is not None):
            os.close(fd)
            raise RunLocked(describe(holder))
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, json.dumps(record).encode("utf-8"))
        return RunLock(path, fd, created, took_over=holder)
    raise RunLocked("other runs that keep taking and releasing the lock")


def release(lock: RunLock) -> None:
    """Remove the lock file (if it is still ours), then the folders `acquire` created, if empty."""
    try:
        if os.fstat(lock.fd).st_ino == os.stat(lock.path).st_ino:
            lock.path.unlink()
    except OSError:
        pass
    finally:
        os.close(lock.fd)
    for folder in lock.created_dirs:  # innermost first; never a folder that holds anything
        try:
            folder.rmdir()
        except OSError:
            break


@contextlib.contextmanager
def holding(folder: str | Path, enabled: bool = True) -> Iterator[RunLock | None]:
    """`with holding(output_dir):` the run's lock, released on every exit (error, Ctrl-C
    included). `enabled=False` (torchrun ranks other than 0) holds nothing."""
    if not enabled:
        yield None
        return
    lock = acquire(folder)
    try:
        yield lock
    finally:
        release(lock)
