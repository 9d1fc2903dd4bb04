"""Prometheus metrics, scraped over HTTP: every worker process's /metrics after a real job,
and the coordinator's queue gauges (`zkqueue metrics`) before and after it."""

from __future__ import annotations

import random
import socket
import subprocess
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families
from queue_support import CHAIN, PARTITIONS, ROOT, queue, wait_until  # noqa: F401  (fixtures)


def free_ports(n: int) -> int:
    """A base port such that base .. base + n - 1 are all free now."""
    for _ in range(200):
        base = random.randint(20000, 40000)
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free ports")


def scrape(port: int) -> dict[str, list]:
    """name -> [(labels, value)] of every sample at http://127.0.0.1:port/metrics."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def try_scrape(port: int):
    try:
        return scrape(port)
    except OSError:
        return None


def total(samples: dict, name: str, **labels) -> float:
    return sum(v for lab, v in samples.get(name, []) if all(lab.get(k) == x for k, x in labels.items()))


def test_workers_and_coordinator_export_metrics_after_a_job(queue, monkeypatch):
    base = free_ports(3)
    coord_port = base + 2
    exporter = subprocess.Popen([sys.executable, "-m", "zkqueue.cli", "metrics", "--port", str(coord_port),
                                 "--addr", "127.0.0.1"], cwd=ROOT, env=queue.env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        # A job with no worker yet: its 4 partitions wait in the queue and age.
        job = queue.client().submit(CHAIN / "circuit_final.zkey", PARTITIONS, priority="normal")
        age = "zkqueue_oldest_inflight_partition_age_seconds"
        before = wait_until(lambda: (m := try_scrape(coord_port)) and total(m, age) > 0.2 and m, 30,
                            "the coordinator's /metrics to show partitions aged past 0.2 s")
        assert total(before, "zkqueue_queue_messages", queue="zkq.prove") == 4
        assert total(before, "zkqueue_queue_depth") == 4
        assert total(before, "zkqueue_inflight_partitions") == 4
        assert "zkqueue_unacked_messages" in before

        monkeypatch.setenv("ZKQUEUE_METRICS_PORT", str(base))
        group = queue.start_workers(2)
        queue.ready(group)
        job.wait(120)

        workers = [scrape(base), scrape(base + 1)]   # worker i serves on base + i
        proved = [total(w, "zkqueue_partitions_proved_total", curve="bn128") for w in workers]
        assert sum(proved) >= 4, proved
        for w, n in zip(workers, proved):
            assert total(w, "zkqueue_partitions_failed_total") == 0
            assert total(w, "zkqueue_proving_seconds_count", curve="bn128") == n
            if n:
                assert total(w, "zkqueue_proving_seconds_sum", curve="bn128") > 0
                sizes = {lab["size"] for lab, _ in w["zkqueue_proving_seconds_count"]}
                assert sizes == {"1024"} or all(s.isdigit() for s in sizes), sizes
                assert total(w, "zkqueue_key_cache_bytes") > 0
                assert total(w, "zkqueue_key_cache_misses_total") >= 1
                assert total(w, "zkqueue_key_cache_hits_total") + total(w, "zkqueue_key_cache_misses_total") >= n
            assert "zkqueue_device_memory_used_bytes" not in w   # CPU workers: no NVML gauges

        after = scrape(coord_port)
        assert total(after, "zkqueue_queue_depth") == 0
        assert total(after, "zkqueue_inflight_partitions") == 0
        assert total(after, "zkqueue_oldest_inflight_partition_age_seconds") == 0
        assert total(after, "zkqueue_live_workers") == 2
    finally:
        exporter.terminate()
        exporter.wait(timeout=10)


def test_queue_depth_counts_the_running_partitions_unacknowledged_message(queue):
    port = free_ports(1)
    exporter = subprocess.Popen([sys.executable, "-m", "zkqueue.cli", "metrics", "--port", str(port),
                                 "--addr", "127.0.0.1"], cwd=ROOT, env=queue.env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        group = queue.start_workers(1, fault="slow:3")
        queue.ready(group)
        job = queue.client().submit(CHAIN / "circuit_final.zkey", PARTITIONS[:1], priority="normal")
        wait_until(lambda: job.status().partitions[0].state.value == "running", 30, "the partition to run")
        m = wait_until(lambda: try_scrape(port), 30, "the coordinator's /metrics")
        assert total(m, "zkqueue_unacked_messages") == 1       # acks late: delivered, not yet acked
        assert total(m, "zkqueue_queue_messages") == 0
        assert total(m, "zkqueue_queue_depth") == 1
        assert total(m, "zkqueue_inflight_partitions") == 1
        assert total(m, "zkqueue_oldest_inflight_partition_age_seconds") > 0
        job.wait(60)
    finally:
        exporter.terminate()
        exporter.wait(timeout=10)
