"""The proving core of zkqueue: snarkjs-compatible Groth16 prove and verify.

Imports neither celery nor redis: the queue is built on top of this package, never the
other way round.
"""
