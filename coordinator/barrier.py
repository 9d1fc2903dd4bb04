"""The fan-in barrier and every state transition of a job, as atomic Redis Lua scripts.

Celery's chord counter is not used: it double-counts a redelivered member and a member
killed without reject-on-worker-lost sinks the whole chord. Instead each slot (partition
or finalize) carries a `token` that is bumped whenever it is (re)enqueued; a message whose
token is not the slot's current one is stale and does nothing, and every transition checks
the token (fencing). A worker claims a slot (attempts += 1, lease deadline in
zkq:deadlines), refreshes its lease while proving, and records the result with HSETNX, so
a duplicate run changes nothing. The write that completes the set elects itself with
HSETNX finalize_sent and gets the finalize token.

Every slot in every live state has a deadline in zkq:deadlines, and the reaper acts on it:
`sending` (the message is being sent: send it again), `queued` (check the message still
exists; send it again if not), `running` (lease or run deadline passed: requeue).

The scripts live in coordinator/lua/, one transition each, with their KEYS and ARGV named
at the top; prelude.lua is put in front of each. Time inside them is Redis's own (TIME).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import redis

from . import keys
from .keys import FINALIZE_SLOT

LUA_DIR = Path(__file__).with_name("lua")
# One script per transition (coordinator/lua/NAME.lua); prelude.lua goes in front of each.
# The synth_* ones and submit_inputs serve jobs submitted as inputs (coordinator/synthesis.py).
SCRIPTS = tuple(sorted(p.stem for p in LUA_DIR.glob("*.lua") if p.stem != "prelude"))


@cache
def script_source(name: str) -> str:
    """prelude.lua followed by NAME.lua."""
    return (LUA_DIR / "prelude.lua").read_text() + "\n" + (LUA_DIR / f"{name}.lua").read_text()


@dataclass(frozen=True)
class Outcome:
    """What a script decided: `kind` (e.g. "ok", "stale", "send") and its details."""

    kind: str
    detail: tuple[str, ...] = ()


def _outcome(raw) -> Outcome:
    if isinstance(raw, list):
        items = [x.decode() if isinstance(x, bytes) else str(x) for x in raw]
        return Outcome(items[0], tuple(items[1:]))
    return Outcome(raw.decode() if isinstance(raw, bytes) else str(raw))


class Barrier:
    """The job state machine on one Redis database. Every method is one atomic script.

    Methods raise redis.RedisError when Redis cannot be reached.
    """

    def __init__(self, client: redis.Redis, settings):
        self.r = client
        self.settings = settings
        self._scripts = {name: client.register_script(script_source(name)) for name in SCRIPTS}

    def _run(self, name: str, job_id: str, slot, extra_keys=(), extra_args=()) -> Outcome:
        slot = str(slot)
        base_keys = [keys.job(job_id), keys.slot(job_id, slot), keys.deadlines(), keys.events(job_id),
                     keys.routed()]
        base_args = [job_id, slot, self.settings.result_ttl_s, keys.notify(job_id), keys.MEMBER_SEP,
                     keys.job(job_id), keys.request("")]
        return _outcome(self._scripts[name](keys=base_keys + list(extra_keys),
                                            args=[str(x) for x in base_args + list(extra_args)]))

    def submit(self, job_id: str, *, request_id: str | None, priority: str, zkey_sha: str,
               witness_shas: list[str]) -> Outcome:
        """Creates the job with every partition in `sending` (token 1), or finds the request's job.

        Returns Outcome("created", (job_id,)) or Outcome("exists", (existing_job_id,)).
        """
        k = [keys.request(request_id or "-"), keys.jobs()] + [keys.slot(job_id, i) for i in range(len(witness_shas))]
        return self._run("submit", job_id, FINALIZE_SLOT, k, (
            request_id or "", priority, zkey_sha, len(witness_shas), self.settings.send_grace_s, *witness_shas))

    def claim(self, job_id: str, slot, token: int, worker: str, pid: int, *, fingerprint_id: str = "",
              run_s: float | None = None) -> Outcome:
        """Starts an attempt: "ok" (attempt n), or why not: job_over, stale, done, busy,
        excluded, quarantined. The attempt is overdue after `run_s` (default: the configured
        partition timeout), whatever its lease refreshes say."""
        return self._run("claim", job_id, slot, [keys.quarantine()], (
            token, worker, pid, self.settings.lease_ttl_s, self.settings.max_attempts, fingerprint_id,
            self.settings.partition_timeout_s if run_s is None else run_s))

    def refresh(self, job_id: str, slot, token: int, worker: str) -> str:
        """Extends the lease: "ok", "overdue" (past its run deadline), "lost" (someone else
        owns the slot now) or "job_over"."""
        return self._run("refresh", job_id, slot, extra_args=(token, worker, self.settings.lease_ttl_s)).kind

    def record(self, job_id: str, index: int, token: int, worker: str, payload: dict, *,
               fingerprint_id: str = "", runtime_field: str = "", prove_s: float = 0.0,
               key_load_s: float = 0.0) -> Outcome:
        """Stores a partition result once (HSETNX): "recorded", "duplicate", "stale", "job_over",
        or "finalize" (with the finalize token) when this write completed the set."""
        k = [keys.results(job_id), keys.slot(job_id, FINALIZE_SLOT), keys.strikes(), keys.quarantine(),
             keys.fingerprints(), keys.runtime()]
        return self._run("record", job_id, index, k, (
            token, worker, json.dumps(payload), self.settings.send_grace_s, fingerprint_id,
            self.settings.quarantine_after, runtime_field or "-", prove_s, key_load_s))

    def mark_sent(self, job_id: str, slot, token: int) -> bool:
        """The message for (slot, token) is on a queue: from now on its deadline is the
        queued check (the reaper verifies the message still exists)."""
        return self._run("mark_sent", job_id, slot,
                         extra_args=(token, self.settings.queued_check_s)).kind == "1"

    def requeue(self, job_id: str, slot, *, token: int | None, states: str, event: str, reason: str,
                require_expired: bool = False, exclude: str = "", route_to: str = "",
                counts_as_attempt: bool = True, orphaned: bool = False) -> Outcome:
        """Moves a slot back to `sending` with a new token: "send" (new token), or "failed"
        (attempts or bounces exhausted, or orphaned for orphan_timeout_s: the job failed with
        `reason`), "stale", "skip", "job_over"."""
        s = self.settings
        return self._run("requeue", job_id, slot, extra_args=(
            "" if token is None else token, f" {states} ", int(require_expired), event, reason, exclude,
            route_to, s.max_attempts, s.send_grace_s, int(counts_as_attempt), s.max_bounces, int(orphaned),
            s.orphan_timeout_s))

    def reap(self, job_id: str, slot) -> Outcome:
        """The reaper's decision for a slot whose deadline passed: "none", "resend" (token,
        route), "lost" (token, worker, overdue 1/0) or "check" (token, route)."""
        return self._run("reap", job_id, slot,
                         extra_args=(self.settings.send_grace_s, self.settings.queued_check_s))

    def resend(self, job_id: str, slot, token: int, *, states: str = "sending queued",
               orphan_tag: str = "") -> Outcome:
        """Sends a slot's message again with the same token: "resend" (route) or "skip".
        `orphan_tag` names an unacknowledged copy whose consumer died; it is dropped."""
        from .broker import UNACKED_HASH, UNACKED_INDEX
        return self._run("resend", job_id, slot, [UNACKED_HASH, UNACKED_INDEX],
                         (token, self.settings.send_grace_s, f" {states} ", orphan_tag))

    def suspect(self, job_id: str, index: int, token: int, worker: str, fingerprint: dict,
                reason: str) -> Outcome:
        """This attempt's proof failed its own verification: "retry" (exclude the worker,
        re-prove elsewhere), "unsatisfied" (two builds agree: the job failed), "stale", "job_over"."""
        return self._run("suspect", job_id, index, [keys.bad(job_id), keys.fingerprints()], (
            token, worker, fingerprint.get("id", ""), fingerprint.get("build", ""), json.dumps(fingerprint),
            reason))

    def fail_input(self, job_id: str, slot, token: int, worker: str, reason: str) -> bool:
        """Fails the job now (bad input: not retried). False when the attempt was not current
        or the job was already over."""
        return self._run("fail_input", job_id, slot, extra_args=(token, worker, reason)).kind == "1"

    def reprove(self, job_id: str, finalize_token: int, bad: list[dict]) -> Outcome:
        """Finalize found invalid proofs: drops them, excludes their workers and re-enqueues
        them. `bad` items: index, worker, fingerprint, reason, route_to.
        Returns "send" with (index, token) pairs flattened, or "failed", "stale", "job_over"."""
        k = [keys.results(job_id), keys.slot(job_id, FINALIZE_SLOT), keys.bad(job_id), keys.fingerprints()]
        k += [keys.slot(job_id, b["index"]) for b in bad]
        args: list = [finalize_token, self.settings.max_attempts, self.settings.send_grace_s]
        for b in bad:
            fp = b["fingerprint"] or {}
            args += [b["index"], b["worker"], fp.get("id", ""), json.dumps(fp), b["reason"], b["route_to"]]
        return self._run("reprove", job_id, FINALIZE_SLOT, k, args)

    def finish(self, job_id: str, finalize_token: int, n_partitions: int, verify_s: float) -> bool:
        """Marks the job done (finalize verified every partition). False if it was not current."""
        k = [keys.slot(job_id, i) for i in range(n_partitions)]
        return self._run("finish", job_id, FINALIZE_SLOT, k, (finalize_token, f"{verify_s:.6f}")).kind == "1"

    def cancel(self, job_id: str) -> bool:
        """Cancels a job that is not over; False when it already was."""
        return self._run("cancel", job_id, FINALIZE_SLOT).kind == "1"

    # Synthesis: a job submitted as inputs starts with its partitions in `synth_sending`; each
    # becomes an ordinary `sending` partition the moment its witness is stored (synth_done).
    # The synthesis attempt has its own token, attempts, lease and deadline ("{job}|s{i}").

    def submit_inputs(self, job_id: str, *, request_id: str | None, priority: str, zkey_sha: str,
                      wasm_sha: str, wasm_name: str, inputs: list[tuple[str, str]]) -> Outcome:
        """Creates a job whose witnesses are to be computed from `inputs` ((sha256, name) pairs):
        every partition in `synth_sending` (synth token 1). Returns as submit()."""
        k = [keys.request(request_id or "-"), keys.jobs()] + [keys.slot(job_id, i) for i in range(len(inputs))]
        flat = [x for pair in inputs for x in pair]
        return self._run("submit_inputs", job_id, FINALIZE_SLOT, k, (
            request_id or "", priority, zkey_sha, len(inputs), self.settings.send_grace_s, wasm_sha, wasm_name,
            *flat))

    def _run_synth(self, name: str, job_id: str, index: int, extra_args=()) -> Outcome:
        return self._run(name, job_id, int(index), extra_args=extra_args)

    def synth_claim(self, job_id: str, index: int, token: int, worker: str, pid: int, *, run_s: float) -> Outcome:
        """Starts a synthesis attempt: "ok" (attempt n, started at), or job_over, stale, done, busy."""
        return self._run_synth("synth_claim", job_id, index, (
            token, worker, pid, self.settings.lease_ttl_s, self.settings.max_attempts, run_s))

    def synth_refresh(self, job_id: str, index: int, token: int, worker: str) -> str:
        """Extends a synthesis lease: "ok", "overdue", "lost" or "job_over"."""
        return self._run_synth("synth_refresh", job_id, index, (token, worker, self.settings.lease_ttl_s)).kind

    def synth_done(self, job_id: str, index: int, token: int, worker: str, witness_sha: str,
                   synth_s: float) -> Outcome:
        """Records the stored witness and moves the partition to `sending`: "send" (partition
        token), "stale" or "job_over"."""
        return self._run_synth("synth_done", job_id, index, (
            token, worker, witness_sha, f"{synth_s:.6f}", self.settings.send_grace_s))

    def synth_fail_input(self, job_id: str, index: int, token: int, worker: str, reason: str) -> bool:
        """Fails the job now: its input does not fit the circuit. False when not current."""
        return self._run_synth("synth_fail_input", job_id, index, (token, worker, reason)).kind == "1"

    def synth_mark_sent(self, job_id: str, index: int, token: int) -> bool:
        """The synthesis message of (index, token) is on a queue."""
        return self._run_synth("synth_mark_sent", job_id, index, (token, self.settings.queued_check_s)).kind == "1"

    def synth_requeue(self, job_id: str, index: int, token: int, *, event: str, reason: str,
                      require_expired: bool = False) -> Outcome:
        """Puts a synthesis attempt back to `synth_sending` with a new token: "send" (token),
        "failed" (attempts spent: the job failed), "stale", "skip", "job_over"."""
        return self._run_synth("synth_requeue", job_id, index, (
            token, int(require_expired), event, reason, self.settings.max_attempts, self.settings.send_grace_s))

    def synth_reap(self, job_id: str, index: int) -> Outcome:
        """The reaper's decision for a due synthesis deadline: "none", "resend" (token),
        "check" (token) or "lost" (token, worker, overdue 1/0)."""
        return self._run_synth("synth_reap", job_id, index, (self.settings.send_grace_s, self.settings.queued_check_s))

    def synth_unserved(self, job_id: str, index: int, token: int, *, unserved: bool, reason: str) -> str:
        """A queued synthesis checked while live workers exist (`unserved`: none of them takes
        synthesis): "waiting", "served", "failed" (the job, after orphan_timeout_s) or "skip"."""
        return self._run_synth("synth_unserved", job_id, index, (
            token, int(unserved), self.settings.orphan_timeout_s, reason)).kind

    def synth_resend(self, job_id: str, index: int, token: int, orphan_tag: str = "") -> bool:
        """A queued synthesis message is missing, or (`orphan_tag`) its unacknowledged copy lost
        its consumer (dropped here): True when the caller is to send it again (same token)."""
        from .broker import UNACKED_HASH, UNACKED_INDEX
        return self._run("synth_resend", job_id, int(index), [UNACKED_HASH, UNACKED_INDEX],
                         (token, self.settings.send_grace_s, orphan_tag)).kind == "resend"
