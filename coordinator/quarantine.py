"""Quarantined builds: fingerprints whose proofs failed where another build's succeeded.

A fingerprint (tasks/context.py: backend, kernel build, device, driver, host) gets a strike
each time a partition it proved invalid is then proved valid by another fingerprint (the
record script, coordinator/lua/record.lua); `quarantine_after` strikes quarantine it. Workers
with a quarantined fingerprint take no work until an operator clears it.
"""

from __future__ import annotations

import json

import redis

from . import keys


def quarantined(r: redis.Redis) -> dict[str, dict]:
    """fingerprint id -> {fingerprint, strikes, at, reason}, for every quarantined fingerprint."""
    return {k.decode(): json.loads(v) for k, v in r.hgetall(keys.quarantine()).items()}


def clear(r: redis.Redis, fingerprint_ids: list[str] | None = None) -> list[str]:
    """Lifts the quarantine (and forgets the strikes) of these fingerprints, or of all when
    None; returns the ids that were quarantined."""
    ids = list(quarantined(r)) if fingerprint_ids is None else fingerprint_ids
    if not ids:
        return []
    with r.pipeline() as p:
        for fp in ids:
            p.hdel(keys.quarantine(), fp)
        p.hdel(keys.strikes(), *ids)
        removed = p.execute()[:-1]
    return [fp for fp, n in zip(ids, removed) if n]


def describe(fp_id: str, record: dict) -> str:
    """One line: id, build, where it runs, and why it is quarantined."""
    fp = record.get("fingerprint") or {}
    return (f"{fp_id}: build {fp.get('build')} ({fp.get('backend')} on {fp.get('device_name')}, host "
            f"{fp.get('host')}, last worker {fp.get('worker')}): {record.get('reason')}")
