"""Every Redis key and channel zkqueue uses, built here and nowhere else.

Key schema (prefix ``zkq:``; ``{job}`` is a 32-hex job id; ``{slot}`` names one slot of
a job: ``0..n-1`` prove partition i, ``s0..s{n-1}`` compute partition i's witness (a job
submitted as circuit inputs), ``finalize`` verify every proof):

    zkq:job:{job}                  hash    the job record: state, priority, zkey (sha256), n,
                                           created_at, started_at, finished_at, error,
                                           error_slot, request_id, finalize_sent, verify_s, r1cs
                                           (sha256 or ""), all_or_nothing, failed (partitions
                                           failed alone), attempts, c:{kind}:{state} (how many
                                           slots of each kind are in each state: progress in
                                           one read), taken (running slots that left their
                                           holder other than by its record: batch leases fence
                                           again when it moves), and for an inputs job wasm
                                           (sha256) and wasm_name
    zkq:job:{job}:slot:{slot}      hash    one slot, every kind with the same fields: state,
                                           token, attempts, worker, pid, fingerprint,
                                           enqueued_at, started_at, run_deadline, finished_at,
                                           routed_to, excluded (space-separated worker ids),
                                           bounces, parked_since, parked_reason, affinity ("1"
                                           while it waits on the own queue of a worker holding
                                           its key), lost_worker and lost_pid (who made the
                                           attempt requeue.lua last requeued: refund.lua refunds
                                           it if that process turns out to have died of memory);
                                           a partition
                                           adds witness (sha256), witness_name, error (why it
                                           failed), invalid_fps, invalid_builds and invalid_by
                                           (fingerprints / builds / "build|worker" whose proofs
                                           of it failed verification); a witness slot adds input (sha256),
                                           input_name, unserved_since, and once done witness
                                           and synth_s
    zkq:job:{job}:results          hash    index -> JSON result (proof, public, fingerprint,
                                           timings_s, worker, attempt, and recorded_at: Redis's
                                           time of the record); written with HSETNX
    zkq:job:{job}:events           list    JSON attempt events (started, synth_started, proved,
                                           synthesized, lost, overdue, retry, invalid, bounced,
                                           resent, rerouted, quarantined, input_error, oom, done), in
                                           order; "slot" is the partition index or "finalize"
    zkq:job:{job}:unchecked        list    "{index}|{token}|{worker}|{witness}" of recorded proofs
                                           no other worker has verified yet (record.lua and
                                           record_batch.lua hand them to other workers to verify)
    zkq:job:{job}:checked          hash    index -> the token of its proof a worker other than its
                                           producer verified valid (finalize verifies the rest)
    zkq:job:{job}:bad              list    JSON records of invalid proofs: index, worker,
                                           fingerprint, reason, at
    zkq:job:{job}:notify           channel PUBLISHed on every state change of the job
    zkq:jobs                       zset    job -> created_at (for `zkqueue status`)
    zkq:request:{request_id}       string  -> job (idempotent submit)
    zkq:deadlines                  zset    "{job}|{slot}" -> Redis time at which the reaper acts:
                                           the lease expiry (never past the run deadline) of a
                                           running slot, the send grace of a slot whose message
                                           is being sent, the next message check of a queued one
    zkq:checks                     zset    "{job}|{slot}" -> when the reaper checks that a queued
                                           slot's message is still on its queue (apart from
                                           zkq:deadlines, which it serves first: no lease waits
                                           behind the checks of a long queue)
    zkq:routed                     zset    "{job}|{slot}" -> routed at: slots queued on one
                                           worker's own queue (re-routed if that worker dies)
    zkq:worker:{worker}            string  JSON heartbeat of a live worker, with a TTL
    zkq:workers                    zset    worker -> last heartbeat (listing, cleanup)
    zkq:reaper                     string  the reaper lock: owner token, with a TTL
    zkq:flower                     string  set while a `zkqueue flower` runs (a TTL it renews):
                                           workers then send Celery task events from the start
    zkq:fingerprints               hash    fingerprint id -> JSON fingerprint (of workers whose
                                           proofs failed verification)
    zkq:strikes                    hash    fingerprint id -> invalid proofs it made of witnesses
                                           another fingerprint then proved valid
    zkq:quarantine                 hash    fingerprint id -> JSON {fingerprint, strikes, at, reason}:
                                           workers with it take no work until an operator clears it
    zkq:canary_failed              hash    fingerprint id -> JSON {fingerprint, worker, reason,
                                           seconds, at}: builds whose start-up canary proof
                                           failed (coordinator/canary.py); cleared by a pass
    zkq:keyshape:{zkey}            hash    curve, domain_size, n_vars, n_public, zkey_bytes of a
                                           proving key (from its header, written at submit):
                                           what admission sizes a partition by
    zkq:holding:{worker}           string  JSON {keys: sha256s of the proving keys its key cache
                                           holds, busy: proving now}, written by its pool child
                                           around each partition (coordinator/affinity.py): where
                                           a partition of a key it does not hold may go instead
    zkq:toobig:{worker}            set     sha256s of the keys `worker` died of memory proving
                                           (the kernel's OOM killer took its pool child): its
                                           admission refuses them; expires with the result TTL
    zkq:runtime                    hash    "{zkey}|{device class}" -> moving average of proving
                                           seconds (sets how long an attempt may run)
    zkq:valid:{zkey}               hash    build -> when it last recorded a valid proof of this
                                           key (with the result TTL): a build that proves a
                                           key validly and fails one witness twice blames it
    zkq:dead                       list    JSON dead letters, newest first (coordinator/deadletter.py)
    zkq:dead:count                 string  dead letters recorded since the list was cleared

The HTTP API (api/, `zkqueue serve`) adds (``{key}`` is an API key's 12-hex id, ``{circuit}``
a circuit's 32-hex id):

    zkq:apikey:{key}               hash    an API key: name, secret_sha256 (the token's secret,
                                           hashed; the token itself is never stored),
                                           created_at, revoked_at, proofs_per_hour and
                                           max_upload_bytes (0: no limit of its own)
    zkq:apikeys                    zset    key -> created_at (`zkqueue api-keys list`)
    zkq:apikey:{key}:circuits      set     the circuits this key registered (all it may use)
    zkq:apikey:{key}:usage:{hour}  string  proofs requested in that clock hour (hours since the
                                           epoch), for the key's quota; expires after two hours
    zkq:circuit:{circuit}          hash    a registered circuit: zkey, wasm, r1cs, vk (sha256 of
                                           the files in the store; wasm and r1cs may be ""),
                                           wasm_name, curve, n_vars, n_public, domain_size,
                                           zkey_bytes, created_at
    zkq:artifact:{sha256}          string  JSON of what the API checked about a stored file
                                           (kind: zkey, wasm, r1cs, and its header's numbers),
                                           so a later upload naming it by hash skips the body

A job the API submits has the request id ``api/{key}/{circuit}/{idempotency key or a random
one}``: the job record itself says which key may see it and for which circuit, and the
API's idempotency keys cannot collide across API keys.

The Lua scripts (coordinator/lua/) get the job's own keys and the shared ones they name;
they build the names of a job's other keys (its slots, results, request) from the prefix,
in the formats above.

Celery queues (lists in the same Redis, named by kombu): ``zkq.prove`` shared by all
workers, ``zkq.w.{worker}``, one per worker, for retries routed away from a bad worker, and
``zkq.synth``: witness synthesis (circuit .wasm + input JSON -> .wtns), taken by CPU workers.
"""

