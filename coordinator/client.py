"""What client code imports: Client.submit -> Job; Job.wait / status / cancel."""

from __future__ import annotations

import json
import logging
import time
import uuid
from pathlib import Path
from typing import Callable, Iterable

import redis

from . import keys
from .errors import BadRequest, JobCancelled, JobFailed, JobLost, JobNotFound, WaitTimeout
from .jobs import (JobProgress, JobResult, JobState, JobStatus, PartitionFailure, PartitionResult,
                   PartitionStatus, Priority, SlotState)
from .claims import BATCHED_MAX_DOMAIN
from .keys import FINALIZE_SLOT
from .scheduler import Scheduler
from zkqueue.config import Settings
from .store import ArtifactStore

log = logging.getLogger("zkqueue.client")


def _s(v) -> str | None:
    return v.decode() if isinstance(v, bytes) else v


def _f(v) -> float | None:
    return float(v) if v not in (None, b"", "") else None


# A witness slot's state as its partition shows it while the witness is not there yet.
_WAITING_FOR_WITNESS = {"sending": SlotState.SYNTH_SENDING, "queued": SlotState.SYNTH_QUEUED,
                        "running": SlotState.SYNTHESIZING, "failed": SlotState.FAILED}


def _partition_state(slot: dict, synth: dict, job_state: str) -> SlotState:
    """A partition's state; one of an inputs job that waits for its witness shows how the
    witness is coming along. finish.lua leaves the slots of the partitions it verified as
    they were, `proved`: in a done job they are verified."""
    state = slot.get("state", "sending")
    if state == SlotState.PROVED and JobState(job_state).delivered:
        return SlotState.VERIFIED
    if state == "idle" and synth.get("state") in _WAITING_FOR_WITNESS:
        return _WAITING_FOR_WITNESS[synth["state"]]
    return SlotState(state)


# What result() reads of each partition's slot (and its witness's slot): what a result and
# its failures say (state, error, timings, worker), not the events or the whole record.
_RESULT_FIELDS = ("state", "attempts", "worker", "finished_at", "error", "witness_name", "parked_reason")
_RESULT_SYNTH_FIELDS = ("state", "attempts", "synth_s", "input_name")


def _fields_of(row: list, fields: tuple[str, ...]) -> dict:
    """An HMGET's reply as the HGETALL of those fields would be (absent ones left out)."""
    return {f: v for f, v in zip(fields, row) if v is not None}


def _priority(value: Priority | str) -> Priority:
    try:
        return Priority(value)
    except ValueError:
        raise BadRequest(f"unknown priority {value!r}", expected=[p.value for p in Priority], found=value) from None


