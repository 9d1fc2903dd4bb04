"""Bad workers, bad input and bad messages."""

from __future__ import annotations

from kombu import Connection, Exchange, Queue

from queue_support import CHAIN, PARTITIONS, queue, slot_events, wait_until  # noqa: F401  (fixtures)

from zkqueue.coordinator import keys
from zkqueue.coordinator.broker import queue_lists
from zkqueue.groth16.formats.jsonfiles import proof_from_json


def test_corrupt_proofs_are_detected_and_reproved_on_another_worker(queue):
    from zkqueue.groth16 import verifier
    from zkqueue.groth16.formats.jsonfiles import load_verification_key

    bad = queue.start_workers(1, fault="corrupt")
    bad_id = queue.ready(bad)[0]["worker"]
    # The good worker is slow on first attempts, so the bad one surely proves some partitions.
    good = queue.start_workers(1, fault="slow-first:1")
    good_id = queue.ready(good)[0]["worker"]
    job = queue.client().submit(CHAIN / "circuit_final.zkey", PARTITIONS)
    result = job.wait(120)

    vk = load_verification_key(CHAIN / "verification_key.json")
    for p in result.partitions:
        assert verifier.verify(vk, proof_from_json(p.proof), [int(s) for s in p.public_signals])
        assert p.worker == good_id
    st = job.status()
    assert st.bad_workers, "the bad worker proved nothing: the test did not exercise finalize"
    for rec in st.bad_workers:
        assert rec["worker"] == bad_id and rec["reason"] == "proof does not verify"
        fp = rec["fingerprint"]
        assert fp["worker"] == bad_id and {"host", "device_name", "driver", "backend", "kernel_hash"} <= set(fp)
        assert len(slot_events(st, rec["index"], "invalid")) == 1
    assert result.bad_workers == st.bad_workers


# A classic malicious pickle: calls os.system("touch MARKER") when unpickled. Written by hand
# so that nothing here imports pickle.
def _evil_pickle(marker) -> bytes:
    return b"cposix\nsystem\n(V" + f"touch {marker}".encode() + b"\ntR."


def test_a_pickled_message_is_refused_not_executed(queue, tmp_path):
    group = queue.start_workers(1)
    queue.ready(group)
    markers = [tmp_path / "pwned-protocol2", tmp_path / "pwned-protocol1"]
    from zkqueue.coordinator.broker import celery_config
    options = celery_config(queue.settings())["broker_transport_options"]
    with Connection(queue.redis_url, transport_options=options) as conn:
        producer = conn.Producer()
        q = Queue(keys.SHARED_QUEUE, Exchange(keys.SHARED_QUEUE), routing_key=keys.SHARED_QUEUE)
        common = dict(exchange=q.exchange, routing_key=keys.SHARED_QUEUE, declare=[q], serializer=None,
                      content_type="application/x-python-serialize", content_encoding="binary")
        # Celery protocol 2 (task in the headers), and protocol 1 (everything in the body).
        producer.publish(_evil_pickle(markers[0]), headers={"task": "zkqueue.prove_partition",
                                                             "id": "evil-2", "lang": "py", "argsrepr": "()"},
                         **common)
        producer.publish(_evil_pickle(markers[1]), **common)
    wait_until(lambda: not any(queue.r.llen(q) for q in queue_lists(keys.SHARED_QUEUE)), 30,
               "the worker to take the messages")
    # The worker goes on with real work afterwards (and has surely handled both by then).
    job = queue.client().submit(CHAIN / "circuit_final.zkey", PARTITIONS[:1])
    job.wait(60)
    assert not any(m.exists() for m in markers)
    from zkqueue.coordinator import deadletter
    reasons = sorted(d["reason"] for d in deadletter.listing(queue.r))
    assert len(reasons) == 2 and "refused content type 'application/x-python-serialize'" in reasons[0] \
        and "unknown task None" in reasons[1], reasons
