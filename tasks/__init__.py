"""The Celery app, its configuration and the thin task wrappers. Only the worker entry
point (tasks/main.py) imports this package."""
