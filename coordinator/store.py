"""The content-addressed artifact store: proving keys, witnesses, inputs and circuits named by
their sha256, at ``{root}/sha256/{h[:2]}/{h}`` under any fsspec URL.

One rule for every backend: an object appears whole or not at all.

* a local directory (the default; one host only): written to a temporary name in the same
  directory and renamed into place;
* S3 and what speaks its API (``s3://bucket/prefix`` through s3fs: AWS S3, MinIO, Ceph RGW):
  one PUT, or from twice `store_part_bytes` on a multipart upload, whose parts stay invisible until
  its CompleteMultipartUpload; the object carries its sha256 as metadata
  (``x-amz-meta-sha256``). Two clients putting the same object at once both write the same
  bytes; a client killed mid-upload leaves at most an incomplete multipart upload, which no
  reader sees (a bucket lifecycle rule aborts them);
* any other fsspec filesystem: a temporary name, then a move.

A put is idempotent and heals: an existing object is skipped only when it looks intact, a
cheap check without reading it (its size, and on S3 its stored sha256); otherwise the good
bytes go over it. Reads verify: a remote object is fetched once per host into the host's
cache (coordinator/hostcache.py) and checked against its name on the way in. An object whose
bytes do not hash to its name is removed from the store (when it has not changed since it
was read), so that the next put of the good bytes restores it, and ArtifactCorrupt names
it. A missing or corrupt object is a store fault (coordinator/errors.py: retried, never
blamed on the input).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import fsspec

from zkqueue import config

from .errors import ArtifactCorrupt, ArtifactMissing, BadRequest, ConfigError, StoreError
from .hostcache import HostCache

CHUNK_BYTES = 1 << 20
MIN_PART_BYTES = 5 << 20       # S3's smallest part (but the last)
SHA_METADATA = "sha256"        # S3 user metadata: x-amz-meta-sha256


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

    def __init__(self, url: str, *, cache_dir: str | Path | None = None, cache_bytes: int | None = None,
                 part_bytes: int | None = None):
        """`cache_dir`, `cache_bytes`: the host cache of a remote store's objects (default: the
        process's settings, CACHE_DIR/artifacts and ZKQUEUE_STORE_CACHE_BYTES); `part_bytes`:
        the multipart threshold and part size (ZKQUEUE_STORE_PART_BYTES).

        Raises:
            ConfigError: a part size below S3's 5 MiB.
        """
        proc = config.process()
        self.url = url
        self.fs, self.root = fsspec.core.url_to_fs(url)
        protocols = set(self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,))
        self.local = "file" in protocols or "local" in protocols
        self.s3 = bool({"s3", "s3a"} & protocols)
        self.part_bytes = part_bytes or proc.store_part_bytes
        if self.part_bytes < MIN_PART_BYTES:
            raise ConfigError(f"ZKQUEUE_STORE_PART_BYTES={self.part_bytes} is below S3's smallest part (5 MiB)",
                              expected=f">= {MIN_PART_BYTES}", found=self.part_bytes)
        self.cache = HostCache(Path(cache_dir) if cache_dir else proc.cache_path / "artifacts",
                               cache_bytes or proc.store_cache_bytes)
        if self.local:
            os.makedirs(self.root, exist_ok=True)

    @property
    def cache_dir(self) -> Path:
        return self.cache.root

    def _name(self, sha: str) -> str:
        return f"{self.root.rstrip('/')}/sha256/{sha[:2]}/{sha}"

    def object_url(self, sha: str) -> str:
        """Where artifact `sha` lives, as a URL (a path for a local store): for messages."""
        name = self._name(sha)
        return name if self.local else self.fs.unstrip_protocol(name)

    # -- put -------------------------------------------------------------------------------

    def put_file(self, path: str | Path) -> str:
        """Stores a local file (unless an intact copy is there already) and returns its sha256.

        Raises:
            BadRequest: `path` cannot be read.
            StoreError: the store cannot be written.
        """
        try:
            sha, size = sha256_file(path), os.path.getsize(path)
        except OSError as exc:
            raise BadRequest(f"{path}: cannot read: {exc.strerror or exc}", found=str(path)) from None
        name = self._name(sha)
        try:
            head = self._head(name)
            # S3 keeps the sha256 it was given: an object without it, or with another, is redone.
            if head is not None and head[0] == size and (not self.s3 or head[1] == sha):
                return sha
            self._upload(str(path), name, sha)
        except OSError as exc:
            raise StoreError(f"cannot write {self.object_url(sha)} in the store {self.url}: {exc}") from exc
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
        """A new object to stream into the store (an HTTP upload): write() chunks, then
        commit() or abort().

        Raises:
            StoreError: the store cannot be written.
        """
        return Upload(self)

    def size(self, sha: str) -> int:
        """Bytes of artifact `sha` (one metadata request).

        Raises:
            ArtifactMissing: not in the store.
        """
        head = self._head(self._name(sha))
        if head is None:
            raise self._missing(sha)
        return int(head[0])

    def _head(self, name: str) -> tuple[int, str | None, str] | None:
        """(size, stored sha256 or None, version tag) of an object, None when there is none:
        one metadata request, no data read."""
        try:
            if self.local:
                st = os.stat(name)
                return st.st_size, None, f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"
            if self.s3:
                bucket, key, _ = self.fs.split_path(name)
                resp = self.fs.call_s3("head_object", Bucket=bucket, Key=key)
                return resp["ContentLength"], (resp.get("Metadata") or {}).get(SHA_METADATA), resp.get("ETag", "")
            info = self.fs.info(name, refresh=True)
            return info["size"], None, str(info.get("ETag") or info.get("mtime") or info.get("size"))
        except FileNotFoundError:
            return None

    def _upload(self, path: str, name: str, sha: str) -> None:
        directory = name.rsplit("/", 1)[0]
        if self.local:
            os.makedirs(directory, exist_ok=True)
            tmp = f"{name}.tmp-{os.getpid()}-{os.urandom(4).hex()}"
            try:
                shutil.copyfile(path, tmp)
                os.replace(tmp, name)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        elif self.s3:
            # A PUT, or parts of part_bytes that become the object only at the end: never half of it.
            self.fs.put_file(path, name, chunksize=self.part_bytes, Metadata={SHA_METADATA: sha},
                             ContentType="application/octet-stream")
        else:
            self.fs.makedirs(directory, exist_ok=True)
            tmp = f"{name}.tmp-{os.getpid()}-{os.urandom(4).hex()}"
            self.fs.put_file(path, tmp)
            self.fs.mv(tmp, name)

    # -- get -------------------------------------------------------------------------------

    def exists(self, sha: str) -> bool:
        return self._head(self._name(sha)) is not None

    def local_path(self, sha: str, *, verify: bool = True) -> Path:
        """A local file holding artifact `sha`: the object itself in a local store, else the
        host cache's copy (fetched now if this host has none). Bytes fetched now are always
        checked against `sha`; a cached or local copy is checked when `verify`.

        Raises:
            ArtifactMissing: not in the store (a shared store may lag).
            ArtifactCorrupt: the store's bytes do not hash to `sha` (the object is removed).
            StoreError: the store cannot be read.
        """
        name = self._name(sha)
        if self.local:
            path = Path(name)
            head = self._head(name)
            if head is None:
                raise self._missing(sha)
            if verify:
                found = sha256_file(path)
                if found != sha:
                    raise self._corrupt(sha, found, head)
            return path

        def fetch(tmp: Path) -> None:
            try:
                head = self._head(name)
                if head is None:
                    raise self._missing(sha)
                self.fs.get_file(name, str(tmp))
            except FileNotFoundError:
                raise self._missing(sha) from None
            except OSError as exc:
                raise StoreError(f"cannot fetch {self.object_url(sha)} from the store {self.url}: {exc}") from exc
            found = sha256_file(tmp)
            if found != sha:
                raise self._corrupt(sha, found, head)

        path, fetched = self.cache.get(sha, fetch)
        if verify and not fetched and sha256_file(path) != sha:
            # This host's copy rotted (the store's was checked on the way in): fetch it again.
            self.cache.drop(sha)
            path, _ = self.cache.get(sha, fetch)
        return path

    def _missing(self, sha: str) -> ArtifactMissing:
        return ArtifactMissing(f"artifact {sha} is not in the store {self.url} (object {self.object_url(sha)}): "
                               "a store fault, not the input's", expected=self.object_url(sha))

    def _corrupt(self, sha: str, found: str, head: tuple) -> ArtifactCorrupt:
        """Removes a corrupt object from the store (when it is still the copy that was read:
        a client may have put the good bytes since) and says so."""
        name, removed = self._name(sha), False
        try:
            now = self._head(name)
            if now is not None and now[2] == head[2]:
                self.fs.rm_file(name) if not self.local else os.unlink(name)
                removed = True
        except OSError:
            pass
        what = ("removed it, so that the next put of the good bytes restores it" if removed
                else "it has changed since it was read, so it was left in place")
        return ArtifactCorrupt(f"artifact {sha} is corrupt in the store {self.url}: object {self.object_url(sha)} "
                               f"hashes to {found}; {what} (a store fault, not the input's)",
                               expected=sha, found=found)


class Upload:
    """One object streamed into the store (an HTTP upload): hashed as it is written, and made
    an object under its sha256 name only by commit(), so a reader never sees a half-written
    or unchecked object and an aborted upload leaves nothing behind. The bytes go to a
    temporary file beside a local store (renamed into place), or on this host's disk for a
    remote one (then put as put_file does: whole, with its sha256), never into memory.

    Not thread-safe; the API writes each upload from one thread at a time.
    """

    def __init__(self, store: ArtifactStore):
        self.store = store
        spool = Path(store.root) / "uploads" if store.local else store.cache_dir / "uploads"
        self._hash = hashlib.sha256()
        self.size = 0
        try:
            spool.mkdir(parents=True, exist_ok=True)
            self.tmp = spool / f"{os.getpid()}-{os.urandom(8).hex()}"
            self._file = open(self.tmp, "wb")
        except OSError as exc:
            raise StoreError(f"cannot write an upload under {spool} for the store {store.url}: {exc}") from exc

    def write(self, data: bytes) -> None:
        """Appends `data`.

        Raises:
            StoreError: the bytes cannot be written.
        """
        self._hash.update(data)
        self.size += len(data)
        try:
            self._file.write(data)
        except OSError as exc:
            self.abort()
            raise StoreError(f"cannot write {self.tmp} for the store {self.store.url}: {exc}") from exc

    @property
    def sha256(self) -> str:
        """The hex sha256 of what was written so far."""
        return self._hash.hexdigest()

    def commit(self) -> tuple[str, bool]:
        """Makes the object; returns (sha256, True when an intact copy was there already, in
        which case this one is dropped).

        Raises:
            StoreError: the store cannot be written.
        """
        sha, store = self.sha256, self.store
        name = store._name(sha)
        try:
            self._file.close()
            head = store._head(name)
            if head is not None and head[0] == self.size and (not store.s3 or head[1] == sha):
                self.abort()
                return sha, True
            if store.local:
                os.makedirs(name.rsplit("/", 1)[0], exist_ok=True)
                os.replace(self.tmp, name)
            else:
                store._upload(str(self.tmp), name, sha)
                self.abort()
        except OSError as exc:
            self.abort()
            raise StoreError(f"cannot store {store.object_url(sha)} in {store.url}: {exc}") from exc
        return sha, False

    def abort(self) -> None:
        """Drops the temporary bytes (never raises: it runs on error paths)."""
        try:
            self._file.close()
        except Exception:   # noqa: BLE001 - closing a broken stream must not hide the first error
            pass
        Path(self.tmp).unlink(missing_ok=True)
