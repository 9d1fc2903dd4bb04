"""zkqueue across machines, each machine a network namespace (tests/hosts.py): Redis over TLS
with the role users on one host, moto's S3 server on another, two worker hosts, a client
host. Nothing but the network joins them: artifacts go through S3, each host has its own
cache and host name. This is docs/operations.md's "Running across several machines", with its
settings (Fleet.env)."""

from __future__ import annotations

import hashlib

from fleet_support import CHAIN, PARTITIONS, Fleet, network, snarkjs_accepts_all  # noqa: F401  (fixture)


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_job_from_the_client_host_proved_on_two_worker_hosts_with_s3_and_tls_role_users(network, tmp_path):
    fleet = Fleet(network, tmp_path)
    w1, _ = fleet.start_workers("w1")
    w2, _ = fleet.start_workers("w2")
    fleet.workers_ready(["w1", "w2"])
    files = PARTITIONS * 2                      # 8 partitions: both hosts get some
    out = fleet.client.dir / "out"
    job_id = fleet.finished(fleet.submit(files, out), 150)

    snarkjs_accepts_all(out, len(files))
    status = fleet.status(job_id)
    assert status["state"] == "done"
    hosts_used = {p["worker"].split("-cpu")[0] for p in status["partitions"]}
    assert hosts_used == {"w1", "w2"}, status["partitions"]

    # The artifacts are in the bucket, and only there: each worker host fetched the key once
    # into its own cache; the client host fetched nothing.
    zkey = _sha(CHAIN / "circuit_final.zkey")
    assert fleet.gets_of(zkey) == 2, fleet.gets_of(zkey)
    for sha in map(_sha, PARTITIONS):
        assert 1 <= fleet.gets_of(sha) <= 2, sha
    for host in (w1, w2):
        assert (host.cache_dir / "artifacts" / zkey).is_file(), host.name
    assert not (fleet.client.cache_dir / "artifacts").exists() or not any(
        p for p in (fleet.client.cache_dir / "artifacts").iterdir() if not p.name.startswith("."))

    # Every role did its work without one refused command.
    assert fleet.ask(lambda r: r.acl_log()) == []
