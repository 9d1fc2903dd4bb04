"""The one façade over the job state machine: each transition, then the messages it calls for.

The client (submit), the tasks (claim, refresh, record, requeue, ...; and what they read
of a job: its files, a slot's record, the recorded results) and the reaper call these
methods and nothing below them. Each method first commits its transition (a Lua script, run
by coordinator/transitions.py), then sends what it calls for, then marks the slot queued;
a crash in between leaves a `sending` deadline that the reaper acts on. Each script's raw
reply is parsed here, once, into a typed one (coordinator/replies.py).

Slots are named as in coordinator/keys.py: "3" proves partition 3, "s3" computes its
witness, "finalize" verifies every proof; every kind goes through the same transitions.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable

import redis

from zkqueue.config import Settings

from . import affinity, connections, keys
from .broker import RETRY_PRIORITY, Sender, queue_depths
from .claims import BatchClaim
from .jobs import Priority
from .keys import FINALIZE_SLOT
from .registry import Registry
from .replies import (Check, Claimed, JobFiles, Lost, Parked, Proved, Recorded, Reply, Reproved, Resend, Sent,
                      SlotRecord, Submitted, ToCheck)
from .transitions import Outcome, Transitions

log = logging.getLogger("zkqueue.scheduler")

# How a script's reply ends when it elected the finalize step (prelude.lua's done()):
# "finalize=<token>". Read here alone (_run), and sent at once.
ELECTED = "finalize="
# claim_batch.lua reads at most this many slots per partition it may take: a bounded scan
# (O(batch), whatever the job's size) that still skips partitions others hold.
BATCH_SCAN_FACTOR = 4
# How many sent slots of a submit one arm_checks.lua call arms: the script's run time grows
# with it, and Redis serves nobody else meanwhile.
ARM_CHUNK = 256
# What a worker keeps of what it read: the files of its last jobs (they never change), and the
# measured runtimes for a few seconds.
JOB_FILES_CACHED = 64
RUNTIME_CACHED_S = 5.0


def connect(settings: Settings) -> redis.Redis:
    """A Redis client for `settings.redis_url` (coordinator/connections.py: TLS, the role's
    user, Sentinel; socket timeouts so a dead Redis is an error, not a hang)."""
    return connections.client(settings)


def what(slot) -> str:
    """A slot in words, for messages: "partition 3", "synthesis 3", "finalize"."""
    slot = str(slot)
    kind = keys.slot_kind(slot)
    return {"prove": f"partition {slot}", "synth": f"synthesis {keys.partition_of(slot)}"}.get(kind, slot)


class Scheduler:
    """The state machine, the sender and the worker registry over one Redis.

    Every method raises redis.RedisError when Redis cannot be reached; those that send raise
    kombu.exceptions.OperationalError when the broker cannot take the message (the slot
    stays `sending` and the reaper sends it later).
    """

    def __init__(self, settings: Settings, client: redis.Redis | None = None):
        self.settings = settings
        self.r = client or connect(settings)
        self.transitions = Transitions(self.r, settings)
        self.registry = Registry(self.r, ttl_s=settings.heartbeat_ttl_s)
        self._sender: Sender | None = None
        self._job_files: dict[str, JobFiles] = {}
        self._runtime: dict[str, tuple[float, tuple[float | None, float | None]]] = {}

    @property
    def sender(self) -> Sender:
        if self._sender is None:
            self._sender = Sender(self.settings)
        return self._sender

    def close(self) -> None:
        if self._sender is not None:
            self._sender.close()
        self.r.close()

    # -- sending ---------------------------------------------------------------------------

    def priority_of(self, job_id: str) -> int:
        raw = self.r.hget(keys.job(job_id), "priority")
        return Priority(raw.decode() if raw else "normal").broker_priority

    def send(self, job_id: str, slot, token: int, *, route_to: str = "", priority: int | None = None) -> None:
        """Sends the message of (slot, token), whatever its kind, and marks it queued."""
        self._send_message(job_id, str(slot), token, route_to=route_to, priority=priority)
        self.transitions.run("mark_sent", job_id, FINALIZE_SLOT, sent=[[str(slot), token]])

    def send_all(self, job_id: str, slots, token: int, *, priority: int, batch: int = 1) -> None:
        """Sends the message of each of `slots` (a submit's: created queued under `token`),
        ARM_CHUNK slots at a time: their messages in one pipeline (Sender.held), then one
        transition that arms their queued checks and reads and writes no slot. A crash
        before a chunk is armed leaves its slots' first checks at send_grace_s: the reaper
        finds their messages on no queue and sends them again (same token; a duplicate
        message finds its slot busy or done).

        `batch` > 1 (partitions only, consecutive indices): one prove_batch message per
        `batch` partitions rather than one per partition; its worker claims them in one
        transition (claim_batch.lua's range mode)."""
        slots = [str(slot) for slot in slots]
        if batch > 1 and any(keys.slot_kind(slot) != "prove" for slot in slots):
            raise ValueError("only partitions are sent in batches")
        chunk: list[str] = []
        step = max(1, batch)
        with self.sender.held() as push:
            for at in range(0, len(slots), step):
                group = slots[at:at + step]
                if len(group) > 1:
                    self.sender.send_batch(job_id, int(group[0]), len(group), token, priority=priority)
                else:
                    self._send_message(job_id, group[0], token, priority=priority)
                chunk.extend(group)
                if len(chunk) >= ARM_CHUNK or at + step >= len(slots):
                    push()
                    self.transitions.run("arm_checks", job_id, FINALIZE_SLOT, slots=chunk)
                    chunk = []

    def _send_message(self, job_id: str, slot: str, token: int, *, route_to: str = "",
                      priority: int | None = None) -> None:
        kind = keys.slot_kind(slot)
        if kind == "finalize":
            self.sender.send_finalize(job_id, token, route_to=route_to)
        else:
            if priority is None:
                priority = self.priority_of(job_id)
            if kind == "synth":
                self.sender.send_synthesis(job_id, int(keys.partition_of(slot)), token, priority=priority)
            else:
                self.sender.send_partition(job_id, int(slot), token, priority=priority, route_to=route_to)

    def _send_if(self, out: Outcome, job_id: str, slot, *, route_to: str = "", priority: int | None = None
                 ) -> Sent | Reply:
        """A {'send', token} reply: sends the slot under its new token."""
        if out.kind != "send":
            return _reply(out)
        sent = Sent(int(out.detail[0]))
        self.send(job_id, slot, sent.token, route_to=route_to, priority=priority)
        return sent

    def _run(self, name: str, job_id: str, slot, **args) -> Outcome:
        """Runs a transition; when it settled the job (every partition ended) and elected the
        finalize step, sends finalize. Returns the raw reply without the election."""
        return self._elect(job_id, self.transitions.run(name, job_id, slot, **args))[0]

    def _elect(self, job_id: str, out: Outcome) -> tuple[Outcome, int | None]:
        """Sends the finalize step a transition's raw reply elected, if it did. Returns the
        reply without the election, and the elected token (None when none)."""
        if out.detail and out.detail[-1].startswith(ELECTED):
            token = int(out.detail[-1][len(ELECTED):])
            self.send(job_id, FINALIZE_SLOT, token)
            return Outcome(out.kind, out.detail[:-1]), token
        return out, None

    # -- a job's life ----------------------------------------------------------------------

    def submit(self, job_id: str, *, request_id: str | None, priority: Priority, zkey_sha: str,
               witnesses: list[tuple[str, str]] = (), inputs: list[tuple[str, str]] = (), wasm_sha: str = "",
               wasm_name: str = "", r1cs_sha: str = "", all_or_nothing: bool = False, batch: int = 1) -> Submitted:
        """Creates the job and sends its first messages: one per partition (`witnesses`:
        (sha256, file name) pairs; `batch` > 1: one per `batch` consecutive partitions), or
        with `inputs` (the same pairs of input JSON) one witness to compute per partition.
        Returns the job created, or the earlier job of `request_id` (created False)."""
        out = self.transitions.run("submit", job_id, FINALIZE_SLOT, request_id=request_id or "",
                                   priority=priority.value, zkey=zkey_sha,
                                   witnesses=[{"sha": sha, "name": name} for sha, name in witnesses],
                                   inputs=[{"sha": sha, "name": name} for sha, name in inputs],
                                   wasm=wasm_sha, wasm_name=wasm_name, r1cs=r1cs_sha,
                                   all_or_nothing=all_or_nothing)
        submitted = Submitted(out.detail[0], created=out.kind == "created")
        if submitted.created:
            first = [keys.synth_slot(i) for i in range(len(inputs))] if inputs else range(len(witnesses))
            self.send_all(job_id, first, 1, priority=priority.broker_priority, batch=1 if inputs else batch)
        return submitted

    def record_key_shape(self, zkey_sha: str, shape: dict) -> None:
        """Keeps what admission sizes a partition by: the key's curve, domain_size, n_vars,
        n_public and zkey_bytes (its .zkey header's numbers), for as long as results are kept."""
        with self.r.pipeline(transaction=False) as p:
            p.hset(keys.key_shape(zkey_sha), mapping={k: str(v) for k, v in shape.items()})
            p.expire(keys.key_shape(zkey_sha), int(self.settings.result_ttl_s))
            p.execute()

    def key_shape(self, zkey_sha: str) -> dict[str, str]:
        """The numbers record_key_shape kept for this key ({} when none were)."""
        return {_text(k): _text(v) for k, v in self.r.hgetall(keys.key_shape(zkey_sha)).items()}

    def cancel(self, job_id: str) -> bool:
        """Cancels a job that is not over; False when it already was."""
        return self.transitions.run("cancel", job_id, FINALIZE_SLOT).kind == "1"     # 1 or 0

    # -- an attempt ------------------------------------------------------------------------

    def claim(self, job_id: str, slot, token: int, worker: str, pid: int, *, fingerprint_id: str = "",
              run_s: float | None = None) -> Claimed | Reply:
        """Starts an attempt (Claimed: its number, when), or says why not (Reply): job_over
        (why: the job's state), stale (the current token), done (the slot's state), busy
        (the worker holding it), excluded (the excluded workers), quarantined (why: this
        worker's fingerprint), gave_up (its attempts were spent: it failed). The attempt is
        overdue after `run_s` (default: the configured partition timeout), whatever its lease
        refreshes say."""
        out = self._run("claim", job_id, slot, token=token, worker=worker, pid=pid, fingerprint=fingerprint_id,
                           run_s=self.settings.partition_timeout_s if run_s is None else run_s)
        if out.kind == "ok":
            end = 2 + len(_SLOT_FIELDS)
            return Claimed(attempt=int(out.detail[0]), started_at=float(out.detail[1]),
                           slot=_slot_record(*out.detail[2:end]), taken=out.detail[end])
        return _reply(out)

    def claim_batch(self, job_id: str, index: int, token: int, worker: str, pid: int, *, max_batch: int,
                    fingerprint_id: str = "", run_s: float | None = None, count: int = 0) -> BatchClaim:
        """Starts attempts on partition `index` (under `token`, as claim() would) and on up to
        `max_batch` - 1 queued partitions of the same job after it, each under its own token
        (coordinator/lua/claim_batch.lua). Every member's attempt is overdue after `run_s`
        (the whole batch's time; default: the configured partition timeout).

        `count` > 0 (a prove_batch message): partitions index .. index + count - 1 instead,
        each one still waiting under `token` (kind "none" when no member could be taken)."""
        out = self._run("claim_batch", job_id, index, token=token, worker=worker, pid=pid,
                        fingerprint=fingerprint_id, max_batch=max(1, int(max_batch)),
                        scan=BATCH_SCAN_FACTOR * max(1, int(max_batch)), count=max(0, int(count)),
                        run_s=self.settings.partition_timeout_s if run_s is None else run_s)
        return BatchClaim.from_reply(out.kind, out.detail)

    def refresh(self, job_id: str, slot, token: int, worker: str) -> str:
        """Extends the lease: "ok", "overdue" (past its run deadline), "lost" (someone else
        owns the slot now) or "job_over"."""
        return self.transitions.run("refresh", job_id, slot, token=token, worker=worker).kind

    def refresh_batch(self, job_id: str, members: list[tuple[int, int]], worker: str,
                      fence: dict | None = None) -> list[str]:
        """refresh() of each (index, token) of a batch this worker holds, in one transition:
        a verdict per member, in order ("ok", "overdue", "lost"), or ["job_over"].

        `fence`: the same dict for every refresh of one batch; it keeps what the last full
        check returned, so that a refresh reads no member while nothing in the job has been
        taken from its holder since (refresh_batch.lua). None: every member is read."""
        fence = {} if fence is None else fence
        out = self.transitions.run("refresh_batch", job_id, members[0][0],
                                   members=[[int(i), int(t)] for i, t in members], worker=worker,
                                   seen=fence.get("seen", ""), run_until=fence.get("run_until", ""))
        if out.kind == "job_over":
            return ["job_over"]
        fence["seen"], fence["run_until"] = out.kind, out.detail[0]
        return list(out.detail[1:])

    def record(self, job_id: str, index: int, token: int, worker: str, payload: dict, *,
               fingerprint: dict, runtime_field: str = "", prove_s: float = 0.0, key_load_s: float = 0.0,
               checked: list[tuple[int, int]] = (), take: int = 0, claim: Claimed | None = None) -> Recorded | Reply:
        """Stores a partition's proof once (sending finalize when every partition has now
        ended); strikes the fingerprints whose proofs of this partition failed; folds the
        timings into the runtime averages (in the same transition). Returns Recorded, or
        Reply "duplicate", "stale" or "job_over".

        Independent checks ride along: `checked` marks other workers' proofs of this job this
        worker verified valid ((index, token) pairs), and up to `take` proofs of other
        workers come back in Recorded.to_check for this worker to verify.

        `claim`: this attempt's own claim (under `token`, by `worker`). While nothing in the
        job has been taken from its holder since (the job's `taken` count is the claim's),
        the slot is still this attempt's and record.lua reads none of it (its fence and what
        the claim read stand); otherwise, or without it, the slot is read and fenced."""
        seen, attempt, witness, invalid_fps = "", 0, "", ""
        if claim is not None and claim.slot is not None:
            seen, attempt, witness = claim.taken, claim.attempt, claim.slot.witness
            invalid_fps = " ".join(claim.slot.invalid_fps)
        out, elected = self._elect(job_id, self.transitions.run(
            "record", job_id, index, token=token, worker=worker, payload=json.dumps(payload),
            build=_word(fingerprint.get("build", "")), field=runtime_field, prove_s=prove_s,
            key_load_s=key_load_s, checked=[[int(i), int(t)] for i, t in checked], take=int(take),
            seen=seen, attempt=attempt, witness=witness, invalid_fps=invalid_fps))
        if out.kind != "recorded":
            return _reply(out)
        fps, to_check = _split_checks(out.detail)
        quarantined: tuple[str, ...] = ()
        if fps:      # the fingerprints whose proofs of this partition failed before
            struck = self.transitions.run("strike", job_id, index, fingerprints=list(fps),
                                          confirmed_by=fingerprint.get("id", ""))
            # strike.lua answers a bare list of the fingerprints it quarantined (maybe empty).
            quarantined = (struck.kind, *struck.detail) if struck.kind else ()
        return Recorded(finalize_token=elected, quarantined=quarantined, to_check=to_check)

    def record_batch(self, job_id: str, members: list[tuple[int, int, dict]], worker: str, *, fingerprint: dict,
                     runtime_field: str = "", prove_s: float = 0.0, key_load_s: float = 0.0,
                     checked: list[tuple[int, int]] = (), take: int = 0,
                     claim: BatchClaim | None = None) -> dict[int, Recorded | Reply]:
        """record() of several members of a batch ((index, token, payload) each; `prove_s`:
        seconds per proof) in one transition (record_batch.lua). Returns by index what
        record() would have: Recorded (the one that elected finalize holds its token; every
        one holds the same to_check), or Reply "duplicate", "stale" or "job_over".

        `claim`: the batch's own claim, as record()'s: while the job's `taken` count is the
        claim's, no member is read."""
        rows = [[int(i), int(t), json.dumps(payload)] for i, t, payload in members]
        seen = ""
        if claim is not None and claim.ok:
            held = {m.index: (m, record) for m, record in zip(claim.members, self.claimed_slots(claim))}
            if all(row[0] in held and held[row[0]][0].token == row[1] for row in rows):
                seen = claim.fence[0]
                for row in rows:
                    member, record = held[row[0]]
                    row += [member.attempt, record.witness, " ".join(record.invalid_fps)]
        out, elected = self._elect(job_id, self.transitions.run(
            "record_batch", job_id, members[0][0], worker=worker, members=rows, seen=seen,
            build=_word(fingerprint.get("build", "")), field=runtime_field, prove_s=prove_s,
            key_load_s=key_load_s, checked=[[int(i), int(t)] for i, t in checked], take=int(take)))
        if out.kind != "batch":
            return {int(i): _reply(out) for i, _, _ in members}
        verdicts, to_check = _split_checks(out.detail)
        replies: dict[int, Recorded | Reply] = {}
        for (index, _, _), verdict in zip(members, verdicts):
            kind, _, fps = verdict.partition(":")
            if kind != "recorded":
                replies[int(index)] = Reply(kind, "")
                continue
            quarantined: tuple[str, ...] = ()
            if fps:     # the fingerprints whose proofs of this partition failed before
                struck = self.transitions.run("strike", job_id, index, fingerprints=fps.split(","),
                                              confirmed_by=fingerprint.get("id", ""))
                quarantined = (struck.kind, *struck.detail) if struck.kind else ()
            replies[int(index)] = Recorded(finalize_token=elected, quarantined=quarantined, to_check=to_check)
        return replies

    def witness_ready(self, job_id: str, index: int, token: int, worker: str, witness_sha: str,
                      synth_s: float) -> Sent | Reply:
        """Hands a computed witness to its partition and sends the prove message: Sent (the
        partition's token), or Reply "stale" or "job_over"."""
        out = self._run("witness_ready", job_id, keys.synth_slot(index), token=token, worker=worker,
                           witness=witness_sha, synth_s=synth_s)
        return self._send_if(out, job_id, index)

    def fail_input(self, job_id: str, slot, token: int, worker: str, reason: str) -> bool:
        """Fails the partition now (bad input: not retried; the job too when it is
        all-or-nothing). False when the attempt was not current or the job was over."""
        out = self._run("fail_input", job_id, slot, token=token, worker=worker, reason=reason)
        return out.kind == "failed"

    def suspect(self, job_id: str, index: int, token: int, worker: str, fingerprint: dict,
                reason: str) -> Reply:
        """This attempt's proof failed its own verification: "retry" (the worker is excluded;
        the caller passes the slot on), "unsatisfied" (why: how it was judged; the partition
        failed), "stale", "job_over"."""
        out = self._run("suspect", job_id, index, token=token, worker=worker,
                           fingerprint_id=fingerprint.get("id", ""), build=_word(fingerprint.get("build", "")),
                           fingerprint=json.dumps(fingerprint), reason=reason)
        return _reply(out)

    def requeue(self, job_id: str, slot, token: int, *, event: str, reason: str, exclude: str = "",
                route_to: str = "", require_expired: bool = False, refund: bool = False) -> Sent | Reply:
        """A running attempt ended without a result (an attempt spent, unless `refund`: it died
        of memory): sends the slot again, ahead of fresh work. Sent (the new token), or Reply
        "failed" (attempts spent: the partition failed with `reason`, or the job for
        finalize), "stale", "skip" (why: the slot's state, or "lease alive"), "job_over"."""
        out = self._run("requeue", job_id, slot, token=token, event=event, reason=reason, exclude=exclude,
                        route=route_to, require_expired=require_expired, refund=refund)
        # A retry goes ahead of fresh work: it has waited its turn once already, and its job's
        # other partitions may all be done.
        return self._send_if(out, job_id, slot, route_to=route_to, priority=RETRY_PRIORITY)

    def reroute(self, job_id: str, slot, token: int, *, states: str, event: str, reason: str,
                route_to: str = "", affinity: bool = False) -> Sent | Reply:
        """Sends the slot to another worker (`route_to`'s own queue, or the shared one when
        "") without spending an attempt; `affinity`: because that worker holds its key (the
        reaper sends it back to the shared queue if it is not taken within affinity_wait_s).
        Returns as requeue()."""
        out = self._run("reroute", job_id, slot, token=token, states=states, event=event, reason=reason,
                        route=route_to, affinity=affinity)
        return self._send_if(out, job_id, slot, route_to=route_to, priority=RETRY_PRIORITY)

    def park(self, job_id: str, slot, token: int, *, states: str, reason: str, needs: dict | None = None) -> Reply:
        """No eligible worker is alive for the slot: it waits with no message and holding no
        worker; the reaper sends it on when one appears (with `needs`: one that has that much
        memory, see eligible_workers), or gives it up with `reason` after orphan_timeout_s.
        Returns "parked", "stale", "skip" (why: the slot's state) or "job_over"."""
        out = self._run("park", job_id, slot, token=token, states=states, reason=reason,
                        needs=json.dumps(needs) if needs else "")
        return _reply(out)

    def hand_on(self, job_id: str, slot, token: int, *, leaving: str, states: str, event: str, reason: str,
                parked_reason: str, needs: dict | None = None) -> Sent | Reply:
        """Sends the slot to a live, eligible worker other than `leaving` and those excluded
        from it (with `needs`, one with that much memory), or parks it with `parked_reason`
        when there is none."""
        others = self.eligible_workers(self.excluded(job_id, slot) | {leaving}, needs=needs)
        if others:
            return self.reroute(job_id, slot, token, states=states, event=event, reason=reason,
                                route_to=random.choice(others))
        return self.park(job_id, slot, token, states=states, reason=parked_reason, needs=needs)

    def resend(self, job_id: str, slot, token: int, *, orphan_tag: str = "") -> bool:
        """A queued slot's message is missing, or (`orphan_tag`) its unacknowledged copy lost
        its consumer (dropped here): sends it again with the same token. True when it did."""
        out = self.transitions.run("resend", job_id, slot, token=token, tag=orphan_tag)
        if out.kind != "resend":
            return False
        self.send(job_id, slot, token, route_to=out.detail[0])     # {'resend', route}
        return True

    def unserved(self, job_id: str, slot, token: int, *, reason: str) -> str:
        """A queued witness slot whose message waits while live workers exist; `reason` says
        why none of them takes synthesis ("" when one does): "waiting", "served", "failed"
        (the job, after orphan_timeout_s) or "skip"."""
        out = self._run("unserved", job_id, slot, token=token, unserved=bool(reason), reason=reason)
        return out.kind

    def reap(self, job_id: str, slot) -> Resend | Lost | Check | Parked | Reply:
        """The reaper's decision for a slot whose deadline passed: Resend, Lost, Check,
        Parked, or Reply "none" (nothing to do) or "gave_up" (parked too long: it failed)."""
        out = self._run("reap", job_id, slot)
        d = out.detail
        if out.kind == "resend":
            return Resend(token=int(d[0]), route=d[1])
        if out.kind == "lost":
            return Lost(token=int(d[0]), worker=d[1], overdue=d[2] == "1")
        if out.kind == "check":
            return Check(token=int(d[0]), route=d[1])
        if out.kind == "parked":
            return Parked(token=int(d[0]))
        return _reply(out)

    def recheck(self, members: list[str]) -> tuple[list[tuple[str, str, int]], list[str]]:
        """Queued slots whose checks are due ("{job}|{slot}" members of zkq:checks): re-arms
        each one still queued, in one transition for all of them (recheck.lua). Returns the
        (job, slot, token) of those, whose messages the reaper looks for, and the members
        that are not queued any more, for reap() one by one."""
        if not members:
            return [], []
        job_id, _ = keys.parse_member(members[0])
        out = self.transitions.run("recheck", job_id, FINALIZE_SLOT, members=members)
        n = int(out.kind)
        d = out.detail
        checks = [(d[4 * i], d[4 * i + 1], int(d[4 * i + 2])) for i in range(n)]
        return checks, list(d[4 * n:])

    # -- finalize --------------------------------------------------------------------------

    def reprove(self, job_id: str, token: int, bad: list[dict]) -> Reproved | Reply:
        """Finalize found invalid proofs: drops them, excludes their workers and sends each
        partition again (to item["route_to"]); one whose attempts are spent fails. `bad` items:
        index, worker, fingerprint, reason, route_to. Returns Reproved, or Reply "stale" or
        "job_over"."""
        out = self._run("reprove", job_id, FINALIZE_SLOT, token=token, bad=[
            {"index": b["index"], "worker": b["worker"], "fingerprint_id": (b["fingerprint"] or {}).get("id", ""),
             "fingerprint": json.dumps(b["fingerprint"] or {}), "reason": b["reason"], "route": b["route_to"]}
            for b in bad])
        if out.kind != "send":
            return _reply(out)
        # {'send', index, token, index, token, ...}
        reproved = Reproved({int(i): int(t) for i, t in zip(out.detail[0::2], out.detail[1::2])})
        routes = {int(b["index"]): b["route_to"] for b in bad}
        for index, tok in reproved.sent.items():
            self.send(job_id, index, tok, route_to=routes[index])
        return reproved

    def finish(self, job_id: str, finalize_token: int, verify_s: float) -> bool:
        """Marks the job done (finalize verified every proved partition), or done with
        failures when some partitions failed alone. False if it was not current."""
        out = self.transitions.run("finish", job_id, FINALIZE_SLOT, token=finalize_token, verify_s=verify_s)
        return out.kind == "1"

    # -- where work may go -----------------------------------------------------------------

    def eligible_workers(self, excluded: set[str], *, needs: dict | None = None) -> list[str]:
        """Live workers outside `excluded` whose fingerprint is not quarantined and, with
        `needs` (bytes by backend, "cpu" and "cuda", and "device" for a GPU's own memory), whose
        heartbeat shows the memory to hold the partition (see has_room)."""
        quarantined = {q.decode() for q in self.r.hkeys(keys.quarantine())}
        return [b["worker"] for b in self.registry.live()
                if b.get("worker") not in excluded and (b.get("fingerprint") or {}).get("id") not in quarantined
                and (not needs or has_room(b, needs))]

    def publish_holding(self, worker: str, held: list[str], *, busy: bool) -> None:
        """Records the keys `worker`'s key cache holds, and whether it proves now (key affinity:
        coordinator/affinity.py)."""
        affinity.publish(self.r, worker, held, busy=busy)

    def holder_for(self, job_id: str, slot, zkey_sha: str, worker: str, *, prove_s: float | None,
                   load_s: float | None, evicts: bool = False) -> str:
        """The live, eligible worker other than `worker` that holds `zkey_sha` loaded and is
        free soon enough that the slot should wait for it (coordinator/affinity.choose), or "".
        `evicts`: loading the key on `worker` would evict a key it holds (which costs a second
        load when work for that key waits on `worker`'s own queue). Only for a slot that never
        moved (no bounce yet): a slot goes to a holder once."""
        bounces, excluded = (_text(v) for v in self.r.hmget(keys.slot(job_id, slot), "bounces", "excluded"))
        if int(bounces or 0) > 0:
            return ""
        candidates = self.eligible_workers(set(excluded.split()) | {worker})
        found, mine = affinity.holders(self.r, candidates, zkey_sha, me=worker)
        best = affinity.choose(found, prove_s=prove_s, load_s=load_s, max_wait_s=self.settings.affinity_wait_s,
                               evicts_needed_key=evicts and mine > 0)
        return best.worker if best else ""

    def died_of_memory(self, worker: str, is_gone: Callable[[int], bool], how: str) -> list[tuple[str, str, str]]:
        """The kernel's OOM killer took a process of `worker` (`how`: what the counters
        showed); `is_gone(pid)` says whether one of its processes no longer lives. Each attempt
        of `worker` whose process is gone goes to another worker without being counted (requeue
        with refund, `worker` excluded from the slot), and its key is marked too big for
        `worker` (key_too_big: its admission refuses the key from then on). Returns the (job,
        slot, outcome) of each such attempt: none while the killed process is still exiting."""
        # The slots not finished: running ones (zkq:deadlines) and queued ones (zkq:checks), where
        # the reaper may have requeued the attempt already, its lease having run out first.
        members = {m.decode() for z in (keys.deadlines(), keys.checks()) for m in self.r.zrange(z, 0, -1)}
        members = sorted(members)
        with self.r.pipeline(transaction=False) as p:
            for m in members:
                p.hmget(keys.slot(*keys.parse_member(m)), "state", "worker", "pid", "token", "lost_worker", "lost_pid")
            rows = [[_text(v) for v in row] for row in p.execute()]
        out = []
        for m, (state, by, by_pid, token, lost_by, lost_pid) in zip(members, rows):
            running = state == "running" and by == worker and by_pid.isdigit() and is_gone(int(by_pid))
            # requeued by the reaper first (its lease ran out while the kernel reclaimed memory)
            requeued = lost_by == worker and lost_pid.isdigit() and is_gone(int(lost_pid))
            if not (running or requeued):
                continue
            pid = by_pid if running else lost_pid
            reason = (f"worker {worker}'s process (pid {pid}) died of memory: killed by the kernel's OOM killer "
                      f"({how}); its key is too big for that worker (the attempt is not counted)")
            job_id, slot = keys.parse_member(m)
            zkey = self.job_files(job_id).zkey
            if zkey and keys.slot_kind(slot) == "prove":
                self.mark_key_too_big(worker, zkey)
            if running:
                done = self.requeue(job_id, slot, int(token), event="oom", exclude=worker, refund=True,
                                    route_to=self.pick_route(self.excluded(job_id, slot) | {worker}), reason=reason)
            else:
                done = _reply(self.transitions.run("refund", job_id, slot, worker=worker, pid=pid, reason=reason))
            out.append((job_id, slot, done.kind))
        if out:
            self.r.delete(keys.holding(worker))     # its new pool child holds no key yet
        return out

    def mark_key_too_big(self, worker: str, zkey_sha: str) -> None:
        """`worker` died of memory proving this key: it takes no partition of it again (a
        worker restarted, e.g. with a bigger limit, has a new id and may)."""
        with self.r.pipeline(transaction=False) as p:
            p.sadd(keys.too_big(worker), zkey_sha)
            p.expire(keys.too_big(worker), int(self.settings.result_ttl_s))
            p.execute()

    def key_too_big(self, worker: str, zkey_sha: str) -> bool:
        """Whether `worker` died of memory proving this key (mark_key_too_big)."""
        return bool(self.r.sismember(keys.too_big(worker), zkey_sha))

    def parked_needs(self, job_id: str, slot) -> dict | None:
        """The memory a parked slot waits for (park's `needs`), or None."""
        raw = self.r.hget(keys.slot(job_id, slot), "needs")
        return json.loads(raw) if raw else None

    def pick_route(self, excluded: set[str]) -> str:
        """A live, healthy worker outside `excluded` to route a re-proof to ("" = the shared
        queue, when no worker is excluded or none other is eligible)."""
        if not excluded:
            return ""
        others = self.eligible_workers(excluded)
        return random.choice(others) if others else ""

    def excluded(self, job_id: str, slot) -> set[str]:
        """The workers excluded from a slot."""
        return set((self.r.hget(keys.slot(job_id, slot), "excluded") or b"").decode().split())

    # -- what the tasks read -----------------------------------------------------------------

    def job_files(self, job_id: str) -> JobFiles:
        """The job's key, circuit .wasm (and its name) and .r1cs, by sha256 ("" for none).

        They never change once the job is submitted: a worker reads them once per job (the
        last JOB_FILES_CACHED jobs), not once per partition."""
        files = self._job_files.get(job_id)
        if files is None:
            files = JobFiles(*(_text(v) for v in self.r.hmget(keys.job(job_id), "zkey", "wasm", "wasm_name", "r1cs")))
            if files.zkey:      # a job that exists
                if len(self._job_files) >= JOB_FILES_CACHED:
                    self._job_files.pop(next(iter(self._job_files)))
                self._job_files[job_id] = files
        return files

    @staticmethod
    def claimed_slots(claim: BatchClaim) -> list[SlotRecord]:
        """The slot records of a batch's members, in order, as claim_batch read them (what
        slot_records would return, without reading them again)."""
        return [_slot_record(*fields) for fields in claim.records]

    def slot_record(self, job_id: str, slot) -> SlotRecord:
        """A slot's files, when it was enqueued and whom it has blamed (one read)."""
        return self.slot_records(job_id, [slot])[0]

    def slot_records(self, job_id: str, slots) -> list[SlotRecord]:
        """slot_record of each of `slots`, in order, in one round trip."""
        with self.r.pipeline(transaction=False) as p:
            for slot in slots:
                p.hmget(keys.slot(job_id, slot), *_SLOT_FIELDS)
            rows = p.execute()
        return [_slot_record(*(_text(v) for v in row)) for row in rows]

    def proved(self, job_id: str) -> dict[int, Proved]:
        """Every recorded partition result of the job, with the witness it proves and whether
        another worker verified it already (its check mark's token is the partition's current
        one), by index."""
        with self.r.pipeline(transaction=False) as p:
            p.hgetall(keys.results(job_id))
            p.hgetall(keys.checked(job_id))
            raw, marks = p.execute()
        results = {int(k): json.loads(v) for k, v in raw.items()}
        marks = {int(k): int(v) for k, v in marks.items()}
        with self.r.pipeline(transaction=False) as p:
            for i in sorted(results):
                p.hmget(keys.slot(job_id, i), "witness", "token")
            rows = p.execute()
        return {i: Proved(results[i], _text(w), checked=marks.get(i) == int(t or 0))
                for i, (w, t) in zip(sorted(results), rows)}

    def to_verify(self, job_id: str) -> tuple[dict[int, Proved], int]:
        """The recorded results of the job that no worker other than their producer verified
        under their current token (finalize's share), with their witnesses, by index; and how
        many results the job holds in all. Only those results are read: not every proof."""
        with self.r.pipeline(transaction=False) as p:
            p.hkeys(keys.results(job_id))
            p.hgetall(keys.checked(job_id))
            names, marks = p.execute()
        indices = sorted(int(k) for k in names)
        marks = {int(k): int(v) for k, v in marks.items()}
        with self.r.pipeline(transaction=False) as p:
            for i in indices:
                p.hmget(keys.slot(job_id, i), "witness", "token")
            rows = p.execute()
        todo = [(i, _text(w)) for i, (w, t) in zip(indices, rows) if marks.get(i) != int(t or 0)]
        out: dict[int, Proved] = {}
        for at in range(0, len(todo), 1000):
            chunk = todo[at:at + 1000]
            raw = self.r.hmget(keys.results(job_id), [i for i, _ in chunk])
            out.update({i: Proved(json.loads(v), w) for (i, w), v in zip(chunk, raw) if v is not None})
        return out, len(indices)

    def quarantined(self) -> dict[str, dict]:
        """The quarantined fingerprints: id -> what strike.lua recorded (fingerprint, strikes,
        when, why)."""
        return {_text(fp): json.loads(rec) for fp, rec in self.r.hgetall(keys.quarantine()).items()}

    def is_quarantined(self, fingerprint_id: str) -> bool:
        return bool(self.r.hexists(keys.quarantine(), fingerprint_id))

    def measured_runtime(self, field: str) -> tuple[float | None, float | None]:
        """The measured proving and key-loading seconds of `field` (key|device class;
        record.lua's moving averages), None for what was never measured. Read at most once
        per RUNTIME_CACHED_S per field: they set how long an attempt may run, and averages a
        few seconds old set it as well."""
        hit = self._runtime.get(field)
        if hit is not None and time.monotonic() - hit[0] < RUNTIME_CACHED_S:
            return hit[1]
        prove_s, load_s = self.r.hmget(keys.runtime(), field, f"{field}|load")
        measured = (float(prove_s) if prove_s is not None else None, float(load_s) if load_s is not None else None)
        if measured[0] is not None:     # nothing measured yet: ask again next time
            self._runtime[field] = (time.monotonic(), measured)
        return measured

    def waiting(self, queues) -> int:
        """How many messages wait on the broker's `queues` (every priority list of each)."""
        return sum(queue_depths(self.r, queues).values())


_SLOT_FIELDS = ("witness", "witness_name", "input", "input_name", "enqueued_at", "invalid_builds", "invalid_fps",
                "excluded")


def _slot_record(witness: str, witness_name: str, inp: str, input_name: str, enqueued_at: str, builds: str,
                 invalid_fps: str, excluded: str) -> SlotRecord:
    return SlotRecord(witness=witness, witness_name=witness_name, input=inp, input_name=input_name,
                      enqueued_at=float(enqueued_at) if enqueued_at else None,
                      invalid_builds=tuple(builds.split()), excluded=tuple(excluded.split()),
                      invalid_fps=tuple(invalid_fps.split()))


def has_room(beat: dict, needs: dict) -> bool:
    """Whether a worker's heartbeat shows the memory `needs` asks of its backend: its key
    capacity (workers/process.py: its limit less what it used when ready, holding no key) at
    least the host bytes for its backend, and on a GPU the device's memory at least "device".
    A heartbeat without memory figures (an older worker) counts as having room."""
    memory = beat.get("memory") or {}
    backend = (beat.get("fingerprint") or {}).get("backend", "cpu")
    if "capacity_bytes" not in memory:
        return True
    if memory["capacity_bytes"] < needs.get(backend, 0):
        return False
    return backend != "cuda" or memory.get("device_total_bytes", 0) >= needs.get("device", 0)


def _split_checks(detail: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[ToCheck, ...]]:
    """A record's reply detail: what comes before 'check', and the ToCheck items after it
    (index, token, witness, result, ...)."""
    if "check" not in detail:
        return detail, ()
    at = detail.index("check")
    rest = detail[at + 1:]
    return detail[:at], tuple(ToCheck(int(rest[k]), int(rest[k + 1]), rest[k + 2], rest[k + 3])
                              for k in range(0, len(rest) - 3, 4))


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else (v or "")


def _reply(out: Outcome) -> Reply:
    """A raw reply with no typed form: its kind, and whatever the script added as `why` (one
    string: a state, a token, a worker, a fingerprint, the excluded workers' list)."""
    return Reply(out.kind, " ".join(out.detail))


def _word(build: str) -> str:
    """A build id as one word (the scripts keep lists of them space-separated)."""
    return "".join(build.split())
