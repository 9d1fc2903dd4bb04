"""Prometheus metrics of one worker, served by its Celery pool child (where proving happens)
on $ZKQUEUE_METRICS_PORT (workers/spawn.py gives worker i the base port + i):

    zkqueue_partitions_proved_total{curve}             partitions proved and recorded
    zkqueue_partitions_failed_total{reason}            input_error, retry (device or other failure)
    zkqueue_proving_seconds{curve,size}                histogram of proving time (size: domain size)
    zkqueue_witnesses_synthesized_total{curve}         witnesses computed from inputs and stored
    zkqueue_synthesis_seconds{curve,size}              histogram of witness synthesis time (size: witness length)
    zkqueue_key_cache_bytes                            proving keys held by the key cache
    zkqueue_key_cache_hits_total, _misses_total        key-cache lookups
    zkqueue_device_memory_used_bytes, _total_bytes     NVML, CUDA workers only
    zkqueue_device_utilization_ratio                   NVML, CUDA workers only
"""

from __future__ import annotations

import logging

from prometheus_client import Counter, Gauge, Histogram

log = logging.getLogger("zkqueue.metrics")

PROVED = Counter("zkqueue_partitions_proved", "Partitions proved and recorded", ["curve"])
FAILED = Counter("zkqueue_partitions_failed", "Partitions that failed on this worker", ["reason"])
PROVING_SECONDS = Histogram("zkqueue_proving_seconds", "Seconds proving one partition (self-check excluded)",
                            ["curve", "size"],
                            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800))
SYNTHESIZED = Counter("zkqueue_witnesses_synthesized", "Witnesses computed from inputs and stored", ["curve"])
SYNTHESIS_SECONDS = Histogram("zkqueue_synthesis_seconds", "Seconds computing one witness from its inputs",
                              ["curve", "size"],
                              buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300))
KEY_CACHE_BYTES = Gauge("zkqueue_key_cache_bytes", "Bytes of proving keys held by the key cache")
KEY_CACHE_HITS = Counter("zkqueue_key_cache_hits", "Key-cache lookups served from the cache")
KEY_CACHE_MISSES = Counter("zkqueue_key_cache_misses", "Key-cache lookups that loaded the key")

_started_port: int | None = None


def proved(curve: str, size: int, seconds: float) -> None:
    PROVED.labels(curve).inc()
    PROVING_SECONDS.labels(curve, str(size)).observe(seconds)


def synthesized(curve: str, size: int, seconds: float) -> None:
    SYNTHESIZED.labels(curve).inc()
    SYNTHESIS_SECONDS.labels(curve, str(size)).observe(seconds)


def failed(reason: str) -> None:
    FAILED.labels(reason).inc()


def key_cache(hit: bool, used_bytes: int) -> None:
    (KEY_CACHE_HITS if hit else KEY_CACHE_MISSES).inc()
    KEY_CACHE_BYTES.set(used_bytes)


class NvmlCollector:
    """Memory and utilization of this worker's GPU (its device "cuda:N": N is the NVML index)."""

    def __init__(self, index: int):
        import pynvml
        pynvml.nvmlInit()
        self.nvml, self.handle = pynvml, pynvml.nvmlDeviceGetHandleByIndex(index)
        self.device = f"cuda:{index}"

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily
        mem = self.nvml.nvmlDeviceGetMemoryInfo(self.handle)
        util = self.nvml.nvmlDeviceGetUtilizationRates(self.handle)
        for name, doc, value in (("zkqueue_device_memory_used_bytes", "Device memory in use", mem.used),
                                 ("zkqueue_device_memory_total_bytes", "Device memory", mem.total),
                                 ("zkqueue_device_utilization_ratio", "GPU utilization (0-1)", util.gpu / 100)):
            g = GaugeMetricFamily(name, doc, labels=["device"])
            g.add_metric([self.device], value)
            yield g


def start_server(port: int, device: str = "") -> bool:
    """Serves /metrics on `port` (once per process), with NVML's figures of `device` when it
    is a GPU ("cuda:N"); False when it could not (logged)."""
    global _started_port
    if _started_port is not None or port <= 0:
        return _started_port is not None
    from prometheus_client import REGISTRY, start_http_server
    if device.startswith("cuda:"):
        try:
            REGISTRY.register(NvmlCollector(int(device.partition(":")[2])))
        except Exception as exc:   # pynvml missing or NVML failing: the other metrics still count
            log.warning("no device metrics for %s: %s", device, exc)
    try:
        start_http_server(port)
    except OSError as exc:
        log.warning("cannot serve metrics on port %d: %s", port, exc)
        return False
    _started_port = port
    log.info("metrics on http://0.0.0.0:%d/metrics", port)
    return True
