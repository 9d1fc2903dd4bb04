"""The worker runtime: device discovery, the supervisor (spawn) and the exit codes it reads,
the runtime of a worker's main process (process: heartbeat, liveness, the watches, the
reaper thread), key cache, leases, fingerprints and test-only faults. Imports groth16 and
zkqueue.config, never coordinator, tasks or api."""
