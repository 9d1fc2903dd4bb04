"""Witness synthesis: a circom circuit's .wasm and input JSON -> .wtns, as `snarkjs wtns calculate`.

    from zkqueue.groth16.witness import load_calculator, calculate_witness
    calc = load_calculator("circuit.wasm")          # compiled once per process (and cached on disk)
    wtns_bytes = calc.calculate({"a": "3", "b": ["1", "2"]}, source="input.json")
    witness = calc.calculate_witness(inputs, source="input.json")   # for groth16.prover.prove

The names below load wasmtime only when first used, so importing this package stays cheap.
"""

from __future__ import annotations

_LAZY = {
    "WitnessCalculator": "calculator", "load_calculator": "calculator", "calculate_witness": "calculator",
    "read_inputs": "inputs", "parse_inputs": "inputs", "fnv_hash": "inputs",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        from importlib import import_module
        return getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
