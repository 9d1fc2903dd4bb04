"""Witness synthesis on the queue, through real Redis and real worker processes: jobs submitted
as circuit inputs + the circom .wasm, each witness computed by a CPU worker, stored content
addressed, and its partition proved as soon as it exists."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time

import pytest

from conftest import snarkjs_verifies
from queue_support import (CHAIN, PARTITIONS, ROOT, WorkerGroup, assert_snarkjs_accepts, queue,  # noqa: F401
                           slot_events, wait_until)

from zkqueue.coordinator import keys
from zkqueue.coordinator.broker import queue_lists
from zkqueue.coordinator.client import Client
from zkqueue.coordinator.errors import BadRequest, JobFailed
from zkqueue.coordinator.jobs import JobState, SlotState

ZKEY = CHAIN / "circuit_final.zkey"
WASM = CHAIN / "circuit_js" / "circuit.wasm"
VK = CHAIN / "verification_key.json"
FIXTURE_INPUTS = [CHAIN / "partitions" / f"input_{i}.json" for i in range(4)]


def _inputs(tmp_path, n: int) -> list:
    """The fixture's 4 inputs, then more for the same chain circuit (any x and pub are valid:
    every signal is computed from them; circuit.circom)."""
    paths = list(FIXTURE_INPUTS[:n])
    for i in range(len(paths), n):
        p = tmp_path / f"input_{i}.json"
        p.write_text(json.dumps({"pub": [str(3 + i), str(5 + i), str(7 + i), str(11 + i)], "x": str(1000 + 17 * i)}))
        paths.append(p)
    return paths


def _events(st, name: str) -> list[dict]:
    return sorted((e for p in st.partitions for e in p.events if e["event"] == name), key=lambda e: e["at"])


def test_one_cpu_worker_proves_the_first_partition_before_the_last_witness_exists(queue, tmp_path):
    group = queue.start_workers(1)
    queue.ready(group)
    client = queue.client()
    inputs = _inputs(tmp_path, 8)
    job = client.submit(ZKEY, inputs=inputs, wasm=WASM)
    result = job.wait(180)

    st = job.status()
    assert st.state == JobState.DONE
    synthesized, proved = _events(st, "synthesized"), _events(st, "proved")
    assert sorted(int(e["slot"]) for e in synthesized) == list(range(8))
    assert sorted(int(e["slot"]) for e in proved) == list(range(8))
    # Pipelined: a proof was recorded before the last witness was computed.
    assert proved[0]["at"] < synthesized[-1]["at"], (proved, synthesized)
    # Every witness once, and each partition proved only after its own witness existed.
    for p in st.partitions:
        assert p.synth_attempts == 1 and len(slot_events(st, p.index, "synth_started")) == 1
        assert slot_events(st, p.index, "synthesized")[0]["at"] <= slot_events(st, p.index, "proved")[0]["at"]
        assert p.timings_s["synth_s"] > 0
    assert st.timings_s["synth_s"] > 0

    # The stored witnesses are content addressed and equal the ones snarkjs computed.
    for i in range(4):
        sha = queue.r.hget(keys.slot(job.id, i), "witness").decode()
        expected = (CHAIN / "partitions" / f"witness_{i}.wtns").read_bytes()
        assert sha == hashlib.sha256(expected).hexdigest(), f"witness {i} differs from snarkjs's"
    assert_snarkjs_accepts(result.partitions, VK, tmp_path)

    t0 = st.created_at
    timeline = [(round(e["at"] - t0, 3), e["event"], int(e["slot"])) for e in
                sorted(synthesized + proved + _events(st, "synth_started"), key=lambda e: e["at"])]
    print("timeline (s after submit, event, partition):", *timeline, sep="\n  ")


def test_a_bad_input_fails_an_all_or_nothing_job_at_once_naming_the_file_without_retries(queue, tmp_path):
    group = queue.start_workers(1)
    queue.ready(group)
    bad = tmp_path / "bad_input.json"
    bad.write_text(json.dumps({"pub": ["1", "2", "3", "4"], "x": "5", "y": "6"}))
    inputs = [FIXTURE_INPUTS[0], bad, *FIXTURE_INPUTS[1:]]
    job = queue.client().submit(ZKEY, inputs=inputs, wasm=WASM, all_or_nothing=True)
    with pytest.raises(JobFailed) as info:
        job.wait(60)
    message = str(info.value)
    assert f'partition 1: {bad}: unknown input signal "y": circuit.wasm has no input of that name' in message

    st = job.status()
    assert st.state == JobState.FAILED and st.error_slot == "1"
    failed = st.partitions[1]
    assert failed.state == SlotState.FAILED
    assert failed.synth_attempts == 1
    assert len(slot_events(st, 1, "synth_started")) == 1
    [err] = _events(st, "input_error")
    assert err["slot"] == "1" and "unknown input signal" in err["reason"]
    assert not _events(st, "retry") and not _events(st, "lost")
    # At once: failed by the attempt that found it, not after retries or a deadline.
    assert st.finished_at - slot_events(st, 1, "synth_started")[0]["at"] < 5.0
    # The inputs after it are never computed; nothing is left for the reaper.
    assert all(p.synth_attempts == 0 for p in st.partitions[2:])
    wait_until(lambda: not [m for m in queue.r.zrange(keys.deadlines(), 0, -1) if m.decode().startswith(job.id)],
               10, "the job's deadlines to be dropped")


def test_cli_submit_wasm_wait_writes_verified_proofs(queue, tmp_path):
    group = queue.start_workers(1)
    queue.ready(group)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "zkqueue.cli", "submit", ZKEY, "--wasm", WASM,
                           *FIXTURE_INPUTS[:3], "--out", out, "--wait", "--timeout", "120"],
                          env=queue.env(), cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "3 verified proofs" in proc.stdout
    assert "synthesizing" in proc.stderr, proc.stderr       # the progress shows the synthesis phase
    job_id = proc.stderr.split("submitted job ")[1].split()[0]
    for i in range(3):
        assert snarkjs_verifies(VK, out / f"public_{i}.json", out / f"proof_{i}.json"), i
    status = subprocess.run([sys.executable, "-m", "zkqueue.cli", "status", job_id, "--json"], env=queue.env(),
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    parts = json.loads(status.stdout)["partitions"]
    assert [(p["phase"], p["synth_attempts"]) for p in parts] == [("verified", 1)] * 3


def test_submit_refuses_unclear_requests(queue, tmp_path):
    client = queue.client()
    witness = CHAIN / "partitions" / "witness_0.wtns"
    with pytest.raises(BadRequest, match="either witnesses or inputs"):
        client.submit(ZKEY, [witness], inputs=FIXTURE_INPUTS[:1], wasm=WASM)
    with pytest.raises(BadRequest, match=r"inputs need the circuit's \.wasm"):
        client.submit(ZKEY, inputs=FIXTURE_INPUTS[:1])
    with pytest.raises(BadRequest, match="a .wasm without inputs"):
        client.submit(ZKEY, wasm=WASM)
    not_json = tmp_path / "in.json"
    not_json.write_text("{pub: 1")
    with pytest.raises(BadRequest, match=f"{not_json}: not valid JSON"):
        client.submit(ZKEY, inputs=[not_json], wasm=WASM)
    with pytest.raises(BadRequest, match="missing.json: cannot read"):
        client.submit(ZKEY, inputs=[tmp_path / "missing.json"], wasm=WASM)
    assert not queue.r.keys(keys.job("*"))     # nothing was submitted


def test_a_vanished_synthesis_worker_is_replaced_by_the_reaper(queue, tmp_path):
    client = queue.client()
    job = client.submit(ZKEY, inputs=FIXTURE_INPUTS[:2], wasm=WASM)
    # A worker that claims synthesis 0 and dies at once (it never refreshes its lease).
    assert client.scheduler.claim(job.id, keys.synth_slot(0), 1, "ghost", 999999, run_s=600).kind == "ok"
    group = queue.start_workers(1, env={"ZKQUEUE_LEASE_TTL_S": 2})
    queue.ready(group)
    result = job.wait(60)
    assert_snarkjs_accepts(result.partitions[:1], VK, tmp_path)
    st = job.status()
    assert st.partitions[0].synth_attempts == 2 and st.partitions[1].synth_attempts == 1
    [lost] = slot_events(st, 0, "lost")
    assert lost["worker"] == "ghost" and "stopped renewing its lease on synthesis 0" in lost["reason"]
    # The dead attempt's late result changes nothing.
    assert client.scheduler.witness_ready(job.id, 0, 1, "ghost", "0" * 64, 0.1).kind == "job_over"


def test_synthesis_attempts_are_capped_and_stale_attempts_fenced(queue):
    from zkqueue.coordinator.reaper import Reaper
    client = Client(settings=queue.settings(max_attempts=2, lease_ttl_s=1.0))
    queue.clients.append(client)
    b, reaper, synth0 = client.scheduler, Reaper(client.scheduler), keys.synth_slot(0)
    job = client.submit(ZKEY, inputs=FIXTURE_INPUTS[:1], wasm=WASM)      # no worker: only the "ghosts" claim

    assert b.claim(job.id, synth0, 1, "ghost1", 1, run_s=600).kind == "ok"
    wait_until(lambda: reaper.tick() > 0, 10, "the reaper to take the expired synthesis lease")
    assert queue.r.hget(keys.slot(job.id, synth0), "token") == b"2"
    assert b.claim(job.id, synth0, 1, "ghost1", 1, run_s=600).kind == "stale"
    assert b.witness_ready(job.id, 0, 1, "ghost1", "0" * 64, 0.1).kind == "stale"
    assert b.fail_input(job.id, synth0, 1, "ghost1", "late") is False
    assert job.status().state == JobState.RUNNING

    assert b.claim(job.id, synth0, 2, "ghost2", 2, run_s=600).kind == "ok"
    wait_until(lambda: reaper.tick() > 0, 10, "the reaper to take the second expired lease")
    st = job.status()
    assert st.state == JobState.FAILED and st.error_slot == "0"
    assert st.error == (f"partition 0: synthesis of {FIXTURE_INPUTS[0]} gave up after 2 attempts; last: "
                        "worker ghost2 stopped renewing its lease on synthesis 0 (killed or hung)")
    assert not [m for m in queue.r.zrange(keys.deadlines(), 0, -1) if m.decode().startswith(job.id)]


def test_synthesis_messages_lost_from_the_broker_or_orphaned_are_sent_again(queue):
    from test_queue_failures import _TAKE_ONE
    client = Client(settings=queue.settings(queued_check_s=2.0))      # its deadlines are the submitter's
    queue.clients.append(client)
    job = client.submit(ZKEY, inputs=FIXTURE_INPUTS[:2], wasm=WASM)
    # One message is taken by a real consumer that is SIGKILLed before it starts it (kombu alone
    # would restore it after an hour); the other is deleted from the broker.
    taker = subprocess.Popen([sys.executable, "-c", _TAKE_ONE, queue.redis_url, keys.SYNTH_QUEUE],
                             env=queue.env(), cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert taker.stdout.readline().strip() == "taken"
    taker.kill()
    taker.wait()
    assert queue.r.hlen("unacked") == 1
    assert sum(queue.r.delete(name) for name in queue_lists(keys.SYNTH_QUEUE)) == 1
    group = queue.start_workers(1, env={"ZKQUEUE_QUEUED_CHECK_S": 2})
    queue.ready(group)
    started = time.monotonic()
    job.wait(60)
    assert time.monotonic() - started <= 20
    st = job.status()
    assert sorted(int(e["slot"]) for e in _events(st, "resent")) == [0, 1]
    assert [p.synth_attempts for p in st.partitions] == [1, 1]
    wait_until(lambda: queue.r.hlen("unacked") == 0, 10, "every delivered message to be acknowledged")


def _worker_with_flags(queue, *flags, env: dict | None = None) -> WorkerGroup:
    """`zkqueue worker --cpu 1 FLAGS` in its own process group (killed at teardown)."""
    log_path = queue.tmp / f"workers-{len(queue.groups)}.log"
    env = {**queue.env(), **{k: str(v) for k, v in (env or {}).items()}}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "zkqueue.cli", "worker", "--cpu", "1", "--threads", "1",
                                 *flags], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    group = WorkerGroup(proc, log_path, 1, env)
    queue.groups.append(group)
    return group


def test_a_worker_started_with_no_synthesize_only_proves(queue):
    prover = _worker_with_flags(queue, "--no-synthesize")
    queue.ready(prover)
    client = queue.client()
    from_inputs = client.submit(ZKEY, inputs=FIXTURE_INPUTS[:2], wasm=WASM)
    from_witnesses = client.submit(ZKEY, PARTITIONS[:2])
    from_witnesses.wait(60)           # the prover works, and took no synthesis meanwhile
    st = from_inputs.status()
    assert [(p.state, p.synth_attempts) for p in st.partitions] == [(SlotState.SYNTH_QUEUED, 0)] * 2
    assert [p.phase for p in st.partitions] == ["synthesizing"] * 2
    synthesizer = _worker_with_flags(queue, "--synthesize")
    synth_id = queue.ready(synthesizer)[0]["worker"]
    from_inputs.wait(60)
    st = from_inputs.status()
    assert {e["worker"] for e in _events(st, "synthesized")} == {synth_id}


def test_an_inputs_job_on_a_fleet_that_never_synthesizes_fails_saying_why(queue):
    """Workers alive but none taking synthesis (GPU workers only, say): the job does not wait
    forever. It fails after orphan_timeout_s, naming the cause; proving goes on meanwhile."""
    orphan_timeout_s = 3
    prover = _worker_with_flags(queue, "--no-synthesize",
                                env={"ZKQUEUE_QUEUED_CHECK_S": 1, "ZKQUEUE_ORPHAN_TIMEOUT_S": orphan_timeout_s})
    prover_id = queue.ready(prover)[0]["worker"]
    client = Client(settings=queue.settings(queued_check_s=1))   # its first check is due 1 s after sending
    started = time.monotonic()
    from_inputs = client.submit(ZKEY, inputs=FIXTURE_INPUTS[:2], wasm=WASM)
    client.submit(ZKEY, PARTITIONS[:1]).wait(60)
    with pytest.raises(JobFailed) as info:
        from_inputs.wait(60)
    waited = time.monotonic() - started
    assert "no live worker takes witness synthesis" in str(info.value) and prover_id in str(info.value)
    assert "--synthesize" in str(info.value)
    assert orphan_timeout_s <= waited < 30, waited
    assert [p.synth_attempts for p in from_inputs.status().partitions] == [0, 0]


def test_only_a_fleet_alive_without_any_synthesizer_is_unserved():
    from zkqueue.coordinator.reaper import unserved_reason
    assert unserved_reason([]) == ""       # no worker at all: the job waits for workers
    assert unserved_reason([{"worker": "g", "synthesizes": False}, {"worker": "c", "synthesizes": True}]) == ""
    assert "g0, g1" in unserved_reason([{"worker": "g1", "synthesizes": False}, {"worker": "g0"}])


def test_gpu_workers_prove_only_unless_told_and_cpu_workers_do_both():
    from zkqueue.tasks.main import queues
    assert keys.SYNTH_QUEUE in queues("w", "cpu:0", None)
    assert keys.SYNTH_QUEUE not in queues("w", "cuda:0", None)
    assert keys.SYNTH_QUEUE in queues("w", "cuda:0", True)
    assert keys.SYNTH_QUEUE not in queues("w", "cpu:0", False)
    # Proving comes before synthesis at equal priority: a computed witness is proved first.
    assert queues("w", "cpu:0", None)[1:] == [keys.SHARED_QUEUE, keys.SYNTH_QUEUE]


def test_a_synthesis_failing_for_another_reason_is_retried_up_to_the_cap(queue):
    client = queue.client()
    job = client.submit(ZKEY, inputs=FIXTURE_INPUTS[:1], wasm=WASM)
    # The input vanishes from the store (as a lagging shared store shows it): not the input's
    # fault, so it is retried, and the job fails when the attempts are spent.
    sha = queue.r.hget(keys.slot(job.id, keys.synth_slot(0)), "input").decode()
    client.store.local_path(sha).unlink()
    group = queue.start_workers(1)
    queue.ready(group)
    with pytest.raises(JobFailed) as info:
        job.wait(60)
    max_attempts = client.settings.max_attempts
    assert (f"partition 0: synthesis of {FIXTURE_INPUTS[0]} gave up after {max_attempts} attempts; last: "
            f"ArtifactMissing: artifact {sha} is not in the store") in str(info.value)
    st = job.status()
    assert st.partitions[0].synth_attempts == max_attempts
    assert len(slot_events(st, 0, "retry")) == max_attempts and not slot_events(st, 0, "input_error")
