"""What an attempt's exception means for its slot, decided in one place for every task.

    "input"     the input is at fault (a corrupt or mismatched file, an input the circuit
                refuses): the same input fails the same way everywhere, so the partition
                fails now, naming the file; never retried. An artifact the store lost or
                damaged (its bytes no longer hash to its name) is not the input's fault: the
                user's bytes were hashed when they were put. It is a store fault
                (coordinator/errors.StoreError), retried like any "retry", and the store
                heals (coordinator/store.py)
    "retry"     trying again can help (`retryable`: a lost connection, out of memory, a
                bug that may not repeat): the attempt is spent and the slot sent again
    "elsewhere" this worker cannot do it (`retryable` False: no usable backend here):
                this worker is excluded from the slot and another takes it
A proof that fails its own check is none of these: tasks/partition.py suspects the build.
"""

from __future__ import annotations

from zkqueue.groth16.errors import InputError

INPUT, RETRY, ELSEWHERE = "input", "retry", "elsewhere"


def classify(exc: BaseException) -> str:
    """INPUT, RETRY or ELSEWHERE for an exception an attempt raised."""
    if isinstance(exc, InputError):
        return INPUT
    return RETRY if getattr(exc, "retryable", True) else ELSEWHERE
