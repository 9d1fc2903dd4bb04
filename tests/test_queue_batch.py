"""The batch claim through real worker processes: `zkqueue worker --backend cuda --batch B` on
the host emulation of the CUDA kernels (ZKQUEUE_CUDA_EMULATION=1), on a real Redis, every
proof checked by snarkjs.

  * B partitions of a key claimed in one transition and proved in one device pass, each
    proof recorded once and valid;
  * the pool child SIGKILLed mid-batch, while the batch proves and between two of its
    records: no partition lost, none recorded twice, a recorded member not proved again;
  * a bad witness inside a batch fails only its own partition;
  * cancel in the middle of a batch stops the rest of it, and the worker takes other work.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from queue_support import (CHAIN, PARTITIONS, ROOT, WorkerGroup, _build_native, assert_snarkjs_accepts,  # noqa: F401
                           queue, slot_events, wait_until)

from zkqueue.coordinator.jobs import JobState, SlotState

ZKEY = CHAIN / "circuit_final.zkey"
VK = CHAIN / "verification_key.json"
R1CS = CHAIN / "circuit.r1cs"
RESTART_LIMIT_S = 15.0


def start_gpu_worker(queue, *, batch: int, fault: str | None = None, backend: str = "cuda",
                     args: tuple[str, ...] = ()) -> WorkerGroup:
    """`zkqueue worker --backend cuda --batch B` (one worker) on the emulated CUDA backend."""
    _build_native()
    extra = {"ZKQUEUE_CUDA_EMULATION": "1", **({"ZKQUEUE_FAULT": fault} if fault else {})}
    env = queue.env(**extra)
    log_path = queue.tmp / f"workers-{len(queue.groups)}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "zkqueue.cli", "worker", "--cpu", "1", "--threads",
                                 "1", "--backend", backend, "--batch", str(batch), *args], cwd=ROOT, env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    group = WorkerGroup(proc, log_path, 1, env)
    queue.groups.append(group)
    return group


def batches(st) -> dict[tuple[int, str], list[int]]:
    """(pid, lead) -> the partitions one claim started, from the 'started' events."""
    out: dict[tuple[int, str], list[int]] = {}
    for p in st.partitions:
        for e in slot_events(st, p.index, "started"):
            out.setdefault((e["pid"], e.get("batch", str(p.index))), []).append(p.index)
    return out


def check_each_recorded_once_and_valid(job, tmp_path, n: int):
    result = job.wait(180)
    assert [p.index for p in result.partitions] == list(range(n))
    assert_snarkjs_accepts(result.partitions, VK, tmp_path)
    st = job.status()
    assert st.state == JobState.DONE
    for p in st.partitions:      # each partition present exactly once
        assert len(slot_events(st, p.index, "proved")) == 1, p.events
    return st


def test_a_batch_of_b_partitions_is_claimed_at_once_and_each_proof_is_valid(queue, tmp_path):
    group = start_gpu_worker(queue, batch=4)
    queue.ready(group, timeout_s=120)
    job = queue.client().submit(ZKEY, PARTITIONS + PARTITIONS)        # 8 partitions of one key
    st = check_each_recorded_once_and_valid(job, tmp_path, 8)
    sizes = sorted(len(members) for members in batches(st).values())
    assert sum(sizes) == 8 and max(sizes) == 4, batches(st)            # claimed 4 at a time, never more
    for p in st.partitions:
        assert len(slot_events(st, p.index, "started")) == 1, p.events   # one attempt each
    assert "batch of 4 partitions" in group.log()


def _running_batch(job, *, recorded: bool):
    """(pid, members) of a batch whose members all run under one pid, once (with `recorded`)
    one of them is proved while another still runs, or (without) none is proved yet."""
    def check():
        st = job.status()
        for (pid, _lead), members in batches(st).items():
            if len(members) < 2:
                continue
            states = [st.partitions[i].state for i in members]
            running = [i for i, s in zip(members, states) if s == SlotState.RUNNING]
            proved = [i for i, s in zip(members, states) if s == SlotState.PROVED]
            if recorded and proved and running and len(proved) + len(running) == len(members):
                return pid, members, proved
            if not recorded and len(running) == len(members):
                return pid, members, []
        return None
    return wait_until(check, 120, "a batch mid-way" + (" between two records" if recorded else ""))


@pytest.mark.parametrize("instant", ["while_proving", "between_records"])
def test_a_worker_sigkilled_mid_batch_loses_no_partition_and_records_none_twice(queue, tmp_path, instant):
    fault = "slow-first:4" if instant == "while_proving" else "slow-record:4"
    a, b = start_gpu_worker(queue, batch=3, fault=fault), start_gpu_worker(queue, batch=3, fault=fault)
    queue.ready(a, timeout_s=120), queue.ready(b, timeout_s=120)
    job = queue.client().submit(ZKEY, PARTITIONS + PARTITIONS[:2])     # 6 partitions
    pid, members, proved = _running_batch(job, recorded=instant == "between_records")
    beat = next(h for h in queue.heartbeats() if pid in h["children"])   # the pool child proves, not the worker
    os.kill(pid, signal.SIGKILL)
    killed_at = time.time()
    st = check_each_recorded_once_and_valid(job, tmp_path, 6)
    for i in members:
        starts = slot_events(st, i, "started")
        if i in proved:       # recorded before the kill: never proved again
            assert len(starts) == 1 and not slot_events(st, i, "lost"), st.partitions[i].events
            continue
        assert slot_events(st, i, "lost"), st.partitions[i].events       # its own lease lapsed
        restart = next(e["at"] for e in starts if e["at"] > killed_at)
        assert restart - killed_at <= RESTART_LIMIT_S, f"partition {i} restarted {restart - killed_at:.1f} s after"
    assert a.proc.poll() is None and b.proc.poll() is None and beat["worker"]


def _unsatisfying_witness(tmp_path):
    """Partition 2's witness with one intermediate signal changed (still a field element)."""
    bad = tmp_path / "witness_2_stale_wasm.wtns"
    data = bytearray(PARTITIONS[2].read_bytes())
    data[-40] ^= 0x5A
    bad.write_bytes(bytes(data))
    return bad


