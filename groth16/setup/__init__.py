"""The Groth16 phase-2 setup, native and byte-identical to snarkjs 0.7.6.

* `zkey_new.new_zkey`: `zkqueue zkey new circuit.r1cs pot.ptau circuit_0000.zkey`
  (snarkjs `groth16 setup` / `zkey new`): the key from a circuit and a prepared powers of tau.
* `contribution.beacon` / `contribution.contribute`: `zkqueue zkey beacon` (deterministic,
  as `snarkjs zkey beacon`) and `zkqueue zkey contribute` (entropy from the OS).

Modules: ptau.py (reading and checking a prepared .ptau), r1cs_index.py (streaming the
.r1cs constraints into a signal-major index and the coefficient section), zkey_new.py,
contribution.py (delta contributions), rng.py (snarkjs's ChaCha and the random points it
draws), ec.py (the few big-integer curve operations a contribution needs), writer.py (the
binary container, section by section). The heavy math is native: kernels/cpu/setup.cpp.
"""
