"""Coordinator-side Prometheus metrics, computed from Redis at scrape time.

`zkqueue metrics --port N` serves them on http://HOST:N/metrics:

    zkqueue_queue_messages{queue}          messages waiting in a Celery queue (all priority levels)
    zkqueue_unacked_messages               messages delivered to a worker and not yet acknowledged
    zkqueue_queue_depth                    the two above together: work not yet done
    zkqueue_inflight_partitions            partitions queued, being sent or running
    zkqueue_oldest_inflight_partition_age_seconds   now - enqueued_at of the oldest of them
    zkqueue_live_workers                   workers with a live heartbeat
    zkqueue_quarantined_builds{fingerprint,build,host}  1 per quarantined fingerprint
    zkqueue_dead_letters                   messages taken off the queues because no worker could run them
    zkqueue_canary_failed_builds{fingerprint,build,host}  1 per build whose start-up canary failed
    zkqueue_partitions_waiting_for_memory  partitions parked because no live worker can hold their key
    zkqueue_memory_needed_bytes            the most any of those needs (on the kind of worker that asked)
    zkqueue_worker_key_capacity_max_bytes  the largest live worker's room for keys (its heartbeat)
"""

from __future__ import annotations

import json
import time

import redis

from . import canary, connections, deadletter, keys
from .broker import UNACKED_HASH, queue_depths, queue_names
from .quarantine import quarantined
from .registry import Registry, redis_time
from zkqueue.config import Settings

INFLIGHT_STATES = {b"queued", b"sending", b"running"}
LIVE_JOB_STATES = {b"queued", b"running"}
RECENT_JOBS = 1000


def snapshot(r: redis.Redis, now: float | None = None) -> dict:
    """The coordinator's gauges as a plain dict (what the collector exports).

    Raises:
        redis.RedisError: Redis cannot be reached.
    """
    now = redis_time(r) if now is None else now     # enqueued_at is Redis's time too
    queues = queue_depths(r, queue_names(r))
    unacked = r.hlen(UNACKED_HASH)
    inflight, oldest = 0, 0.0
    waiting_for_memory, needed = 0, 0
    for job_id in r.zrevrange(keys.jobs(), 0, RECENT_JOBS - 1):
        job_id = job_id.decode()
        state, n = r.hmget(keys.job(job_id), "state", "n")
        if state not in LIVE_JOB_STATES or n is None:
            continue
        with r.pipeline() as p:
            for i in range(int(n)):
                p.hmget(keys.slot(job_id, i), "state", "enqueued_at", "needs")
            rows = p.execute()
        for st, enq, needs in rows:
            if st == b"parked" and needs:
                waiting_for_memory += 1
                needed = max(needed, max(json.loads(needs).values(), default=0))
            if st in INFLIGHT_STATES:
                inflight += 1
                if enq:
                    oldest = max(oldest, now - float(enq))
    live = Registry(r, ttl_s=5).live()
    return {"queues": queues, "unacked": unacked, "depth": sum(queues.values()) + unacked,
            "inflight": inflight, "oldest_age_s": oldest, "live_workers": len(live),
            "quarantined": quarantined(r), "dead_letters": deadletter.count(r), "canary_failed": canary.failing(r),
            "waiting_for_memory": waiting_for_memory, "memory_needed_bytes": needed,
            "capacity_max_bytes": max(((b.get("memory") or {}).get("capacity_bytes", 0) for b in live), default=0)}


class QueueCollector:
    """A prometheus_client collector reading snapshot() on every scrape."""

    def __init__(self, settings: Settings):
        self.r = connections.client(settings, socket_timeout_s=5)

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily
        s = snapshot(self.r)
        q = GaugeMetricFamily("zkqueue_queue_messages", "Messages waiting in a Celery queue", labels=["queue"])
        for name, n in sorted(s["queues"].items()):
            q.add_metric([name], n)
        yield q
        yield GaugeMetricFamily("zkqueue_unacked_messages", "Messages delivered and not yet acknowledged",
                                value=s["unacked"])
        yield GaugeMetricFamily("zkqueue_queue_depth", "Queued plus unacknowledged messages", value=s["depth"])
        yield GaugeMetricFamily("zkqueue_inflight_partitions", "Partitions queued, being sent or running",
                                value=s["inflight"])
        yield GaugeMetricFamily("zkqueue_oldest_inflight_partition_age_seconds",
                                "Seconds since the oldest in-flight partition was enqueued", value=s["oldest_age_s"])
        yield GaugeMetricFamily("zkqueue_live_workers", "Workers with a live heartbeat", value=s["live_workers"])
        qb = GaugeMetricFamily("zkqueue_quarantined_builds", "Fingerprints quarantined for invalid proofs",
                               labels=["fingerprint", "build", "host"])
        for fp_id, rec in sorted(s["quarantined"].items()):
            fp = rec.get("fingerprint") or {}
            qb.add_metric([fp_id, str(fp.get("build")), str(fp.get("host"))], 1)
        yield qb
        cf = GaugeMetricFamily("zkqueue_canary_failed_builds", "Builds whose start-up canary proof failed: their "
                               "workers take no work", labels=["fingerprint", "build", "host"])
        for fp_id, rec in sorted(s["canary_failed"].items()):
            fp = rec.get("fingerprint") or {}
            cf.add_metric([fp_id, str(fp.get("build")), str(fp.get("host"))], 1)
        yield cf
        yield GaugeMetricFamily("zkqueue_partitions_waiting_for_memory", "Partitions parked because no live worker "
                                "can hold their key", value=s["waiting_for_memory"])
        yield GaugeMetricFamily("zkqueue_memory_needed_bytes", "The most memory a partition waiting for memory needs",
                                value=s["memory_needed_bytes"])
        yield GaugeMetricFamily("zkqueue_worker_key_capacity_max_bytes", "The largest live worker's room for keys",
                                value=s["capacity_max_bytes"])
        yield GaugeMetricFamily("zkqueue_dead_letters", "Messages taken off the queues because no worker could "
                                "run them (zkqueue dead-letters list)", value=s["dead_letters"])


def serve(settings: Settings, port: int, addr: str = "0.0.0.0") -> None:
    """Serves the coordinator's metrics on `addr:port` until interrupted."""
    from prometheus_client import CollectorRegistry, start_http_server
    reg = CollectorRegistry()
    reg.register(QueueCollector(settings))
    start_http_server(port, addr=addr, registry=reg)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
