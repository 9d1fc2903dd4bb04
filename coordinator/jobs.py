"""What a job looks like from outside: statuses (str enums), priorities, and result records."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class JobState(str, Enum):
    QUEUED = "queued"          # submitted, no partition started yet
    RUNNING = "running"        # at least one partition started
    DONE = "done"              # every partition proved and verified by finalize
    FAILED = "failed"          # see JobStatus.error
    CANCELLED = "cancelled"

    @property
    def over(self) -> bool:
        return self in (JobState.DONE, JobState.FAILED, JobState.CANCELLED)


class SlotState(str, Enum):
    IDLE = "idle"              # finalize only: not elected yet
    SYNTH_SENDING = "synth_sending"  # inputs job: its witness synthesis message is being sent
    SYNTH_QUEUED = "synth_queued"    # ... on the synthesis queue
    SYNTHESIZING = "synthesizing"    # a worker computes its witness (under a lease)
    SENDING = "sending"        # message committed, being sent (the reaper re-sends if stuck)
    QUEUED = "queued"          # message on a queue
    RUNNING = "running"        # a worker holds the lease
    PROVED = "proved"          # result recorded, awaiting finalize
    VERIFIED = "verified"      # finalize accepted it (finalize slot: the job is done)
    FAILED = "failed"          # bad input: the job failed here

    @property
    def phase(self) -> str:
        """What a person watching cares about: synthesizing (waiting for or computing its
        witness), queued (witness ready, waiting for a prover), proving, proved, verified, failed."""
        if self in (SlotState.SYNTH_SENDING, SlotState.SYNTH_QUEUED, SlotState.SYNTHESIZING):
            return "synthesizing"
        if self in (SlotState.SENDING, SlotState.QUEUED, SlotState.IDLE):
            return "queued"
        return "proving" if self == SlotState.RUNNING else self.value


class Priority(str, Enum):
    """Job priorities; a critical partition starts before waiting normal ones."""

    CRITICAL = "critical"
    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"

    @property
    def broker_priority(self) -> int:
        # kombu's Redis transport serves 0 first, in steps of priority_steps.
        return {"critical": 0, "high": 3, "normal": 6, "low": 9}[self.value]


@dataclass
class PartitionResult:
    """One partition's verified proof (snarkjs proof.json / public.json objects) and provenance."""

    index: int
    proof: dict
    public_signals: list[str]
    fingerprint: dict
    timings_s: dict[str, float]
    worker: str
    attempt: int


@dataclass
class JobResult:
    """What Job.wait returns: every partition, verified, in index order."""

    job_id: str
    partitions: list[PartitionResult]
    timings_s: dict[str, float]
    bad_workers: list[dict] = field(default_factory=list)


@dataclass
class PartitionStatus:
    index: int
    state: SlotState
    attempts: int
    worker: str | None
    timings_s: dict[str, float]
    events: list[dict]
    synth_attempts: int = 0    # witness synthesis attempts (jobs submitted as inputs)

    @property
    def phase(self) -> str:
        """synthesizing, queued, proving, proved, verified or failed (SlotState.phase)."""
        return self.state.phase


@dataclass
class JobStatus:
    """A snapshot of a job: its state, each partition's, and the invalid proofs seen."""

    job_id: str
    state: JobState
    priority: Priority
    n_partitions: int
    created_at: float
    finished_at: float | None
    error: str | None
    error_slot: str | None
    partitions: list[PartitionStatus]
    timings_s: dict[str, float]
    bad_workers: list[dict]
    request_id: str | None = None

    def count(self, state: SlotState) -> int:
        return sum(1 for p in self.partitions if p.state == state)
