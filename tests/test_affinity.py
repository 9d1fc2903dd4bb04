"""Key affinity with real worker processes over Redis (coordinator/affinity.py, tasks/affinity.py):
a partition goes to a free worker that holds its key loaded, without an attempt spent, and
work is never stranded there: a holder that is busy too long or dies gives it back.

Each worker's key cache holds one key (1 MiB: any one of the 2^10 fixture keys), and every key
load is made to take seconds (the slow-load test fault: what loading a 2^24 key costs on a
GPU), so that waiting for a holder is worth it; on a CPU a 2^10 key loads in milliseconds."""

from __future__ import annotations

import pytest

from queue_support import FIXTURES, assert_snarkjs_accepts, queue, slot_events, wait_until  # noqa: F401

KEYS = [FIXTURES / "bn128_chain_10", FIXTURES / "bn128_poseidon_10", FIXTURES / "bls12381_chain_10"]
ONE_KEY_CACHE = {"ZKQUEUE_KEY_CACHE_BYTES": str(1 << 20), "ZKQUEUE_CANARY": "0"}


def test_the_holder_chosen_is_the_one_free_soonest_and_only_if_sooner_than_a_load_here():
    from zkqueue.coordinator.affinity import Holder, choose
    busy, idle, queued = Holder("a", True, 3), Holder("b", False, 0), Holder("c", False, 2)
    assert choose([], prove_s=1.0, load_s=5.0, max_wait_s=30) is None
    # Nothing measured: only a holder free now.
    assert choose([busy, idle], prove_s=None, load_s=None, max_wait_s=30) == idle
    assert choose([busy, queued], prove_s=None, load_s=None, max_wait_s=30) is None
    # Measured: the soonest (c: 2 x 1 s), while no later than a load here (3 s) and the cap.
    assert choose([busy, queued], prove_s=1.0, load_s=3.0, max_wait_s=30) == queued
    assert choose([busy, queued], prove_s=1.0, load_s=1.5, max_wait_s=30) is None
    assert choose([busy, queued], prove_s=1.0, load_s=3.0, max_wait_s=1.0) is None
    # A load here that evicts a key with work waiting here costs two loads.
    assert choose([busy], prove_s=1.0, load_s=3.0, max_wait_s=30) is None
    assert choose([busy], prove_s=1.0, load_s=3.0, max_wait_s=30, evicts_needed_key=True) == busy


def witnesses(key, n: int, start: int = 0):
    return [key / "partitions" / f"witness_{(start + i) % 4}.wtns" for i in range(n)]


def loads(results) -> int:
    """How many partitions' attempts loaded their key (the rest found it in the cache)."""
    return sum(1 for res in results for p in res.partitions if p.timings_s["key_load_s"] > 0)


def interleaved_jobs(client, rounds: int):
    """`rounds` rounds of one 3-partition job per key: the shared queue holds the keys interleaved."""
    return [client.submit(key / "circuit_final.zkey", witnesses(key, 3, r)) for r in range(rounds) for key in KEYS]


@pytest.mark.parametrize("affinity", [True, False], ids=["affinity", "no-affinity"])
def test_three_keys_interleaved_on_three_workers_load_each_key_on_few_of_them(queue, affinity):  # noqa: F811
    # A load takes 2 s here: a CI machine running another test module beside this one proves
    # a 2^10 partition in up to 0.4 s, so a holder 3 partitions behind frees in about 1.2 s,
    # later than a 1 s load here would take (choose() then rightly loads the key here).
    group = queue.start_workers(3, fault="slow-load:2" if affinity else "slow-load:1", env={**ONE_KEY_CACHE,
                                                              "ZKQUEUE_KEY_AFFINITY": "1" if affinity else "0"})
    queue.ready(group, timeout_s=120)
    client = queue.client()
    jobs = interleaved_jobs(client, rounds=3)
    results = [j.wait(300) for j in jobs]
    n = sum(len(r.partitions) for r in results)
    assert n == 27
    # No attempt spent on handing partitions to key holders.
    assert all(p.attempt == 1 for r in results for p in r.partitions)
    if affinity:
        # Without affinity every partition here loads its key (the workers take the interleaved
        # keys in turn, each evicting the last); with it, after the first round's loads
        # (nothing is measured yet), partitions wait for the worker that holds their key.
        assert loads(results) <= n // 2, f"{loads(results)} key loads for {n} partitions"
        handed = [e for j in jobs for i in range(3) for e in slot_events(j.status(), i, "rerouted")
                  if "holds its key loaded" in e.get("reason", "")]
        assert handed
    else:
        assert loads(results) >= n * 3 // 4
    assert_snarkjs_accepts(results[-1].partitions, KEYS[-1] / "verification_key.json", queue.tmp)