class Client:
    """Submits proof requests and finds jobs.

    `redis_url` and `store_url` default to ZKQUEUE_REDIS_URL / ZKQUEUE_STORE_URL (then
    redis://127.0.0.1:6379/0 and a local directory). `new_job_id` makes the id of each new
    job (32 hex digits; default a random uuid4): coordinator/cells.py mints ids that name
    their cell.
    """

    def __init__(self, redis_url: str | None = None, store_url: str | None = None, *,
                 settings: Settings | None = None, new_job_id: Callable[[], str] | None = None):
        self.settings = settings or Settings.from_env(redis_url=redis_url, store_url=store_url)
        self.new_job_id = new_job_id or (lambda: uuid.uuid4().hex)
        self.scheduler = Scheduler(self.settings)
        self.r = self.scheduler.r
        self.store = ArtifactStore(self.settings.store_url)

    def close(self) -> None:
        self.scheduler.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def submit(self, zkey: str | Path, witnesses: Iterable[str | Path] | None = None, *,
               inputs: Iterable[dict | str | Path] | None = None, wasm: str | Path | None = None,
               r1cs: str | Path | None = None, priority: Priority | str = Priority.NORMAL,
               request_id: str | None = None, all_or_nothing: bool = False) -> "Job":
        """Stores the key and witnesses (content addressed) and enqueues one partition per witness.

        Or, with `inputs` (input.json objects or paths) and `wasm` (the circuit's circom .wasm)
        instead of witnesses: stores them and enqueues one witness synthesis per input; workers
        compute each witness and prove its partition as soon as it exists.

        `r1cs` (the circuit's .r1cs) lets a worker whose proof fails its own check name the
        constraint a bad witness breaks, at once. Each partition is an independent proof: one
        that fails (bad input) fails alone and the job delivers the others, unless
        `all_or_nothing` (then any failure fails the job).

        The same `request_id` again returns the first job, whatever the arguments.

        Raises:
            BadRequest: no witnesses (or inputs), both witnesses and inputs, inputs without a
                wasm (or a wasm without inputs), an unreadable file, an input that is not a JSON
                object, or an unknown priority.
            StoreError: the artifact store cannot be written.
            redis.RedisError, kombu.exceptions.OperationalError: Redis cannot be reached.
        """
        priority = _priority(priority)
        if inputs is not None or wasm is not None:
            if witnesses is not None:
                raise BadRequest("give either witnesses or inputs (with wasm), not both",
                                 expected="witnesses, or inputs + wasm", found="both")
            if wasm is None:
                raise BadRequest("inputs need the circuit's .wasm to compute their witnesses (wasm=...)",
                                 expected="wasm=path/to/circuit.wasm", found=None)
            inputs = list(inputs or [])
            if not inputs:
                raise BadRequest("a .wasm without inputs: give inputs=[input.json, ...]", expected=">= 1 input",
                                 found=0)
        else:
            witnesses = list(witnesses or [])
            if not witnesses:
                raise BadRequest("a job needs at least one witness", expected=">= 1", found=0)
        existing = self._existing(request_id)
        if existing:
            return existing
        common = dict(r1cs_sha=self.store.put_file(r1cs) if r1cs else "", priority=priority,
                      request_id=request_id, all_or_nothing=all_or_nothing)
        common["key_shape"] = _key_shape(zkey)
        if inputs:
            stored_inputs = self._store_inputs(inputs)       # checked here, not on a worker
            return self.submit_stored(self.store.put_file(zkey), inputs=stored_inputs,
                                      wasm_sha=self.store.put_file(wasm), wasm_name=Path(wasm).name, **common)
        return self.submit_stored(self.store.put_file(zkey),
                                  witnesses=[(self.store.put_file(w), Path(w).name) for w in witnesses], **common)

    def _store_inputs(self, inputs: list) -> list[tuple[str, str]]:
        """Stores each input JSON (an object or a file), checked to be a JSON object:
        (sha256, name) pairs."""
        from zkqueue.groth16.errors import FormatError
        from zkqueue.groth16.witness import parse_inputs

        stored = []
        for i, item in enumerate(inputs):
            if isinstance(item, dict):
                name, data = f"inputs[{i}]", json.dumps(item).encode()
            elif isinstance(item, (str, Path)):
                name = str(item)
                try:
                    data = Path(item).read_bytes()
                except OSError as exc:
                    raise BadRequest(f"{name}: cannot read: {exc.strerror or exc}", found=name) from None
            else:
                raise BadRequest(f"inputs[{i}]: expected a dict or the path of an input.json",
                                 expected="dict or path", found=type(item).__name__)
            try:
                parse_inputs(data, source=name)
            except FormatError as exc:
                raise BadRequest(str(exc), expected="a JSON object of signal names to values", found=name) from None
            stored.append((self.store.put_bytes(data), name))
        return stored

    def _existing(self, request_id: str | None) -> "Job | None":
        """The job of a request id seen before (checked before anything is stored)."""
        if not request_id:
            return None
        existing = self.r.get(keys.request(request_id))
        return Job(self, _s(existing)) if existing else None

    def submit_stored(self, zkey_sha: str, *, witnesses: list[tuple[str, str]] | None = None,
                      inputs: list[tuple[str, str]] | None = None, wasm_sha: str = "", wasm_name: str = "",
                      r1cs_sha: str = "", priority: Priority | str = Priority.NORMAL,
                      request_id: str | None = None, all_or_nothing: bool = False,
                      key_shape: dict | None = None) -> "Job":
        """As submit, for files already in the artifact store, named by sha256: the key, and
        one witness per partition as (sha256, file name) pairs, or the circuit's .wasm
        (`wasm_sha`, `wasm_name`) and one input JSON per partition as (sha256, name) pairs;
        `r1cs_sha` optionally. Nothing is read or hashed again, which matters for a key of
        gigabytes (the HTTP API submits this way); the caller has checked the files.
        `key_shape` (the key header's curve, domain_size, n_vars, n_public and zkey_bytes) lets
        workers size a partition before they fetch the key (memory admission).

        The same `request_id` again returns the first job, whatever the arguments.

        Raises:
            BadRequest: neither or both of witnesses and inputs, inputs without a wasm, or an
                unknown priority.
            redis.RedisError, kombu.exceptions.OperationalError: Redis cannot be reached.
        """
        priority = _priority(priority)
        if bool(witnesses) == bool(inputs):
            raise BadRequest("give either witnesses or inputs, at least one", expected="witnesses or inputs",
                             found="both" if witnesses else "neither")
        if inputs and not wasm_sha:
            raise BadRequest("inputs need the circuit's .wasm to compute their witnesses",
                             expected="wasm_sha", found=None)
        existing = self._existing(request_id)
        if existing:
            return existing
        if key_shape:
            self.scheduler.record_key_shape(zkey_sha, key_shape)
        # A small key's partitions go in batches (one message each, claimed in one transition);
        # a key of unknown size, one by one.
        small = bool(key_shape) and int(key_shape.get("domain_size", BATCHED_MAX_DOMAIN + 1)) <= BATCHED_MAX_DOMAIN
        out = self.scheduler.submit(self.new_job_id(), request_id=request_id, priority=priority, zkey_sha=zkey_sha,
                                    witnesses=list(witnesses or []), inputs=list(inputs or []),
                                    wasm_sha=wasm_sha if inputs else "", wasm_name=wasm_name if inputs else "",
                                    r1cs_sha=r1cs_sha, all_or_nothing=all_or_nothing,
                                    batch=self.settings.submit_batch if small else 1)
        return Job(self, out.job_id)

    def job(self, job_id: str) -> "Job":
        """The job with this id.

        Raises:
            JobNotFound: no such job (never submitted, or expired).
        """
        if not self.r.exists(keys.job(job_id)):
            raise JobNotFound(f"no job {job_id}", job_id=job_id)
        return Job(self, job_id)

    def recent_jobs(self, limit: int = 20) -> list["Job"]:
        """The most recently submitted jobs that still exist, newest first (forgetting those
        whose records expired)."""
        ids = [_s(j) for j in self.r.zrevrange(keys.jobs(), 0, limit - 1)]
        gone = [job_id for job_id, exists in zip(ids, self._exist(ids)) if not exists]
        if gone:
            self.r.zrem(keys.jobs(), *gone)
        return [Job(self, job_id) for job_id in ids if job_id not in gone]

    def _exist(self, job_ids: list[str]) -> list[bool]:
        with self.r.pipeline(transaction=False) as p:
            for job_id in job_ids:
                p.exists(keys.job(job_id))
            return [bool(x) for x in p.execute()]

    def workers(self) -> list[dict]:
        """Heartbeats of the live workers (worker id, fingerprint, pids, queue)."""
        return self.scheduler.registry.live()


