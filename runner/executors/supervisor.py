"""The small supervisor each local worker runs under (one per cell × repeat), so that nothing a
worker starts outlives its cell, however the worker's children detach and however the runner
ends:

    python -I supervisor.py --parent PID --log FILE --head BYTES --tail BYTES -- COMMAND...

- It is a child subreaper (PR_SET_CHILD_SUBREAPER): a process below it whose parent exits is
  re-parented to it instead of init, so a child that calls setsid or double-forks stays among
  its descendants. When the worker exits, every descendant still alive is killed and reaped;
  then the supervisor exits as the worker did (its exit code, or the same signal).
- SIGTERM, SIGHUP or SIGINT (the runner's timeout or interrupt): SIGTERM to every descendant,
  SIGKILL to what is left after a grace period.
- The runner's death, even by SIGKILL, sends it SIGTERM (PR_SET_PDEATHSIG, set here after the
  exec, so the runner runs no code between fork and exec); the worker gets SIGKILL when the
  supervisor dies, so a SIGKILLed supervisor still takes the worker with it.
- The worker's stdout and stderr pass through it into the cell's log, capped: the first and the
  last bytes are kept, the cut is said in the log (a worker that floods cannot fill the disk).
- `--memory BYTES` (DL_BENCH_LOCAL_MEMORY): the resident memory of the worker and everything
  below it, checked at every turn of its loop (at least every POLL_S); above the limit they are
  all killed, the log says why, and the supervisor exits OUT_OF_MEMORY (the runner records oom).
  A check, not a cgroup: memory taken faster than a turn lasts is seen a turn later.

The standard library and psutil only (the runner's own interpreter runs it in isolated mode);
CappedLog is also the Docker executor's log writer. Linux: elsewhere prctl is missing and only
the process group is killed.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import os
import resource
import select
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass

PR_SET_PDEATHSIG = 1                 # linux/prctl.h
PR_SET_CHILD_SUBREAPER = 36
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
TERM_GRACE_S = 3.0                   # below the runner's own grace (local.KILL_GRACE_S)
POLL_S = 0.2
CHUNK = 65536
OUT_OF_MEMORY = 137                  # the exit code of a worker the kernel's OOM killer ended


class CappedLog:
    """A stream written into a file that keeps its first `head` and last `tail` bytes. Past the
    head, the output goes on into the file (the log stays live) and is compacted to its last
    `tail` bytes whenever it exceeds twice that, so the file never exceeds head + 2 × tail plus
    one line saying where and how much was cut. The file may already hold lines (the runner's
    notes): they are kept before the head."""

    NOTE = ("\n[runner: output cut here: {cut:>15} bytes left out; the log keeps the first "
            "{head} and the last {tail} bytes of the output]\n")

    def __init__(self, path: str | os.PathLike, head: int, tail: int):
        # O_NOFOLLOW: a link planted at the log's name is refused, not written through.
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        self.file = os.fdopen(fd, "r+b", buffering=0)
        self.file.seek(0, os.SEEK_END)
        self.head, self.tail = head, tail
        self.head_left = head
        self.note_at: int | None = None       # where the note starts, once something is cut
        self.tail_at = 0                      # where the kept tail starts (after the note)
        self.cut = 0                          # bytes left out so far

    def write(self, data: bytes) -> None:
        if self.head_left > 0:
            part, data = data[:self.head_left], data[self.head_left:]
            self.file.write(part)
            self.head_left -= len(part)
        if not data:
            return
        if self.note_at is None:
            self.note_at = self.file.tell()
            self._write_note()
            self.tail_at = self.file.tell()
        self.file.write(data)
        if self.file.tell() - self.tail_at > 2 * self.tail:
            self._compact()

    def close(self) -> None:
        if self.note_at is not None and self.file.tell() - self.tail_at > self.tail:
            self._compact()
        self.file.close()

    def _compact(self) -> None:
        """Keep the last `tail` bytes after the note; say in the note how much went."""
        end = self.file.tell()
        keep_from = max(self.tail_at, end - self.tail)
        self.file.seek(keep_from)
        kept = self.file.read(end - keep_from)
        self.cut += keep_from - self.tail_at
        assert self.note_at is not None     # compacting begins after the note is written
        self.file.seek(self.note_at)
        self._write_note()
        self.file.write(kept)
        self.file.truncate()

    def _write_note(self) -> None:
        self.file.write(self.NOTE.format(cut=self.cut, head=self.head, tail=self.tail).encode())


STOP_REQUESTED: list[int] = []      # the signals received (set by the handler)
OVER_MEMORY: list[int] = []          # the resident bytes seen above the limit, once


def request_stop(signum: int, frame) -> None:
    STOP_REQUESTED.append(signum)


def prctl(option: int, value: int) -> bool:
    """prctl(2) through libc; False where it is missing or refused (not Linux)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent(parent: int) -> None:
    """SIGTERM when the runner dies; and if it died before this was set, stop now."""
    prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        sys.exit(128 + signal.SIGTERM)


