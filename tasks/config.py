"""The worker-side Celery configuration, and the start-up checks it must pass."""

from __future__ import annotations

from zkqueue.coordinator.broker import celery_config
from zkqueue.coordinator.errors import ConfigError
from zkqueue.config import Settings


def worker_config(settings: Settings, *, task_events: bool = True) -> dict:
    """Celery settings for a zkqueue worker (one device, one task at a time).

    Raises:
        ConfigError: see check().
    """
    conf = celery_config(settings)
    conf.update(
        # A partition is acknowledged only once it is done; a pool child killed mid-task
        # puts its message back at once instead of acking it as a failure.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_acks_on_failure_or_timeout=True,   # retries are ours (the transition scripts), not Celery's
        worker_prefetch_multiplier=1,           # never hold a message another device could run
        worker_concurrency=1,                   # one device, one partition
        worker_pool="prefork",                  # CUDA lives in the child, never in the parent
        task_time_limit=settings.task_time_limit_s,
        worker_send_task_events=task_events,   # Flower's task list
        task_send_sent_event=False,
        worker_cancel_long_running_tasks_on_connection_loss=True,
        worker_hijack_root_logger=False,
    )
    check(conf)
    return conf


def check(conf: dict) -> None:
    """Refuses a configuration that could lose, duplicate or execute untrusted messages.

    Raises:
        ConfigError: task_time_limit >= visibility_timeout, pickle accepted, or acks/prefetch
            settings that break the reliability rules.
    """
    vt = conf["broker_transport_options"]["visibility_timeout"]
    if conf["task_time_limit"] >= vt:
        raise ConfigError(f"task_time_limit ({conf['task_time_limit']:g} s) must be below the Redis "
                          f"visibility_timeout ({vt:g} s)", expected=f"< {vt:g}", found=conf["task_time_limit"])
    for key in ("accept_content", "result_accept_content"):
        if any("pickle" in c or "python-serialize" in c for c in conf[key]):
            raise ConfigError(f"{key} must not accept pickle", expected="msgpack, json", found=conf[key])
    if conf["task_serializer"] not in ("msgpack", "json"):
        raise ConfigError("task_serializer must be msgpack or json", found=conf["task_serializer"])
    if not (conf["task_acks_late"] and conf["task_reject_on_worker_lost"]):
        raise ConfigError("task_acks_late and task_reject_on_worker_lost must both be on")
    if conf["worker_prefetch_multiplier"] != 1 or conf["worker_concurrency"] != 1:
        raise ConfigError("one task at a time per device: prefetch 1, concurrency 1",
                          found=(conf["worker_prefetch_multiplier"], conf["worker_concurrency"]))
