"""The worker runtime: device discovery, process spawning, key cache, leases, heartbeats,
fingerprints and test-only faults. Imports groth16, never coordinator or tasks."""
