"""One-line progress of a job for terminals (rewritten in place) and logs (on change)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from .jobs import JobProgress


def summary(p: JobProgress) -> str:
    """e.g. "job 3f2a…: running 2/4 proved, 1 running, 1 queued (5 attempts, 1 invalid)"; a job
    submitted as inputs also says how many are synthesizing ("2 synthesizing, ..."), and one
    with failed partitions how many ("1 failed, ...")."""
    extra = f", {p.invalid} invalid" if p.invalid else ""
    return (f"job {p.job_id[:12]}: {p.state.value} {p.proved}/{p.n_partitions} proved, "
            + (f"{p.failed} failed, " if p.failed else "")
            + (f"{p.synthesizing} synthesizing, " if p.synthesizing else "")
            + f"{p.running} running, {p.queued} queued ({p.attempts} attempts{extra})")


class Progress:
    """Callable for Job.wait(progress=...)."""

    def __init__(self, out: TextIO = sys.stderr):
        self.out = out
        self.tty = out.isatty()
        self.t0 = time.monotonic()
        self.last = ""

    def __call__(self, progress: JobProgress) -> None:
        line = summary(progress)
        if self.tty:
            self.out.write(f"\r\033[K{line} {time.monotonic() - self.t0:5.1f}s")
            self.out.flush()
        elif line != self.last:
            print(line, file=self.out, flush=True)
        self.last = line

    def done(self) -> None:
        if self.tty:
            self.out.write("\n")
            self.out.flush()