from __future__ import annotations

PREFIX = "zkq"
FINALIZE_SLOT = "finalize"
QUEUE_PREFIX = "zkq."          # every Celery queue of zkqueue's starts so
SHARED_QUEUE = "zkq.prove"
SYNTH_QUEUE = "zkq.synth"
SYNTH_PREFIX = "s"          # slot "s{i}": partition i's witness synthesis
MEMBER_SEP = "|"


def job(job_id: str) -> str:
    return f"{PREFIX}:job:{job_id}"


def slot(job_id: str, slot_name: str | int) -> str:
    return f"{PREFIX}:job:{job_id}:slot:{slot_name}"


def results(job_id: str) -> str:
    return f"{PREFIX}:job:{job_id}:results"


def events(job_id: str) -> str:
    return f"{PREFIX}:job:{job_id}:events"


def checked(job_id: str) -> str:
    return f"{PREFIX}:job:{job_id}:checked"


def unchecked(job_id: str) -> str:
    return f"{PREFIX}:job:{job_id}:unchecked"


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


def checks() -> str:
    return f"{PREFIX}:checks"


def routed() -> str:
    return f"{PREFIX}:routed"


def worker(worker_id: str) -> str:
    return f"{PREFIX}:worker:{worker_id}"


def workers() -> str:
    return f"{PREFIX}:workers"