class Job:
    """A submitted job. Cheap to create; every call reads Redis."""

    def __init__(self, client: Client, job_id: str):
        self.client = client
        self.id = job_id

    def __repr__(self) -> str:
        return f"Job({self.id})"

    def progress(self) -> JobProgress:
        """How far the job has come: counts from its record alone (one round trip, whatever
        the number of partitions).

        Raises:
            JobNotFound: no such job.
        """
        with self.client.r.pipeline(transaction=False) as p:
            p.hgetall(keys.job(self.id))
            p.llen(keys.bad(self.id))
            rec, invalid = p.execute()
        if not rec:
            raise JobNotFound(f"no job {self.id}", job_id=self.id)
        return JobProgress.from_record(self.id, {_s(k): _s(v) for k, v in rec.items()}, invalid)

    def status(self) -> JobStatus:
        """The job's state, and each partition's state, attempts, worker, timings and events
        (reads every partition: for watching a job, progress() costs one read).

        Raises:
            JobNotFound: no such job.
        """
        return self._status()[0]

    def _status(self, *, with_events: bool = True) -> tuple[JobStatus, dict[str, dict]]:
        """status(), and the recorded results it read (by index, as text), which result()
        returns without reading them twice.

        `with_events=False` (result()): no partition's events, and of each slot only the fields a
        result uses (_RESULT_FIELDS), not its whole record: at 10,000 partitions the events
        and records were most of what the client read (about 15 MB) after the job ended; and
        no slot of a partition whose stamped result holds them already."""
        r = self.client.r
        rec = {_s(k): _s(v) for k, v in r.hgetall(keys.job(self.id)).items()}
        if not rec:
            raise JobNotFound(f"no job {self.id}", job_id=self.id)
        n = int(rec["n"])
        from_inputs = bool(rec.get("wasm"))
        def read(p, key: str, fields: tuple[str, ...]) -> None:
            if with_events:
                p.hgetall(key)
            else:
                p.hmget(key, *fields)

        with r.pipeline(transaction=False) as p:
            p.hgetall(keys.results(self.id))
            if with_events:
                p.lrange(keys.events(self.id), 0, -1)
            p.lrange(keys.bad(self.id), 0, -1)
            results, *rest = p.execute()
        events, bad = (rest[0], rest[1]) if with_events else ([], rest[0])
        results = {_s(k): json.loads(v) for k, v in results.items()}
        # result() of a job that delivered: a partition whose proof is recorded needs nothing of
        # its slot that its result does not hold (its worker, attempt, and the time of its
        # record, stamped by record.lua), so only the other slots are read: the failed ones,
        # with their reasons (and, for an inputs job, every witness's, for its timing).
        stamped = not with_events and JobState(rec["state"]).delivered
        from_results = {i for i in range(n) if stamped and "recorded_at" in results.get(str(i), {})}
        with r.pipeline(transaction=False) as p:
            for i in range(n):
                if i not in from_results:
                    read(p, keys.slot(self.id, i), _RESULT_FIELDS)
                if from_inputs:
                    read(p, keys.slot(self.id, keys.synth_slot(i)), _RESULT_SYNTH_FIELDS)
            rows = iter(p.execute())

        def row(fields: tuple[str, ...]) -> dict:
            raw = next(rows)
            return raw if with_events else _fields_of(raw, fields)

        slots = []
        for i in range(n):
            if i in from_results:
                res = results[str(i)]
                slots.append({"state": SlotState.PROVED.value, "attempts": res["attempt"], "worker": res["worker"],
                              "finished_at": res["recorded_at"]})
            else:
                slots.append(row(_RESULT_FIELDS))
            if from_inputs:
                slots.append(row(_RESULT_SYNTH_FIELDS))
        # Each partition's events, in order: grouped once (not one pass over all events per
        # partition, which costs n x events at 10,000 partitions).
        by_slot: dict[str, list[dict]] = {}
        for e in (json.loads(raw) for raw in events):
            by_slot.setdefault(str(e.get("slot")), []).append(e)
        created = float(rec["created_at"])
        step = 2 if from_inputs else 1
        parts = []
        for i in range(n):
            s = {_s(k): _s(v) for k, v in slots[step * i].items()}
            synth = {_s(k): _s(v) for k, v in slots[step * i + 1].items()} if from_inputs else {}
            res = results.get(str(i))
            timings = dict(res["timings_s"]) if res else {}
            if s.get("finished_at") and res:
                timings["total_s"] = float(s["finished_at"]) - created
            if synth.get("synth_s"):
                timings["synth_s"] = float(synth["synth_s"])
            parts.append(PartitionStatus(
                index=i, state=_partition_state(s, synth, rec["state"]), attempts=int(s.get("attempts", 0)),
                worker=(res or {}).get("worker") or s.get("worker"), timings_s=timings,
                events=by_slot.get(str(i), []),
                synth_attempts=int(synth.get("attempts", 0)), error=s.get("error") or None,
                source=s.get("witness_name") or synth.get("input_name") or None,
                waiting=s.get("parked_reason") if s.get("state") == "parked" else None))
        timings = self._timings(rec, created, list(results.values()))
        if rec.get("wasm"):      # witnesses computed by workers: their total synthesis time
            timings["synth_s"] = sum(p.timings_s.get("synth_s", 0.0) for p in parts)
        return JobStatus(
            job_id=self.id, state=JobState(rec["state"]), priority=Priority(rec["priority"]),
            n_partitions=n, created_at=created, finished_at=_f(rec.get("finished_at")),
            error=rec.get("error") or None, error_slot=rec.get("error_slot") or None, partitions=parts,
            timings_s=timings,
            bad_workers=[json.loads(b) for b in bad], request_id=rec.get("request_id") or None), results

    @staticmethod
    def _timings(rec: dict, created: float, results: list[dict]) -> dict[str, float]:
        t: dict[str, float] = {}
        if rec.get("started_at"):
            t["queued_s"] = float(rec["started_at"]) - created
        if results:
            t["key_load_s"] = sum(r["timings_s"].get("key_load_s", 0.0) for r in results)
            t["prove_s"] = sum(r["timings_s"].get("prove_s", 0.0) for r in results)
        if rec.get("verify_s"):
            t["verify_s"] = float(rec["verify_s"])
        if rec.get("finished_at"):
            t["total_s"] = float(rec["finished_at"]) - created
        return t

    def cancel(self) -> bool:
        """Cancels the job: queued partitions are dropped, running ones finish unrecorded.
        False when it was already over.

        Raises:
            JobNotFound: no such job.
        """
        if not self.client.r.exists(keys.job(self.id)):
            raise JobNotFound(f"no job {self.id}", job_id=self.id)
        return self.client.scheduler.cancel(self.id)

    def wait(self, timeout_s: float | None = None, *,
             progress: Callable[[JobProgress], None] | None = None) -> JobResult:
        """Blocks until the job is over and returns every verified proof (and, for a job done
        with failures, each failed partition with its reason: JobResult.failed).

        `progress`, if given, is called with a fresh JobProgress on every change (and at
        least every second). Waiting costs the same few Redis commands per change whatever
        the job's size; only the result at the end reads every partition.

        Raises:
            JobFailed: with the reason (naming the partition when one is to blame).
            JobLost: the job's record is gone from Redis (Redis lost its data): it cannot finish.
            JobCancelled: the job was cancelled.
            WaitTimeout: `timeout_s` passed first (the job goes on).
        """
        r = self.client.r
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        pubsub = None
        try:
            while True:
                left = None if deadline is None else deadline - time.monotonic()
                try:
                    if pubsub is None:
                        pubsub = r.pubsub(ignore_subscribe_messages=True)
                        # Subscribe before reading the state, so a change in between is not missed.
                        pubsub.subscribe(keys.notify(self.id))
                    try:
                        now = self.progress()
                    except JobNotFound:
                        raise JobLost(self.id) from None
                    state = now.state
                    if progress is not None:
                        progress(now)
                    if state.over:
                        break
                    if left is not None and left <= 0:
                        raise WaitTimeout(f"job {self.id} is still {state.value} after {timeout_s:g} s",
                                          job_id=self.id)
                    if pubsub.get_message(timeout=min(1.0, left) if left is not None else 1.0):
                        # Changes that came meanwhile: the next read covers them all.
                        while pubsub.get_message(timeout=0):
                            pass
                except (redis.ConnectionError, redis.TimeoutError) as exc:
                    # Redis restarting or briefly unreachable: the job goes on; keep waiting.
                    if left is not None and left <= 0:
                        raise
                    log.warning("waiting for job %s: redis unreachable (%s); retrying", self.id, exc)
                    if pubsub is not None:
                        pubsub.close()
                        pubsub = None
                    time.sleep(1.0)
        finally:
            if pubsub is not None:
                pubsub.close()
        return self.result()

    def result(self) -> JobResult:
        """The result of a job that is over: its verified proofs, and its failed partitions.

        Raises:
            JobFailed, JobCancelled: as for wait(); JobFailed too when the job is not over yet.
            JobNotFound: no such job.
        """
        st, results = self._status(with_events=False)
        if st.state == JobState.FAILED:
            raise JobFailed(st.error or "unknown reason", job_id=self.id, slot=st.error_slot)
        if st.state == JobState.CANCELLED:
            raise JobCancelled(f"job {self.id} was cancelled", job_id=self.id)
        if not st.state.delivered:
            raise JobFailed(f"not finished ({st.state.value})", job_id=self.id)
        parts, failed = [], []
        for p in st.partitions:
            if p.state != SlotState.VERIFIED:
                failed.append(PartitionFailure(index=p.index, reason=p.error or p.state.value))
                continue
            res = results[str(p.index)]
            timings = dict(res["timings_s"])
            timings.update(p.timings_s)
            parts.append(PartitionResult(index=p.index, proof=res["proof"], public_signals=res["public"],
                                         fingerprint=res["fingerprint"], timings_s=timings,
                                         worker=res["worker"], attempt=res["attempt"]))
        return JobResult(job_id=self.id, partitions=parts, timings_s=st.timings_s,
                         bad_workers=st.bad_workers, failed=failed)


__all__ = ["Client", "Job", "FINALIZE_SLOT"]


def _key_shape(zkey: str | Path) -> dict | None:
    """The numbers of a .zkey's header that size its partitions, or None when it is no readable
    Groth16 key (then the worker that takes a partition fails it, naming the file, as bad input)."""
    from zkqueue.groth16.errors import Groth16Error
    from zkqueue.groth16.formats.zkey import read_header
    try:
        header = read_header(zkey)
    except (Groth16Error, OSError):
        return None
    return {"curve": header.curve.name, "domain_size": header.domain_size, "n_vars": header.n_vars,
            "n_public": header.n_public, "zkey_bytes": len(header.file.data)}
