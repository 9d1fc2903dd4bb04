"""The error tree of the queue (coordinator, tasks and workers raise these).

As in groth16/errors.py, each error says whether trying again (on the same worker) can help
(`retryable`, which tasks/outcomes.py reads) and carries what was expected and what was found.
ConfigError is the configuration module's (zkqueue/config.py), re-exported here.
"""

from __future__ import annotations

from zkqueue.config import ConfigError  # noqa: F401  (re-exported: the queue's error tree)


class ZkqueueError(Exception):
    """Base class of every error raised by the queue."""

    retryable = False

    def __init__(self, message: str, *, expected: object = None, found: object = None):
        self.expected = expected
        self.found = found
        super().__init__(message)


class BadRequest(ZkqueueError):
    """A submit that cannot be accepted: no witnesses, a missing file, an unknown priority."""


class StoreError(ZkqueueError):
    """The artifact store failed. A store fault is never the input's: the user's bytes were
    checked against their sha256 when they were put (tasks/outcomes.py retries it)."""

    retryable = True


class ArtifactMissing(StoreError):
    """An artifact named by a job is not in the store (a shared store may still be syncing,
    or it was removed as corrupt and no put has restored it yet)."""


class ArtifactCorrupt(StoreError):
    """Stored bytes do not hash to their name: the store damaged them (the client hashed what
    it put). The store removes the object, so the next put of the good bytes restores it."""


class JobError(ZkqueueError):
    """About one job; `job_id` names it."""

    def __init__(self, message: str, *, job_id: str, **kw):
        self.job_id = job_id
        super().__init__(message, **kw)


class JobNotFound(JobError):
    """No job with this id (never submitted, or expired)."""


class JobFailed(JobError):
    """The job failed; `reason` says why and `slot` names the partition when one is to blame."""

    def __init__(self, message: str, *, job_id: str, slot: str | None = None):
        self.reason = message
        self.slot = slot
        super().__init__(f"job {job_id} failed: {message}", job_id=job_id)


class JobLost(JobFailed):
    """The job's record is gone from Redis while it was awaited: Redis restarted without its
    data (or the record expired). The job cannot finish: submit it again."""

    def __init__(self, job_id: str):
        super().__init__("its record is gone from Redis: Redis may have restarted without its data "
                         "(or the record expired), so the job is lost; submit it again", job_id=job_id)


class JobCancelled(JobError):
    """The job was cancelled before it completed."""


class WaitTimeout(JobError, TimeoutError):
    """Job.wait ran out of time; the job goes on."""

    retryable = True