def holder_and_other(queue, *, holder_fault: str, wait_s: float):
    """A worker that holds KEYS[0] (after a one-partition job) and proves slowly, then a
    second worker; both with affinity on and that affinity wait. Returns (holder's group,
    its worker id, the other's group, the other's worker id, a client)."""
    env = {**ONE_KEY_CACHE, "ZKQUEUE_AFFINITY_WAIT_S": str(wait_s)}
    holder = queue.start_workers(1, fault=f"slow-load:3,{holder_fault}", env=env)
    holder_id = queue.ready(holder, timeout_s=120)[0]["worker"]
    client = queue.client()
    client.submit(KEYS[0] / "circuit_final.zkey", witnesses(KEYS[0], 1)).wait(120)   # loads, measures
    other = queue.start_workers(1, fault="slow-load:3", env=env)
    other_id = queue.ready(other, timeout_s=120)[0]["worker"]
    return holder, holder_id, other, other_id, client


def test_a_partition_handed_to_a_holder_busy_too_long_goes_back_and_another_worker_proves_it(queue):  # noqa: F811
    # The holder sleeps 4 s in every partition after its claim (slow:4; under the tests' 5 s
    # overdue floor): its measured proving time (the prove alone, milliseconds) makes it look
    # free soon, and it is not.
    holder, holder_id, other, other_id, client = holder_and_other(queue, holder_fault="slow:4", wait_s=1.5)
    job = client.submit(KEYS[0] / "circuit_final.zkey", witnesses(KEYS[0], 2))
    result = job.wait(120)
    status = job.status()
    handed = [(i, e) for i in range(2) for e in slot_events(status, i, "rerouted")]
    assert any(f"worker {holder_id} holds its key loaded" in e["reason"] for _, e in handed), handed
    back = [i for i, e in handed if f"worker {holder_id}, which holds its key, did not take it within 1.5 s" in e["reason"]]
    assert back, handed
    # It came back to the shared queue and the other worker proved it: no attempt spent.
    assert result.partitions[back[0]].worker == other_id
    assert all(p.attempt == 1 for p in result.partitions)
    assert_snarkjs_accepts(result.partitions, KEYS[0] / "verification_key.json", queue.tmp)


def test_a_partition_handed_to_a_holder_that_dies_is_proved_by_another_worker(queue):  # noqa: F811
    holder, holder_id, other, other_id, client = holder_and_other(queue, holder_fault="slow:4", wait_s=120)
    job = client.submit(KEYS[0] / "circuit_final.zkey", witnesses(KEYS[0], 2))

    def waiting_on_holder():
        st = job.status()
        return [i for i in range(2) if st.partitions[i].state.value == "queued"
                and any(f"worker {holder_id} holds its key" in e["reason"] for e in slot_events(st, i, "rerouted"))]
    waiting = wait_until(waiting_on_holder, 60, "a partition queued on the key holder's own queue")
    holder.kill()
    result = job.wait(120)
    assert result.partitions[waiting[0]].worker == other_id
    assert_snarkjs_accepts(result.partitions, KEYS[0] / "verification_key.json", queue.tmp)
