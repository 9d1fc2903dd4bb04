"""`zkqueue worker --preload KEY...`: the keys a worker loads as it starts, so that the first
partition of each does not pay for loading it (on a GPU: the points checked and resident on
the device, the coefficient index built).

A KEY is a .zkey file (hashed, and read from where it is) or the sha256 name of a key in the
artifact store (fetched into this host's cache). The loads run on a thread of the pool
child, after it forks (CUDA lives there), so the worker takes work at once: a partition of a
key being preloaded waits for that load (PartitionProver.key loads each key once) instead of
loading it a second time.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from pathlib import Path

from . import context

log = logging.getLogger("zkqueue.preload")

SHA256 = re.compile(r"^[0-9a-f]{64}$")


def start(ctx: context.Context) -> threading.Thread | None:
    """Starts loading the worker's --preload keys on a daemon thread (None when there are none)."""
    if not ctx.identity.preload:
        return None
    thread = threading.Thread(target=_load_all, args=(ctx,), name="zkqueue-preload", daemon=True)
    thread.start()
    return thread


def _load_all(ctx: context.Context) -> None:
    for spec in ctx.identity.preload:
        t0 = time.perf_counter()
        try:
            sha, path = resolve(ctx, spec)
            ctx.prover.key(sha, lambda: path)
            ctx.prover.shape(sha, lambda: path)
        except Exception as exc:  # noqa: BLE001 - a key that cannot be preloaded is loaded (and blamed) by its partitions
            log.error("--preload %s: not loaded: %s", spec, exc)
            continue
        log.info("--preload %s: key %s loaded in %.2f s", spec, sha[:12], time.perf_counter() - t0)


def resolve(ctx: context.Context, spec: str) -> tuple[str, Path]:
    """(sha256, local path) of a --preload KEY.

    Raises:
        FileNotFoundError: neither a file nor a sha256 name.
        coordinator StoreError: the store has no such object.
    """
    from zkqueue.coordinator.store import sha256_file
    p = Path(spec)
    if p.is_file():
        return sha256_file(p), p
    if SHA256.match(spec):
        return spec, ctx.store.local_path(spec)
    raise FileNotFoundError(f"--preload {spec}: neither a .zkey file nor a sha256 name of a stored key")
