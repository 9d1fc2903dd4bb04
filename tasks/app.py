"""The Celery app of the workers. tasks/main.py configures it before the worker starts."""

from __future__ import annotations

from celery import Celery

from zkqueue.config import ProcessSettings, Settings

from .config import worker_config

app = Celery("zkqueue", set_as_current=True)


def configure(settings: Settings, proc: ProcessSettings) -> Celery:
    """Applies the worker configuration (checked) to the app.

    Raises:
        ConfigError: the settings fail the start-up checks.
    """
    app.conf.update(worker_config(settings, task_events=proc.task_events and _flower_watching(settings)))
    return app


def _flower_watching(settings: Settings) -> bool:
    """Task events cost three Redis commands per task: sent from the start only while Flower
    runs (coordinator/monitors.py); Flower's enable_events turns them on later otherwise."""
    from zkqueue.coordinator import connections
    from zkqueue.coordinator.monitors import flower_watching
    r = connections.client(settings)
    try:
        return flower_watching(r)
    finally:
        r.close()
