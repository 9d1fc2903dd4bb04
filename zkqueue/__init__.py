"""zkqueue: a distributed Groth16 proving queue.

One import name for the whole project. The source folders stay at the top of the
repository, as the design lays them out, and are installed beneath this package
(pyproject.toml maps them):

    zkqueue.groth16      groth16/       the proving core (formats, prover, verifier, backends)
    zkqueue.coordinator  coordinator/   Client, store, state machine, reaper: what client code imports
    zkqueue.tasks        tasks/         the Celery app and its tasks
    zkqueue.workers      workers/       worker runtime: devices, key cache, leases
    zkqueue.api          api/           `zkqueue serve`, the HTTP API
    zkqueue.cli          zkqueue/       the `zkqueue` command line (imports every package, lazily)
    zkqueue.demo         zkqueue/       `zkqueue demo` and the bundled circuit it proves
"""

import os as _os

__version__ = "0.1.0"

# In a checkout the mapped folders are this folder's siblings (a wheel has them inside it):
# find them there (zkqueue/_checkout.py). One stat when installed from a wheel.
if not _os.path.isdir(_os.path.join(__path__[0], "groth16")):
    from zkqueue._checkout import install as _install
    _install(_os.path.dirname(_os.path.abspath(__path__[0])))


def __getattr__(name: str):
    # `from zkqueue import Client` without making every `import zkqueue.groth16` (a worker's
    # proving path, `zkqueue prove`) pay for importing redis and the coordinator.
    if name == "Client":
        from zkqueue.coordinator.client import Client
        return Client
    raise AttributeError(f"module 'zkqueue' has no attribute {name!r}")
