"""One-line progress of a job for terminals (rewritten in place) and logs (on change)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from .jobs import JobStatus, SlotState


def summary(st: JobStatus) -> str:
    """e.g. "job 3f2a…: running 2/4 proved, 1 running, 1 queued (5 attempts, 1 invalid)"; a job
    submitted as inputs also says how many are synthesizing ("2 synthesizing, ...")."""
    done = st.count(SlotState.PROVED) + st.count(SlotState.VERIFIED)
    running = st.count(SlotState.RUNNING)
    queued = st.count(SlotState.QUEUED) + st.count(SlotState.SENDING)
    synth = sum(1 for p in st.partitions if p.state.phase == "synthesizing")
    attempts = sum(p.attempts for p in st.partitions)
    extra = f", {len(st.bad_workers)} invalid" if st.bad_workers else ""
    return (f"job {st.job_id[:12]}: {st.state.value} {done}/{st.n_partitions} proved, "
            + (f"{synth} synthesizing, " if synth else "")
            + f"{running} running, {queued} queued ({attempts} attempts{extra})")


class Progress:
    """Callable for Job.wait(progress=...)."""

    def __init__(self, out: TextIO = sys.stderr):
        self.out = out
        self.tty = out.isatty()
        self.t0 = time.monotonic()
        self.last = ""

    def __call__(self, st: JobStatus) -> None:
        line = summary(st)
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
