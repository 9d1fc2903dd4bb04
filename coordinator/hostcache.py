"""A host's local copies of a remote store's objects: each fetched once per host, kept
within a byte budget, least recently used evicted first.

Every zkqueue process on a host that uses the same cache directory (`ZKQUEUE_CACHE_DIR`,
`/artifacts`) shares it: a file lock per object makes the second process that wants an
object wait for the first one's download instead of fetching it again, so a proving key is
fetched once per host however many workers the host runs. Objects are written to a
temporary name and renamed into place, so no process ever sees half of one. A use touches
the file's mtime, which is the LRU clock; eviction (under a cache-wide lock) removes the
oldest files until the cache fits its budget again. Removing a file that a process still
has open or mapped is safe on POSIX: that process keeps its copy until it closes it.
"""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

LOCKS = ".locks"
STALE_TMP_S = 3600.0      # a temporary file this old belongs to a download that died


@contextmanager
def _flock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)          # closing releases the lock


class HostCache:
    """sha256 -> a local file, shared by the host's processes, bounded by `budget_bytes`."""

    def __init__(self, root: str | Path, budget_bytes: int):
        self.root = Path(root)
        self.budget_bytes = budget_bytes

    def path(self, sha: str) -> Path:
        return self.root / sha

    def get(self, sha: str, fetch: Callable[[Path], None]) -> tuple[Path, bool]:
        """(the local file of `sha`, whether it was fetched now). `fetch(tmp)` writes the
        object's verified bytes to `tmp`; it runs at most once on this host for concurrent
        callers, and what it raises propagates (nothing is cached then)."""
        path = self.path(sha)
        if self._touch(path):
            return path, False
        with _flock(self.root / LOCKS / sha):
            if self._touch(path):          # another process fetched it while we waited
                return path, False
            tmp = self.root / f".{sha}.tmp-{os.getpid()}-{os.urandom(4).hex()}"
            try:
                fetch(tmp)
                os.replace(tmp, path)
            finally:
                tmp.unlink(missing_ok=True)
        self.evict(keep=sha)
        return path, True

    def drop(self, sha: str) -> None:
        """Forgets a local copy (found corrupt: the next get fetches it again)."""
        self.path(sha).unlink(missing_ok=True)

    def used_bytes(self) -> int:
        return sum(size for _, size, _ in self._entries())

    def _touch(self, path: Path) -> bool:
        try:
            os.utime(path)
            return True
        except FileNotFoundError:
            return False

    def _entries(self) -> list[tuple[float, int, Path]]:
        """(mtime, size, path) of every cached object, oldest first; removes stale temporaries."""
        out = []
        now = time.time()
        try:
            items = list(os.scandir(self.root))
        except FileNotFoundError:
            return []
        for entry in items:
            try:
                st = entry.stat()
            except FileNotFoundError:
                continue
            if entry.name.startswith("."):
                if ".tmp-" in entry.name and now - st.st_mtime > STALE_TMP_S:
                    Path(entry.path).unlink(missing_ok=True)
                continue
            if entry.is_file():
                out.append((st.st_mtime, st.st_size, Path(entry.path)))
        return sorted(out)

    def evict(self, keep: str = "") -> list[str]:
        """Removes the least recently used objects (never `keep`) until the cache fits its
        budget; returns the names removed."""
        removed = []
        with _flock(self.root / LOCKS / ".evict"):
            entries = self._entries()
            used = sum(size for _, size, _ in entries)
            for _, size, path in entries:
                if used <= self.budget_bytes:
                    break
                if path.name == keep:
                    continue
                # (its lock file stays: another process may hold it open this instant)
                path.unlink(missing_ok=True)
                used -= size
                removed.append(path.name)
        return removed
