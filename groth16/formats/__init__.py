"""Readers and writers for the circom/snarkjs files: .zkey, .wtns, .r1cs and the JSON files."""
