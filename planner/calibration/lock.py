"""One calibration profile at a time per machine (`exclusive_profile`): two would share the device and measure each
other. The lock is a file in the calibration data directory holding the running process's id."""

from __future__ import annotations

import json
import os
import threading
from contextlib import contextmanager

from planner.calibration import store
from planner.calibration.errors import ProfileUnavailable

_IN_PROCESS = threading.Lock()
LOCK_FILE = "profile.lock"


@contextmanager
def exclusive_profile(device_name: str):
    """One profile at a time per machine: two would share the device and measure each other.

    A lock held in this process (another dashboard session) or by a live process (a CLI run, another
    server) refuses the second run with a message; a lock left by a killed run is taken over.
    """
    if not _IN_PROCESS.acquire(blocking=False):
        raise ProfileUnavailable("a calibration profile is already running in this app; wait for it or cancel it")
    lock = store.data_dir() / LOCK_FILE
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        for _attempt in range(2):
            try:
                fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = _lock_holder(lock)
                if holder is not None:
                    raise ProfileUnavailable(
                        f"a calibration profile is already running (process {holder}, lock "
                        f"{lock}); wait for it to finish"
                    ) from None
                lock.unlink(missing_ok=True)  # left by a run that was killed
                continue
            with os.fdopen(fd, "w") as handle:
                handle.write(json.dumps({"pid": os.getpid(), "device": device_name}))
            break
        else:
            raise ProfileUnavailable(f"could not take the profile lock {lock}")
        try:
            yield
        finally:
            lock.unlink(missing_ok=True)
    finally:
        _IN_PROCESS.release()


def _lock_holder(lock) -> int | None:
    """The live process holding `lock`, or None when the lock is stale or unreadable."""
    try:
        pid = int(json.loads(lock.read_text())["pid"])
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None
    if pid == os.getpid():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid
    return pid


__all__ = ["LOCK_FILE", "exclusive_profile"]