def reaper_lock() -> str:
    return f"{PREFIX}:reaper"


def flower() -> str:
    return f"{PREFIX}:flower"


def fingerprints() -> str:
    return f"{PREFIX}:fingerprints"


def strikes() -> str:
    return f"{PREFIX}:strikes"


def quarantine() -> str:
    return f"{PREFIX}:quarantine"


def canary_failed() -> str:
    return f"{PREFIX}:canary_failed"


def key_shape(zkey_sha: str) -> str:
    return f"{PREFIX}:keyshape:{zkey_sha}"


def holding(worker_id: str) -> str:
    return f"{PREFIX}:holding:{worker_id}"


def too_big(worker_id: str) -> str:
    return f"{PREFIX}:toobig:{worker_id}"


def runtime() -> str:
    return f"{PREFIX}:runtime"


def api_key(key_id: str) -> str:
    return f"{PREFIX}:apikey:{key_id}"


def api_keys() -> str:
    return f"{PREFIX}:apikeys"


def api_key_circuits(key_id: str) -> str:
    return f"{PREFIX}:apikey:{key_id}:circuits"


def api_key_usage(key_id: str, hour: int) -> str:
    return f"{PREFIX}:apikey:{key_id}:usage:{hour}"


def circuit(circuit_id: str) -> str:
    return f"{PREFIX}:circuit:{circuit_id}"


def artifact(sha: str) -> str:
    return f"{PREFIX}:artifact:{sha}"


def dead_letters() -> str:
    return f"{PREFIX}:dead"


def dead_letter_count() -> str:
    return f"{PREFIX}:dead:count"


def member(job_id: str, slot_name: str | int) -> str:
    """The deadlines/routed member naming one slot of one job."""
    return f"{job_id}{MEMBER_SEP}{slot_name}"


def synth_slot(index: int) -> str:
    """The slot that computes partition `index`'s witness ("s3")."""
    return f"{SYNTH_PREFIX}{index}"


def slot_kind(slot_name: str) -> str:
    """"prove" (a partition), "synth" (a witness to compute) or "finalize"."""
    if slot_name == FINALIZE_SLOT:
        return "finalize"
    return "synth" if slot_name.startswith(SYNTH_PREFIX) else "prove"


def partition_of(slot_name: str) -> str:
    """The partition index a slot serves ("s3" -> "3", "3" -> "3"), or "finalize"."""
    return slot_name[len(SYNTH_PREFIX):] if slot_kind(slot_name) == "synth" else slot_name


def parse_member(value: str) -> tuple[str, str]:
    """(job, slot) of a deadlines/routed member."""
    job_id, _, slot_name = value.partition(MEMBER_SEP)
    return job_id, slot_name


def worker_queue(worker_id: str) -> str:
    """The Celery queue only `worker_id` consumes."""
    return f"zkq.w.{worker_id}"
