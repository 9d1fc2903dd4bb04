"""What a job looks like from outside: statuses (str enums), priorities, and result records."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class JobState(str, Enum):
    QUEUED = "queued"          # submitted, no partition started yet
    RUNNING = "running"        # at least one partition started
    DONE = "done"              # every partition proved and verified by finalize
    DONE_WITH_FAILURES = "done-with-failures"   # the others verified; some failed alone (their error)
    FAILED = "failed"          # see JobStatus.error
    CANCELLED = "cancelled"

    @property
    def over(self) -> bool:
        return self not in (JobState.QUEUED, JobState.RUNNING)

    @property
    def delivered(self) -> bool:
        """Whether the job delivers verified proofs (all of them, or those that did not fail)."""
        return self in (JobState.DONE, JobState.DONE_WITH_FAILURES)


class SlotState(str, Enum):
    IDLE = "idle"              # finalize only: not elected yet
    SYNTH_SENDING = "synth_sending"  # inputs job: its witness synthesis message is being sent
    SYNTH_QUEUED = "synth_queued"    # ... on the synthesis queue
    SYNTHESIZING = "synthesizing"    # a worker computes its witness (under a lease)
    SENDING = "sending"        # message committed, being sent (the reaper re-sends if stuck)
    QUEUED = "queued"          # message on a queue
    RUNNING = "running"        # a worker holds the lease
    PARKED = "parked"          # no eligible worker is alive for it: waits holding no worker
    PROVED = "proved"          # result recorded, awaiting finalize
    VERIFIED = "verified"      # finalize accepted it (finalize slot: the job is done)
    FAILED = "failed"          # it cannot be proved (bad input, attempts spent): see its error

    @property
    def phase(self) -> str:
        """What a person watching cares about: synthesizing (waiting for or computing its
        witness), queued (witness ready, waiting for a prover), proving, proved, verified, failed."""
        if self in (SlotState.SYNTH_SENDING, SlotState.SYNTH_QUEUED, SlotState.SYNTHESIZING):
            return "synthesizing"
        if self in (SlotState.SENDING, SlotState.QUEUED, SlotState.IDLE, SlotState.PARKED):
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
class PartitionFailure:
    """A partition that failed alone: its index, why (naming the file and the evidence)."""

    index: int
    reason: str


@dataclass
class JobResult:
    """What Job.wait returns: every verified partition in index order, and those that failed
    alone (empty for a job that is done; a job done with failures has both)."""

    job_id: str
    partitions: list[PartitionResult]
    timings_s: dict[str, float]
    bad_workers: list[dict] = field(default_factory=list)
    failed: list[PartitionFailure] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Every partition was proved and verified."""
        return not self.failed


@dataclass
class PartitionStatus:
    index: int
    state: SlotState
    attempts: int
    worker: str | None
    timings_s: dict[str, float]
    events: list[dict]
    synth_attempts: int = 0    # witness synthesis attempts (jobs submitted as inputs)
    error: str | None = None   # why it failed, when it did
    source: str | None = None  # the file its witness (or its input) came from
    waiting: str | None = None  # why it waits holding no worker (parked), e.g. the memory it needs

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


@dataclass
class JobProgress:
    """How far a job has come, from its record alone: one read whatever its size, so that
    waiting and progress displays cost the same for 4 partitions or 10,000 (the scripts keep
    the counts; Job.status() reads every partition when that is wanted)."""

    job_id: str
    state: JobState
    n_partitions: int
    proved: int            # proved or verified
    failed: int            # failed alone (bad input, attempts spent)
    running: int
    queued: int            # waiting for a worker (sending, queued, parked)
    synthesizing: int      # witness not computed yet (jobs submitted as inputs)
    attempts: int
    invalid: int           # proofs that failed verification (self-check or finalize)
    error: str | None = None   # why the job failed, when it did

    @classmethod
    def from_record(cls, job_id: str, rec: dict[str, str], invalid: int) -> "JobProgress":
        """From the job hash (decoded) and the length of its list of invalid proofs."""
        def count(kind: str, *states: str) -> int:
            return sum(int(rec.get(f"c:{kind}:{s}", 0)) for s in states)
        return cls(job_id=job_id, state=JobState(rec["state"]), n_partitions=int(rec["n"]),
                   proved=count("prove", "proved", "verified"), failed=int(rec.get("failed", 0)),
                   running=count("prove", "running"), queued=count("prove", "sending", "queued", "parked"),
                   synthesizing=count("synth", "sending", "queued", "running", "parked"),
                   attempts=int(rec.get("attempts", 0)), invalid=invalid, error=rec.get("error") or None)
