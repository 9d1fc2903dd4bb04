"""The content-addressed artifact store: proving keys and witnesses named by their sha256.

Backed by fsspec, so the store URL may be a local directory (the default), file://,
s3://, gs:// or any filesystem fsspec knows; several machines share one store by URL.
Objects live at ``{root}/sha256/{h[:2]}/{h}``. Writes go to a temporary name and are
moved into place, so a reader never sees half an object. Readers get a local path: the
object itself for a local store, or a verified copy in a local cache for a remote one.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import fsspec

from zkqueue import config

from .errors import ArtifactCorrupt, ArtifactMissing, BadRequest, StoreError

CHUNK_BYTES = 1 << 20


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a local file, read in chunks.

    Raises:
        OSError: the file cannot be read.
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK_BYTES):
            h.update(chunk)
    return h.hexdigest()


class ArtifactStore:
    """Puts and gets immutable artifacts by sha256 on any fsspec filesystem."""

    def __init__(self, url: str, *, cache_dir: str | Path | None = None):
        """`cache_dir`: where copies of a remote store's objects are kept (default: the
        process's cache directory, config.process().cache_dir, /artifacts)."""
        self.url = url
        self.fs, self.root = fsspec.core.url_to_fs(url)
        self.local = "file" in (self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,))
        self.cache_dir = Path(cache_dir) if cache_dir else config.process().cache_path / "artifacts"
        if self.local:
            os.makedirs(self.root, exist_ok=True)

    def _name(self, sha: str) -> str:
        return f"{self.root.rstrip('/')}/sha256/{sha[:2]}/{sha}"

    def put_file(self, path: str | Path) -> str:
        """Stores a local file (unless already present) and returns its sha256.

        Raises:
            BadRequest: `path` cannot be read.
            StoreError: the store cannot be written.
        """
        try:
            sha = sha256_file(path)
        except OSError as exc:
            raise BadRequest(f"{path}: cannot read: {exc.strerror or exc}", found=str(path)) from None
        name = self._name(sha)
        try:
            if self.fs.exists(name):
                return sha
            self.fs.makedirs(name.rsplit("/", 1)[0], exist_ok=True)
            tmp = f"{name}.tmp-{os.getpid()}-{os.urandom(4).hex()}"
            self.fs.put_file(str(path), tmp)
            self.fs.mv(tmp, name)
        except OSError as exc:
            raise StoreError(f"cannot write {name} in the store {self.url}: {exc}") from exc
        return sha

    def put_bytes(self, data: bytes) -> str:
        """Stores bytes and returns their sha256.

        Raises:
            StoreError: the store cannot be written.
        """
        with tempfile.NamedTemporaryFile(delete=False) as f:
            f.write(data)
        try:
            return self.put_file(f.name)
        finally:
            os.unlink(f.name)

    def open_upload(self) -> "Upload":
        """A new object to stream into the store: write() chunks, then commit() or abort().

        Raises:
            StoreError: the store cannot be written.
        """
        return Upload(self)

    def size(self, sha: str) -> int:
        """Bytes of artifact `sha`.

        Raises:
            ArtifactMissing: not in the store.
        """
        try:
            return int(self.fs.size(self._name(sha)))
        except FileNotFoundError:
            raise ArtifactMissing(f"artifact {sha} is not in the store {self.url}") from None

    def exists(self, sha: str) -> bool:
        return self.fs.exists(self._name(sha))

    def local_path(self, sha: str, *, verify: bool = True) -> Path:
        """A local file holding artifact `sha`, checked against its hash when `verify`.

        Raises:
            ArtifactMissing: not in the store (retryable: a shared store may lag).
            ArtifactCorrupt: the bytes do not hash to `sha` (not retryable).
        """
        name = self._name(sha)
        if self.local:
            path = Path(name)
            if not path.exists():
                raise ArtifactMissing(f"artifact {sha} is not in the store {self.url}", expected=str(path))
        else:
            path = self.cache_dir / sha
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(f"{sha}.tmp-{os.getpid()}")
                try:
                    self.fs.get_file(name, str(tmp))
                except FileNotFoundError:
                    raise ArtifactMissing(f"artifact {sha} is not in the store {self.url}") from None
                except OSError as exc:
                    raise StoreError(f"cannot fetch {name}: {exc}") from exc
                found = sha256_file(tmp)
                if found != sha:
                    tmp.unlink(missing_ok=True)
                    raise ArtifactCorrupt(f"artifact {sha} fetched from {self.url} hashes to {found}",
                                          expected=sha, found=found)
                tmp.replace(path)
                return path
        if verify:
            found = sha256_file(path)
            if found != sha:
                raise ArtifactCorrupt(f"artifact {path} does not hash to its name (found {found})",
                                      expected=sha, found=found)
        return path


class Upload:
    """One object streamed into the store (an HTTP upload): hashed as it is written under a
    temporary name, and moved to its sha256 name only by commit(), so a reader never sees a
    half-written or unchecked object and an aborted upload leaves nothing behind.

    Not thread-safe; the API writes each upload from one thread at a time.
    """

    def __init__(self, store: ArtifactStore):
        self.store = store
        self.tmp = f"{store.root.rstrip('/')}/uploads/{os.getpid()}-{os.urandom(8).hex()}"
        self._hash = hashlib.sha256()
        self.size = 0
        try:
            store.fs.makedirs(self.tmp.rsplit("/", 1)[0], exist_ok=True)
            self._file = store.fs.open(self.tmp, "wb")
        except OSError as exc:
            raise StoreError(f"cannot write {self.tmp} in the store {store.url}: {exc}") from exc

    def write(self, data: bytes) -> None:
        """Appends `data`.

        Raises:
            StoreError: the store cannot be written.
        """
        self._hash.update(data)
        self.size += len(data)
        try:
            self._file.write(data)
        except OSError as exc:
            self.abort()
            raise StoreError(f"cannot write {self.tmp} in the store {self.store.url}: {exc}") from exc

    @property
    def sha256(self) -> str:
        """The hex sha256 of what was written so far."""
        return self._hash.hexdigest()

    def commit(self) -> tuple[str, bool]:
        """Moves the object to its name; returns (sha256, True when it was already there, in
        which case this copy is dropped).

        Raises:
            StoreError: the store cannot be written.
        """
        sha = self.sha256
        name = self.store._name(sha)
        fs = self.store.fs
        try:
            self._file.close()
            if fs.exists(name):
                fs.rm(self.tmp)
                return sha, True
            fs.makedirs(name.rsplit("/", 1)[0], exist_ok=True)
            fs.mv(self.tmp, name)
        except OSError as exc:
            self.abort()
            raise StoreError(f"cannot store {name} in {self.store.url}: {exc}") from exc
        return sha, False

    def abort(self) -> None:
        """Drops the temporary object (never raises: it runs on error paths)."""
        try:
            self._file.close()
        except Exception:   # noqa: BLE001 - closing a broken stream must not hide the first error
            pass
        try:
            self.store.fs.rm(self.tmp)
        except (OSError, FileNotFoundError):
            pass
