"""Every Redis key and channel zkqueue uses, built here and nowhere else.

Key schema (prefix ``zkq:``; ``{job}`` is a 32-hex job id, ``{slot}`` a partition index
``0..n-1`` or the literal ``finalize``):

    zkq:job:{job}                  hash    the job record: state, priority, zkey (sha256), n,
                                           created_at, started_at, finished_at, error,
                                           error_slot, request_id, finalize_sent, verify_s
    zkq:job:{job}:slot:{slot}      hash    one partition (or the finalize step): state, token,
                                           attempts, witness (sha256), worker, pid, fingerprint,
                                           enqueued_at, started_at, run_deadline, finished_at,
                                           routed_to, excluded (space-separated worker ids),
                                           bounces, orphaned_since, invalid_fps and
                                           invalid_builds (fingerprints / builds whose proofs
                                           of this slot failed verification)
    zkq:job:{job}:results          hash    index -> JSON result (proof, public, fingerprint,
                                           timings_s, worker, attempt); written with HSETNX
    zkq:job:{job}:events           list    JSON attempt events (started, proved, lost, overdue,
                                           retry, invalid, bounced, resent, rerouted,
                                           quarantined, input_error, done), in order
    zkq:job:{job}:bad              list    JSON records of invalid proofs: index, worker,
                                           fingerprint, reason, at
    zkq:job:{job}:notify           channel PUBLISHed on every state change of the job
    zkq:jobs                       zset    job -> created_at (for `zkqueue status`)
    zkq:request:{request_id}       string  -> job (idempotent submit)
    zkq:deadlines                  zset    "{job}|{slot}" -> Redis time at which the reaper acts:
                                           the lease expiry (never past the run deadline) of a
                                           running slot, the send grace of a slot whose message
                                           is being sent, the next message check of a queued one
    zkq:routed                     zset    "{job}|{slot}" -> routed at: slots queued on one
                                           worker's own queue (re-routed if that worker dies)
    zkq:worker:{worker}            string  JSON heartbeat of a live worker, with a TTL
    zkq:workers                    zset    worker -> last heartbeat (listing, cleanup)
    zkq:reaper                     string  the reaper lock: owner token, with a TTL
    zkq:fingerprints               hash    fingerprint id -> JSON fingerprint (of workers whose
                                           proofs failed verification)
    zkq:strikes                    hash    fingerprint id -> invalid proofs it made of witnesses
                                           another fingerprint then proved valid
    zkq:quarantine                 hash    fingerprint id -> JSON {fingerprint, strikes, at, reason}:
                                           workers with it take no work until an operator clears it
    zkq:runtime                    hash    "{zkey}|{device class}" -> moving average of proving
                                           seconds (sets how long an attempt may run)

The Lua scripts (coordinator/lua/) receive these names as KEYS/ARGV. Two rebuild names
themselves, in the same formats: deadline members "{job}|{slot}" for every slot of a job,
and, to expire an ended job, its keys from the prefix zkq:job:{job} and zkq:request:.

Celery queues (lists in the same Redis, named by kombu): ``zkq.prove`` shared by all
workers, ``zkq.w.{worker}``, one per worker, for retries routed away from a bad worker, and
``zkq.synth``: witness synthesis (circuit .wasm + input JSON -> .wtns), taken by CPU workers.

Synthesis (jobs submitted as inputs): the job hash adds wasm (sha256) and wasm_name; a slot
starts in synth_sending -> synth_queued -> synthesizing, with input (sha256), input_name,
synth_token, synth_attempts, synth_worker, synth_pid, synth_started_at, synth_run_deadline,
synth_finished_at, synth_s; its deadline is the member "{job}|s{i}" of zkq:deadlines. Once
its witness is stored it is an ordinary partition (sending, token 1).
"""

from __future__ import annotations

PREFIX = "zkq"
FINALIZE_SLOT = "finalize"
SHARED_QUEUE = "zkq.prove"
SYNTH_QUEUE = "zkq.synth"
SYNTH_PREFIX = "s"          # deadline member "{job}|s{i}": partition i's synthesis
MEMBER_SEP = "|"


def job(job_id: str) -> str:
    return f"{PREFIX}:job:{job_id}"


def slot(job_id: str, slot_name: str | int) -> str:
    return f"{PREFIX}:job:{job_id}:slot:{slot_name}"


def results(job_id: str) -> str:
    return f"{PREFIX}:job:{job_id}:results"


def events(job_id: str) -> str:
    return f"{PREFIX}:job:{job_id}:events"


def bad(job_id: str) -> str:
    return f"{PREFIX}:job:{job_id}:bad"


def notify(job_id: str) -> str:
    return f"{PREFIX}:job:{job_id}:notify"


def jobs() -> str:
    return f"{PREFIX}:jobs"


def request(request_id: str) -> str:
    return f"{PREFIX}:request:{request_id}"


def deadlines() -> str:
    return f"{PREFIX}:deadlines"


def routed() -> str:
    return f"{PREFIX}:routed"


def worker(worker_id: str) -> str:
    return f"{PREFIX}:worker:{worker_id}"


def workers() -> str:
    return f"{PREFIX}:workers"


def reaper_lock() -> str:
    return f"{PREFIX}:reaper"


def fingerprints() -> str:
    return f"{PREFIX}:fingerprints"


def strikes() -> str:
    return f"{PREFIX}:strikes"


def quarantine() -> str:
    return f"{PREFIX}:quarantine"


def runtime() -> str:
    return f"{PREFIX}:runtime"


def member(job_id: str, slot_name: str | int) -> str:
    """The deadlines/routed member naming one slot of one job."""
    return f"{job_id}{MEMBER_SEP}{slot_name}"


def synth_member(job_id: str, index: int) -> str:
    """The deadlines member of partition `index`'s witness synthesis."""
    return f"{job_id}{MEMBER_SEP}{SYNTH_PREFIX}{index}"


def synth_index(slot_name: str) -> int | None:
    """The partition index of a synthesis member's slot part ("s3" -> 3), None for any other."""
    if slot_name.startswith(SYNTH_PREFIX) and slot_name[len(SYNTH_PREFIX):].isdigit():
        return int(slot_name[len(SYNTH_PREFIX):])
    return None


def parse_member(value: str) -> tuple[str, str]:
    """(job, slot) of a deadlines/routed member."""
    job_id, _, slot_name = value.partition(MEMBER_SEP)
    return job_id, slot_name


def worker_queue(worker_id: str) -> str:
    """The Celery queue only `worker_id` consumes."""
    return f"zkq.w.{worker_id}"


def all_job_keys(job_id: str, n_partitions: int) -> list[str]:
    """Every key of one job (for expiry once it is over)."""
    slots = [slot(job_id, i) for i in range(n_partitions)] + [slot(job_id, FINALIZE_SLOT)]
    return [job(job_id), results(job_id), events(job_id), bad(job_id), *slots]
