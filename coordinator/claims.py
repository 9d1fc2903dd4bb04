"""The batch claim's reply, typed (coordinator/lua/claim_batch.lua; Scheduler.claim_batch).

A batch is B partitions of one job (so of one key) that one worker starts in one transition.
Each member keeps everything a partition claimed alone has: its own token, attempt count,
lease and run deadline; the worker refreshes, records, retries or gives back each member by
its own (index, token), through the same transitions as any other attempt.
"""

from __future__ import annotations

from dataclasses import dataclass

# Keys up to this domain (2^16 constraints) are small enough to batch: a client sends one
# message per `submit_batch` partitions of such a key (coordinator/client.py), and workers
# prove batches of them (workers/batching.py's MAX_BATCHED_LOG2, which must agree).
BATCHED_MAX_DOMAIN = 1 << 16

# Fields of each member's slot record in claim_batch.lua's reply (Scheduler.slot_records's).
RECORD_FIELDS = 8

# Why the lead partition could not be claimed (then nothing was): as claim.lua says.
REFUSALS = ("job_over", "stale", "done", "busy", "excluded", "quarantined", "gave_up")


@dataclass(frozen=True)
class Member:
    """One partition of a batch: its index, the token it was claimed under, its attempt."""

    index: int
    token: int
    attempt: int


@dataclass(frozen=True)
class BatchClaim:
    """What claim_batch decided.

    `kind` is "ok" (then `members` holds the lead first, and `started_at` is Redis's time of
    the claim) or one of REFUSALS (then `members` is empty and `detail` says more, as
    claim.lua's reply: the current token for "stale", the holder for "busy", ...).
    """

    kind: str
    members: tuple[Member, ...] = ()
    started_at: float = 0.0
    detail: tuple[str, ...] = ()
    # Each member's slot record as read in the claim, as text in Scheduler.slot_records's
    # field order (Scheduler.claim_batch turns them into SlotRecords: `slots`).
    records: tuple[tuple[str, ...], ...] = ()
    # The job's `taken` count after the claim and the members' run deadline, as text: the fence
    # the batch's first lease refresh starts from (Scheduler.refresh_batch's `fence`).
    fence: tuple[str, str] = ("", "")

    @property
    def ok(self) -> bool:
        return self.kind == "ok"

    @property
    def lead(self) -> Member:
        """The partition whose message started this claim."""
        return self.members[0]

    @classmethod
    def from_reply(cls, kind: str, detail: tuple[str, ...]) -> "BatchClaim":
        """Parses the script's reply (its first item split off as `kind`).

        Raises:
            ValueError: an "ok" reply whose members are not (index, token, attempt) triples.
        """
        if kind != "ok":
            return cls(kind, detail=detail)
        started_at, fence, rest = float(detail[0]), (detail[2], detail[3]), detail[4:]
        step = 3 + RECORD_FIELDS
        if not rest or len(rest) % step:
            raise ValueError(f"claim_batch.lua replied {detail!r}: members are not (index, token, attempt, "
                             f"{RECORD_FIELDS} record fields) groups")
        groups = [rest[i:i + step] for i in range(0, len(rest), step)]
        members = tuple(Member(int(g[0]), int(g[1]), int(g[2])) for g in groups)
        return cls(kind, members, started_at, records=tuple(tuple(g[3:]) for g in groups), fence=fence)