def make_worker_die_with_us():
    """preexec_fn for the worker: the libc function is resolved here, before the fork (the
    supervisor has one thread, so the child then only makes one foreign call)."""
    try:
        set_option = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6",
                                 use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return lambda: set_option(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def descendants() -> list:
    import psutil

    try:
        return psutil.Process().children(recursive=True)
    except psutil.Error:
        return []


def signal_all(victims: list, sig: int) -> None:
    import psutil

    for proc in victims:
        try:
            proc.send_signal(sig)        # psutil checks the pid still names that process
        except psutil.Error:
            pass


def reap(worker: subprocess.Popen) -> None:
    """Collect every child that exited (orphans re-parented to us included); the worker's own
    status goes to its Popen."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid == worker.pid:
            worker.returncode = os.waitstatus_to_exitcode(status)


def kill_everything_below(worker: subprocess.Popen) -> None:
    """SIGKILL every descendant until none is left (one that forks meanwhile is found in the
    next round: its parent is dead by then, so the child is ours)."""
    for _ in range(200):
        reap(worker)
        alive = [p for p in descendants() if _not_zombie(p)]
        if not alive:
            return
        signal_all(alive, signal.SIGKILL)
        time.sleep(0.01)


def _not_zombie(proc) -> bool:
    import psutil

    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def wake_on_signals() -> int:
    """A pipe the signal module writes to on every signal (a child's exit, SIGCHLD, included):
    the loop's select returns at once instead of at its next poll. Its read end."""
    wake_read, wake_write = os.pipe()
    for fd in (wake_read, wake_write):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    return wake_read


def resident_bytes() -> int:
    """The resident memory of every process below the supervisor."""
    import psutil

    total = 0
    for proc in descendants():
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            pass
    return total


def pump(read_fd: int, wake_fd: int, log: CappedLog, worker: subprocess.Popen,
         until: float | None = None, memory: int = 0) -> bool:
    """Copy the worker's output into the log until the worker exits (True), or until a stop is
    requested (no `until`), `until` (a monotonic time) passes, or the processes hold more than
    `memory` bytes (False). Output of escaped children can keep the pipe open, so the worker's
    exit is watched, not the pipe's end."""
    watched = [read_fd, wake_fd]
    while True:
        reap(worker)
        if worker.returncode is not None:
            return True
        if until is None and STOP_REQUESTED:
            return False
        if memory and (held := resident_bytes()) > memory:
            OVER_MEMORY.append(held)
            return False
        if until is not None and time.monotonic() >= until:
            return False
        ready, _, _ = select.select(watched, [], [], POLL_S)
        if wake_fd in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_fd, 4096)
        if read_fd in ready:
            data = os.read(read_fd, CHUNK)
            if data:
                log.write(data)
            else:                       # every writer closed its end: only the exit is left
                watched.remove(read_fd)


def drain(read_fd: int, log: CappedLog) -> None:
    """What is left in the pipe once every writer is dead."""
    while select.select([read_fd], [], [], 0)[0]:
        data = os.read(read_fd, CHUNK)
        if not data:
            return
        log.write(data)


def exit_as(returncode: int | None) -> None:
    """Exit with the worker's code, or die of the signal that killed it."""
    if returncode is None:
        sys.exit(1)
    if returncode >= 0:
        sys.exit(returncode)
    sig = -returncode
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))   # the worker's crash, not ours
    if sig not in (signal.SIGKILL, signal.SIGSTOP):     # those two keep their default anyway
        signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
    sys.exit(128 + sig)


@dataclass(frozen=True)
class Supervision:
    """What the supervisor is asked (its command line, parsed by `parse`)."""

    parent: int                 # the runner's pid: the supervisor dies with it
    log: str                    # the cell's log, capped to its first `head` and last `tail` bytes
    head: int
    tail: int
    command: list[str]          # the worker's command line
    memory: int = 0             # bytes the worker's processes may hold (0: no limit)


def supervise(job: Supervision) -> int | None:
    die_with_parent(job.parent)
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    for sig in STOP_SIGNALS:
        signal.signal(sig, request_stop)
    wake_fd = wake_on_signals()
    log = CappedLog(job.log, job.head, job.tail)
    read_fd, write_fd = os.pipe()
    try:
        try:
            worker = subprocess.Popen(job.command, stdin=subprocess.DEVNULL, stdout=write_fd,
                                      stderr=write_fd, preexec_fn=make_worker_die_with_us())
        except OSError as exc:
            log.write(f"[runner: could not start the worker: {exc}]\n".encode())
            return 127
        finally:
            os.close(write_fd)
        try:
            if not pump(read_fd, wake_fd, log, worker, memory=job.memory) and not OVER_MEMORY:
                signal_all(descendants(), signal.SIGTERM)   # stopped: TERM first, KILL later
                pump(read_fd, wake_fd, log, worker, until=time.monotonic() + TERM_GRACE_S)
        finally:
            kill_everything_below(worker)
            drain(read_fd, log)
        if OVER_MEMORY:
            log.write(f"\n[runner: the cell's processes held {OVER_MEMORY[0] / 2**20:.0f} MB, "
                      f"above the limit of {job.memory / 2**20:.0f} MB (DL_BENCH_LOCAL_MEMORY): "
                      "killed]\n".encode())
            return OUT_OF_MEMORY
        return worker.returncode
    finally:
        os.close(read_fd)
        log.close()


def parse(argv: list[str]) -> Supervision:
    parser = argparse.ArgumentParser(prog="supervisor")
    parser.add_argument("--parent", type=int, required=True, help="the runner's pid")
    parser.add_argument("--log", required=True)
    parser.add_argument("--head", type=int, required=True)
    parser.add_argument("--tail", type=int, required=True)
    parser.add_argument("--memory", type=int, default=0, help="bytes (0: no limit)")
    parser.add_argument("command", nargs="+")
    args = parser.parse_args(argv)
    return Supervision(args.parent, args.log, args.head, args.tail, args.command, args.memory)


def main(argv: list[str]) -> None:
    job = parse(argv)
    try:
        returncode = supervise(job)
    except Exception:  # said in the cell's log, where the runner looks
        with open(job.log, "a", encoding="utf-8") as log:
            log.write(f"[runner: the worker's supervisor failed]\n{traceback.format_exc()}")
        returncode = 1
    exit_as(returncode)


if __name__ == "__main__":
    main(sys.argv[1:])
