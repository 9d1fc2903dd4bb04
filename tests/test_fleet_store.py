"""The artifact store on a real S3 API server (moto's standalone server, s3fs as the fsspec
backend): whole-or-absent uploads under concurrency and kills, multipart, the host cache
(one fetch per host, LRU), and a corrupt or missing object that names itself, is a store
fault, and heals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from fleet_support import BUCKET, S3_ENV, s3_client, s3_env, start_moto, wait_until
from queue_support import CHAIN, PARTITIONS, ROOT, queue, slot_events  # noqa: F401  (fixture)

MiB = 1 << 20
PART = 5 * MiB


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    """(addr, port, log path) of a moto S3 server on loopback with the test bucket."""
    from fleet_support import free_port
    d = tmp_path_factory.mktemp("moto")
    port = free_port()
    proc = start_moto(None, "127.0.0.1", port, d)
    try:
        yield "127.0.0.1", port, d / "moto.log"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.fixture
def s3(moto, monkeypatch, tmp_path):
    """The usual AWS variables pointed at moto (as a deployment sets them), and a fresh prefix."""
    addr, port, _ = moto
    for k, v in s3_env(addr, port).items():
        monkeypatch.setenv(k, v)
    return f"s3://{BUCKET}/{tmp_path.name}"


def _store(url, cache_dir, **kw):
    from zkqueue.coordinator.store import ArtifactStore
    return ArtifactStore(url, cache_dir=cache_dir, part_bytes=PART, **kw)


def _key(url: str, sha: str) -> str:
    return f"{url.split('/', 3)[3]}/sha256/{sha[:2]}/{sha}"


def _file(path, n_bytes: int):
    path.write_bytes(os.urandom(n_bytes))
    return path


def _put_process(url, path, cache_dir, env_extra=None) -> subprocess.Popen:
    """A client in its own process putting `path` (what a second user or host does)."""
    code = ("import sys; from zkqueue.coordinator.store import ArtifactStore; "
            f"print(ArtifactStore({url!r}, cache_dir={str(cache_dir)!r}, part_bytes={PART}).put_file(sys.argv[1]))")
    return subprocess.Popen([sys.executable, "-c", code, str(path)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, **(env_extra or {})))


def test_a_large_key_goes_up_in_parts_with_its_sha256_and_a_second_put_uploads_nothing(s3, tmp_path):
    from zkqueue.coordinator.store import sha256_file
    store = _store(s3, tmp_path / "cache")
    path = _file(tmp_path / "key.zkey", 12 * MiB)
    sha = store.put_file(path)
    assert sha == sha256_file(path)
    c = s3_client(*s3_env_addr())
    head = c.head_object(Bucket=BUCKET, Key=_key(s3, sha))
    assert head["ETag"].strip('"').endswith("-3"), head["ETag"]       # 5 + 5 + 2 MiB: multipart
    assert head["Metadata"] == {"sha256": sha} and head["ContentLength"] == 12 * MiB
    assert store.put_file(path) == sha
    again = c.head_object(Bucket=BUCKET, Key=_key(s3, sha))
    assert (again["ETag"], again["LastModified"]) == (head["ETag"], head["LastModified"])   # not rewritten
    assert store.local_path(sha).read_bytes() == path.read_bytes()


def s3_env_addr():
    url = os.environ["AWS_ENDPOINT_URL"]
    host, port = url.split("//")[1].split(":")
    return host, int(port)


def test_concurrent_puts_and_a_client_killed_mid_upload_never_show_a_partial_object(s3, tmp_path):
    from zkqueue.coordinator.errors import ArtifactMissing
    from zkqueue.coordinator.store import sha256_file
    c = s3_client(*s3_env_addr())
    path = _file(tmp_path / "shared.zkey", 24 * MiB)
    sha = sha256_file(path)
    key = _key(s3, sha)

    # Two clients put the same key at once while a reader keeps reading it: whenever it is
    # there, it is whole.
    seen, stop = [], threading.Event()

    def reader():
        while not stop.is_set():
            try:
                body = c.get_object(Bucket=BUCKET, Key=key)["Body"].read()
            except c.exceptions.NoSuchKey:
                continue
            seen.append(len(body) == path.stat().st_size and __import__("hashlib").sha256(body).hexdigest() == sha)
    t = threading.Thread(target=reader, daemon=True)
    t.start()
    puts = [_put_process(s3, path, tmp_path / f"cache{i}") for i in range(2)]
    outs = [p.communicate(timeout=120) for p in puts]
    stop.set()
    t.join(timeout=30)
    assert [p.returncode for p in puts] == [0, 0], outs
    assert [o[0].strip() for o in outs] == [sha, sha]
    assert all(seen), f"{seen.count(False)} of {len(seen)} reads saw a partial or mixed object"

    # A client killed mid-upload: parts were sent, the object never appears.
    big = _file(tmp_path / "killed.zkey", 80 * MiB)
    big_sha = sha256_file(big)
    big_key = _key(s3, big_sha)
    proc = _put_process(s3, big, tmp_path / "cache-killed")

    def a_part_is_up():
        for up in c.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []):
            if up["Key"] == big_key and c.list_parts(Bucket=BUCKET, Key=big_key,
                                                     UploadId=up["UploadId"]).get("Parts"):
                return True
        assert proc.poll() is None, "the upload finished before it could be killed"
        return False
    wait_until(a_part_is_up, 60, "the first part of the upload")
    proc.kill()
    proc.communicate(timeout=30)
    with pytest.raises(c.exceptions.ClientError):
        c.head_object(Bucket=BUCKET, Key=big_key)
    store = _store(s3, tmp_path / "cache-reader")
    with pytest.raises(ArtifactMissing, match=f"s3://{BUCKET}/.*{big_sha}.*a store fault"):
        store.local_path(big_sha)
    assert store.put_file(big) == big_sha                # the next put completes it
    assert sha256_file(store.local_path(big_sha)) == big_sha


def test_a_corrupt_object_is_named_removed_on_read_and_restored_by_the_next_put(s3, tmp_path):
    from zkqueue.coordinator.errors import ArtifactCorrupt, ArtifactMissing
    c = s3_client(*s3_env_addr())
    path = _file(tmp_path / "w.wtns", 1 * MiB)
    store = _store(s3, tmp_path / "client-cache")
    sha = store.put_file(path)
    key = _key(s3, sha)
    # The store damages it behind zkqueue's back (same size, metadata kept): only a read can tell.
    c.put_object(Bucket=BUCKET, Key=key, Body=os.urandom(MiB), Metadata={"sha256": sha})
    worker = _store(s3, tmp_path / "worker-cache")
    with pytest.raises(ArtifactCorrupt) as info:
        worker.local_path(sha)
    msg = str(info.value)
    assert f"s3://{BUCKET}/{key}" in msg and "removed it" in msg and "a store fault" in msg, msg
    assert not worker.cache.path(sha).exists()          # nothing corrupt kept on the host
    with pytest.raises(ArtifactMissing):
        worker.local_path(sha)
    store.put_file(path)                                # the client holding the good bytes heals it
    assert worker.local_path(sha).read_bytes() == path.read_bytes()

    # Damage a put can see cheaply (a size or stored sha256 that is not the name's): the
    # next put uploads over it, before anyone reads it.
    for body, meta in ((b"short", {"sha256": sha}), (os.urandom(MiB), {}), (os.urandom(MiB), {"sha256": "0" * 64})):
        c.put_object(Bucket=BUCKET, Key=key, Body=body, Metadata=meta)
        store.put_file(path)
        assert c.get_object(Bucket=BUCKET, Key=key)["Body"].read() == path.read_bytes()


def test_an_object_is_fetched_once_per_host_and_the_host_cache_evicts_the_least_recently_used(s3, moto, tmp_path):
    _, _, moto_log = moto
    store = _store(s3, tmp_path / "client")
    paths = [_file(tmp_path / f"k{i}.zkey", 12 * MiB) for i in range(3)]
    shas = [store.put_file(p) for p in paths]
    host_cache = tmp_path / "host" / "artifacts"
    # Two worker processes on one host want the same key at once: one GET between them.
    code = ("import sys; from zkqueue.coordinator.store import ArtifactStore; "
            f"s = ArtifactStore({s3!r}, cache_dir={str(host_cache)!r}, part_bytes={PART}); "
            "print(s.local_path(sys.argv[1]))")
    before = moto_log.read_text().count(f"GET /{BUCKET}/{_key(s3, shas[0])}")
    procs = [subprocess.Popen([sys.executable, "-c", code, shas[0]], cwd=ROOT, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    assert [p.communicate(timeout=60)[0].strip() for p in procs] == [str(host_cache / shas[0])] * 2
    gets = moto_log.read_text().count(f"GET /{BUCKET}/{_key(s3, shas[0])}") - before
    assert gets == 1, f"{gets} GETs of one key by one host"

    # A 30 MiB budget holds two 12 MiB keys: the least recently used one goes.
    cache = _store(s3, host_cache, cache_bytes=30 * MiB)
    cache.local_path(shas[1])
    cache.local_path(shas[0])                           # used last: kept
    cache.local_path(shas[2])
    assert sorted(p.name for p in host_cache.iterdir() if not p.name.startswith(".")) == sorted([shas[0], shas[2]])
    assert cache.cache.used_bytes() <= 30 * MiB


def test_a_job_whose_witness_the_store_damaged_fails_as_a_store_fault_and_a_resubmit_heals_it(s3, queue, tmp_path):
    """The witness object is damaged in S3 after submit: the worker names the object, removes
    it and retries (a store fault, never the input's); the partition fails when its attempts
    run out (the other is delivered), and the same submit again re-uploads the good bytes and
    completes."""
    from zkqueue.coordinator import keys
    from zkqueue.coordinator.client import Client
    c = s3_client(*s3_env_addr())
    from zkqueue.config import Settings
    settings = Settings.from_env(redis_url=queue.redis_url, store_url=s3)
    client = Client(settings=settings)
    queue.clients.append(client)
    aws = {k: os.environ[k] for k in ("AWS_ENDPOINT_URL", *S3_ENV)}
    job = client.submit(CHAIN / "circuit_final.zkey", PARTITIONS[:2])
    sha = queue.r.hget(keys.slot(job.id, 1), "witness").decode()
    c.put_object(Bucket=BUCKET, Key=_key(s3, sha), Body=b"\0" * PARTITIONS[1].stat().st_size, Metadata={"sha256": sha})
    # A worker host of its own: an empty cache (a cache holding the good bytes would be right
    # not to look at the store at all).
    from fleet_support import seed_native_build
    seed_native_build(tmp_path / "worker-cache")
    group = queue.start_workers(1, env={"ZKQUEUE_STORE_URL": s3, "ZKQUEUE_CACHE_DIR": tmp_path / "worker-cache", **aws})
    queue.ready(group)
    partial = job.wait(90)
    assert [p.index for p in partial.partitions] == [0] and [f.index for f in partial.failed] == [1]
    reason = partial.failed[0].reason
    assert f"s3://{BUCKET}/{_key(s3, sha)}" in reason and "a store fault, not the input's" in reason, reason
    st = job.status()
    assert not slot_events(st, 1, "input_error") and slot_events(st, 1, "retry"), st.partitions[1].events

    again = client.submit(CHAIN / "circuit_final.zkey", PARTITIONS[:2])     # heals the object
    result = again.wait(90)
    assert [p.index for p in result.partitions] == [0, 1]
