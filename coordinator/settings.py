"""Queue settings: flags override the environment, the environment overrides defaults.

Environment: ZKQUEUE_REDIS_URL, ZKQUEUE_STORE_URL, ZKQUEUE_LEASE_TTL_S,
ZKQUEUE_REAPER_INTERVAL_S, ZKQUEUE_MAX_ATTEMPTS, ZKQUEUE_TASK_TIME_LIMIT_S,
ZKQUEUE_VISIBILITY_TIMEOUT_S, ZKQUEUE_KEY_CACHE_BYTES, ZKQUEUE_RESULT_TTL_S,
ZKQUEUE_METRICS_PORT, ZKQUEUE_TASK_EVENTS, ... (every field below, upper-cased).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from pathlib import Path

from .errors import ConfigError

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


def default_store_url() -> str:
    """A local directory: $XDG_DATA_HOME/zkqueue/store (~/.local/share/zkqueue/store)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return str(Path(base) / "zkqueue" / "store")


@dataclass(frozen=True)
class Settings:
    """Everything the client, the workers and the reaper must agree on."""

    redis_url: str = DEFAULT_REDIS_URL
    store_url: str = ""
    lease_ttl_s: float = 6.0            # a worker silent this long has lost its partition
    reaper_interval_s: float = 1.0
    max_attempts: int = 3               # starts per partition before the job fails
    send_grace_s: float = 10.0          # a message being sent this long is sent again
    heartbeat_interval_s: float = 1.0
    heartbeat_ttl_s: float = 5.0
    task_time_limit_s: float = 1800.0   # Celery hard limit of one task
    visibility_timeout_s: float = 3600.0  # kombu's Redis redelivery of unacked messages
    key_cache_bytes: int = 4 << 30
    result_ttl_s: float = 7 * 24 * 3600.0
    max_bounces: int = 60               # re-routes of a partition only its bad worker could take
    metrics_port: int = 0               # Prometheus /metrics of worker i on metrics_port + i; 0: off
    task_events: int = 1                # 1: workers send Celery task events (Flower lists tasks)
    queued_check_s: float = 30.0        # a queued slot's message is checked for (and re-sent) this often
    orphan_grace_s: float = 3.0         # a message taken but not started this long lost its consumer
    orphan_timeout_s: float = 30.0      # a slot no eligible worker can take fails the job after this
    quarantine_after: int = 2           # invalid proofs (confirmed by another build) that quarantine a build
    partition_timeout_s: float = 1500.0  # longest attempt when no proving time was measured yet
    overdue_factor: float = 4.0         # an attempt may run this many times the measured proving time,
    overdue_min_s: float = 10.0         # but at least this long
    stop_grace_s: float = 5.0           # a stopped attempt that does not return this fast is killed

    @property
    def lease_refresh_s(self) -> float:
        return self.lease_ttl_s / 4

    @classmethod
    def from_env(cls, **overrides) -> "Settings":
        """Settings from ZKQUEUE_* variables, then `overrides` (None values ignored).

        Raises:
            ConfigError: a variable that is not a number, or settings that cannot work together.
        """
        values: dict = {}
        for f in fields(cls):
            raw = os.environ.get(f"ZKQUEUE_{f.name.upper()}")
            if raw is None or raw == "":
                continue
            try:
                values[f.name] = raw if f.type == "str" else (int(raw) if f.type == "int" else float(raw))
            except ValueError:
                raise ConfigError(f"ZKQUEUE_{f.name.upper()}={raw!r} is not a number",
                                  expected=f.type, found=raw) from None
        values.update({k: v for k, v in overrides.items() if v is not None})
        settings = cls(**values)
        if not settings.store_url:
            settings = replace(settings, store_url=default_store_url())
        settings.check()
        return settings

    def check(self) -> None:
        """Refuses settings under which a message could be redelivered while still running.

        Raises:
            ConfigError: task_time_limit_s >= visibility_timeout_s, or a lease that cannot
                be refreshed in time.
        """
        if self.task_time_limit_s >= self.visibility_timeout_s:
            raise ConfigError(
                f"task_time_limit_s ({self.task_time_limit_s:g}) must be below the Redis "
                f"visibility_timeout_s ({self.visibility_timeout_s:g}): otherwise Redis redelivers "
                "a task that is still running", expected=f"< {self.visibility_timeout_s:g}",
                found=self.task_time_limit_s)
        if self.lease_ttl_s <= 0 or self.reaper_interval_s <= 0 or self.max_attempts < 1:
            raise ConfigError("lease_ttl_s and reaper_interval_s must be > 0 and max_attempts >= 1",
                              found=(self.lease_ttl_s, self.reaper_interval_s, self.max_attempts))
        if self.partition_timeout_s >= self.task_time_limit_s:
            raise ConfigError(
                f"partition_timeout_s ({self.partition_timeout_s:g}) must be below task_time_limit_s "
                f"({self.task_time_limit_s:g}): the queue, not Celery's hard limit, decides when an attempt "
                "is overdue", expected=f"< {self.task_time_limit_s:g}", found=self.partition_timeout_s)
        if self.quarantine_after < 1:
            raise ConfigError("quarantine_after must be >= 1", expected=">= 1", found=self.quarantine_after)
        if self.heartbeat_interval_s >= self.heartbeat_ttl_s:
            raise ConfigError("heartbeat_interval_s must be below heartbeat_ttl_s",
                              expected=f"< {self.heartbeat_ttl_s:g}", found=self.heartbeat_interval_s)
