"""Builds failing their start-up canary (workers/canary.py): recorded by the worker that found
it, shown by `zkqueue status` and the metrics, cleared when a worker of the same fingerprint
passes.

A fingerprint (tasks/context.py: backend, kernel build, device, driver, host) that failed its
canary takes no work: its worker exits before it consumes a message (exit code CANARY, which
its supervisor does not restart).
"""

from __future__ import annotations

import json

import redis

from . import keys


def record_failure(r: redis.Redis, fingerprint: dict, worker: str, reason: str, seconds: float) -> None:
    """Notes that `worker` (of `fingerprint`) failed its canary with `reason`."""
    seconds_now, micros = r.time()
    r.hset(keys.canary_failed(), fingerprint["id"], json.dumps({
        "fingerprint": fingerprint, "worker": worker, "reason": reason, "seconds": round(seconds, 3),
        "at": seconds_now + micros / 1e6}))


def record_pass(r: redis.Redis, fingerprint_id: str) -> None:
    """A worker of this fingerprint passed: an earlier failure (a device since mended) is gone."""
    r.hdel(keys.canary_failed(), fingerprint_id)


def failing(r: redis.Redis) -> dict[str, dict]:
    """fingerprint id -> {fingerprint, worker, reason, seconds, at} for every failing build."""
    return {k.decode(): json.loads(v) for k, v in r.hgetall(keys.canary_failed()).items()}


def describe(fp_id: str, record: dict) -> str:
    """One line: id, build, where it runs, and why its canary failed."""
    fp = record.get("fingerprint") or {}
    return (f"{fp_id}: build {fp.get('build')} ({fp.get('backend')} on {fp.get('device_name')}, host "
            f"{fp.get('host')}, worker {record.get('worker')}) failed its canary: {record.get('reason')}")
