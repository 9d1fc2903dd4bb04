"""What the scheduler façade hands back: typed transition replies and the records it reads.

A transition script answers with a Lua table of strings (coordinator/transitions.py's
`Outcome`); coordinator/scheduler.py parses each script's answer once into one of these, so
callers read `claim.attempt` or `lost.overdue`, never `detail[2] == "1"`. Every reply has a
`kind`, the script's own word for what happened ("ok", "stale", "send", "lost", ...): a
caller that only cares whether it went through compares that.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar


@dataclass(frozen=True)
class Reply:
    """A transition that did not go through, or went through with nothing more to say:
    `kind` ("stale", "job_over", "busy", "excluded", "quarantined", "parked", "failed",
    "retry", "unsatisfied", "none", "gave_up", ...) and `why`, what the script added (the
    slot's state, the current token, the worker holding it, the quarantined fingerprint,
    how a witness was judged; "" when nothing)."""

    kind: str
    why: str = ""


@dataclass(frozen=True)
class Submitted:
    """submit: the job `job_id`, created now, or the earlier job of the same request id."""

    job_id: str
    created: bool

    @property
    def kind(self) -> str:
        return "created" if self.created else "exists"


@dataclass(frozen=True)
class Claimed:
    """claim: the attempt started; `started_at` is Redis's clock (as the slot's enqueued_at);
    `slot`: the slot's record as it was claimed (Scheduler.slot_record, read in the same
    transition)."""

    attempt: int
    started_at: float
    slot: "SlotRecord | None" = None
    # The job's `taken` count after the claim, as text: the fence a record of this attempt
    # gives (Scheduler.record's `claim`), so that it reads no slot while nothing was taken since.
    taken: str = ""
    kind: ClassVar[str] = "ok"


@dataclass(frozen=True)
class Sent:
    """requeue, reroute, witness_ready: the slot (for witness_ready, its partition) was sent
    again under the new `token`."""

    token: int
    kind: ClassVar[str] = "send"


@dataclass(frozen=True)
class Recorded:
    """record: the proof is stored. `finalize_token` is the finalize step this record elected
    (the scheduler has sent it), None when partitions are still open; `quarantined` the
    fingerprints quarantined now because this proof showed their proofs of it wrong."""

    finalize_token: int | None = None
    quarantined: tuple[str, ...] = ()
    # Other workers' proofs this worker is to verify now (independent checks as proofs are
    # recorded, so that finalize verifies only the rest): ToCheck items.
    to_check: tuple["ToCheck", ...] = field(default=(), compare=False)
    kind: ClassVar[str] = "recorded"


@dataclass(frozen=True)
class ToCheck:
    """Another worker's recorded proof to verify: its partition, the token it was recorded
    under, its witness (sha256) and the result as its worker stored it (JSON text)."""

    index: int
    token: int
    witness: str
    result: str


@dataclass(frozen=True)
class Reproved:
    """reprove: the partitions sent again, each with its new token ({index: token}); those
    whose attempts were spent failed instead and are not here."""

    sent: dict[int, int] = field(default_factory=dict)
    kind: ClassVar[str] = "send"


# -- the reaper's decisions (reap.lua) -----------------------------------------------------

@dataclass(frozen=True)
class Resend:
    """A message never confirmed sent: send it again, same token, to `route` ("" = shared)."""

    token: int
    route: str
    kind: ClassVar[str] = "resend"


@dataclass(frozen=True)
class Lost:
    """A running attempt's lease expired (`overdue`: it ran past its run deadline while its
    lease was refreshed: hung) on `worker`."""

    token: int
    worker: str
    overdue: bool
    kind: ClassVar[str] = "lost"


@dataclass(frozen=True)
class Check:
    """A queued message due for a look: is it still on its queue (`route`: the worker's own)?"""

    token: int
    route: str
    kind: ClassVar[str] = "check"


@dataclass(frozen=True)
class Parked:
    """A parked slot due for a look: is an eligible worker alive now?"""

    token: int
    kind: ClassVar[str] = "parked"


# -- records the tasks read ------------------------------------------------------------------

@dataclass(frozen=True)
class JobFiles:
    """A job's files in the artifact store, by sha256 ("" for none)."""

    zkey: str
    wasm: str
    wasm_name: str
    r1cs: str


@dataclass(frozen=True)
class SlotRecord:
    """What a task reads of one slot: its files, when it was last enqueued (Redis's clock),
    and who it has blamed (the builds whose proofs of it failed, the workers excluded, the
    fingerprints whose proofs of it failed)."""

    witness: str
    witness_name: str
    input: str
    input_name: str
    enqueued_at: float | None
    invalid_builds: tuple[str, ...]
    excluded: tuple[str, ...]
    invalid_fps: tuple[str, ...] = ()


@dataclass(frozen=True)
class Proved:
    """A recorded partition result (as its worker stored it), the witness it proves, and
    whether a worker other than its producer verified it already (under its current token)."""

    result: dict
    witness: str
    checked: bool = False