def test_a_bad_witness_inside_a_batch_fails_only_its_partition(queue, tmp_path):
    group = start_gpu_worker(queue, batch=4)
    queue.ready(group, timeout_s=120)
    witnesses = [PARTITIONS[0], PARTITIONS[1], _unsatisfying_witness(tmp_path), PARTITIONS[3]]
    job = queue.client().submit(ZKEY, witnesses, r1cs=R1CS)
    result = job.wait(120)
    st = job.status()
    assert st.state == JobState.DONE_WITH_FAILURES
    assert list(batches(st).values()) == [[0, 1, 2, 3]]                   # one batch held all four
    assert st.partitions[2].state == SlotState.FAILED
    assert "witness_2_stale_wasm.wtns: the witness does not satisfy constraint" in st.partitions[2].error
    assert [p.index for p in result.partitions] == [0, 1, 3]
    assert_snarkjs_accepts(result.partitions, VK, tmp_path)
    for i in (0, 1, 3):
        assert len(slot_events(st, i, "proved")) == 1 and len(slot_events(st, i, "started")) == 1


def test_cancel_mid_batch_stops_the_rest_of_the_batch(queue, tmp_path):
    group = start_gpu_worker(queue, batch=4, fault="slow-record:5")
    queue.ready(group, timeout_s=120)
    client = queue.client()
    job = client.submit(ZKEY, PARTITIONS)
    _pid, members, proved = _running_batch(job, recorded=True)
    assert members == [0, 1, 2, 3] and proved == [0]
    job.cancel()
    cancelled_at = time.time()
    wait_until(lambda: "batch stopped (job_over)" in group.log(), 10, "the worker to stop the batch")
    stopped_after = time.time() - cancelled_at
    # The rest of the batch would take 3 x 5 s of waits; the worker is free at its next lease refresh.
    assert stopped_after < 5.0, stopped_after
    other = client.submit(ZKEY, PARTITIONS[:1])
    other.wait(60)
    st = job.status()
    assert st.state == JobState.CANCELLED
    assert [len(slot_events(st, i, "proved")) for i in range(4)] == [1, 0, 0, 0]
    assert queue.r.hlen(f"zkq:job:{job.id}:results") == 1


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
def test_a_preloaded_key_is_loaded_before_the_first_partition(queue, backend):
    """`zkqueue worker --preload KEY`: the key is loaded as the worker starts, so its first
    partition records no key-load time (and on a GPU, the key is resident already)."""
    group = start_gpu_worker(queue, batch=1, backend=backend, args=("--preload", str(ZKEY)))
    queue.ready(group, timeout_s=120)
    wait_until(lambda: "--preload " in group.log() and " loaded in " in group.log(), 60, "the preload to finish")
    job = queue.client().submit(ZKEY, PARTITIONS[:1])
    result = job.wait(60)
    assert result.partitions[0].timings_s["key_load_s"] == 0.0, result.partitions[0].timings_s
    assert_snarkjs_accepts(result.partitions, VK, queue.tmp)
