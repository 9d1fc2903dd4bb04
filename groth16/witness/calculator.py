"""circom witness calculation: a circuit's .wasm and its inputs -> a .wtns, as snarkjs writes it.

The protocol of circom 2's generated WebAssembly (its witness_calculator.js, and circom_runtime
as `snarkjs wtns calculate` uses it):

    getFieldNumLen32() = n32             field elements are n32 little-endian u32 words
    getRawPrime(); readSharedRWMemory(j) the prime, word j, through a shared n32-word buffer
    getWitnessSize(), getInputSize()     witness values, and input values to set
    init(sanityCheck)                    starts a witness
    getInputSignalSize(hMSB, hLSB)       values of the input named by its 64-bit FNV-1a hash; 0 (circom
                                         2.2) or -1 (earlier) when there is no such input
    writeSharedRWMemory(j, w); setInputSignal(hMSB, hLSB, i)   sets value i of an input; setting
                                         the last one runs the circuit
    getWitness(i); readSharedRWMemory(j) witness value i in standard form
    imports runtime.exceptionHandler(code), printErrorMessage(), writeBufferMessage(),
            showSharedRWMemory(); messages are read with getMessageChar() until 0

A `WitnessCalculator` compiles a circuit once (and keeps the machine code on disk, see cache.py);
each `calculate` then runs in a fresh instance, about a millisecond to make, so that nothing one
witness leaves behind (a failed assert half way) reaches the next.
"""

from __future__ import annotations

import hashlib
import os
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import wasmtime

from ..errors import (CircuitAssertError, CircuitRuntimeError, FormatError, InputCountError,
                      UnknownInputError, UnsupportedError)
from ..formats.wtns_writer import encode_wtns
from . import cache
from .batch import WAT
from .inputs import flatten, read_inputs, to_field

if TYPE_CHECKING:
    from ..curves import Curve
    from ..formats.wtns import Witness

# circom's exceptionHandler codes, worded as circom's witness_calculator.js words them.
CIRCOM_ERRORS = {
    1: "Signal not found",
    2: "Too many signals set",
    3: "Signal already set",
    4: "Assert Failed",
    5: "Not enough memory",
    6: "Input signal array access exceeds the size",
    7: "Out of bounds array access",
}
RUNTIME_IMPORTS = ("exceptionHandler", "printErrorMessage", "writeBufferMessage", "showSharedRWMemory")
_EXPORTS = ("getVersion", "getFieldNumLen32", "getRawPrime", "readSharedRWMemory", "writeSharedRWMemory",
            "getWitnessSize", "getInputSize", "init", "getInputSignalSize", "setInputSignal",
            "getWitness", "getMessageChar")
# Part of each compiled module's cache key: change it when the engine settings below change.
_ENGINE_TAG = "e1"

_lock = threading.Lock()
_engine: tuple[int, wasmtime.Engine, wasmtime.Module] | None = None
_calculators: OrderedDict[tuple[str, str], WitnessCalculator] = OrderedDict()
_MAX_CALCULATORS = 16


def _engine_and_batch() -> tuple[wasmtime.Engine, wasmtime.Module]:
    """The process's engine and the compiled batch module; made again in a forked child."""
    global _engine
    with _lock:
        if _engine is None or _engine[0] != os.getpid():
            config = wasmtime.Config()
            config.wasm_bulk_memory = True
            # No compiler thread pool: a process forked after a compile (Celery's prefork pool)
            # would inherit a pool whose threads are gone and hang on its next compile.
            config.parallel_compilation = False
            engine = wasmtime.Engine(config)
            _engine = (os.getpid(), engine, wasmtime.Module(engine, WAT))
        return _engine[1], _engine[2]


class _Run:
    """The state of one witness calculation: circom's messages and the log line being built."""

    def __init__(self, n32: int, minor: int, patch: int, log: Callable[[str], None] | None):
        self.n32 = n32
        self.log = log
        self.values_in_line = (minor, patch) >= (0, 7)      # circom >= 2.0.7 builds log lines
        self.errors: list[str] = []
        self.line = ""
        self.code: int | None = None

    def imports(self, store: wasmtime.Store, module: wasmtime.Module) -> list[wasmtime.Func]:
        handlers = {"exceptionHandler": self.exception_handler, "printErrorMessage": self.print_error,
                    "writeBufferMessage": self.write_buffer, "showSharedRWMemory": self.show_shared}
        return [wasmtime.Func(store, imp.type, handlers[imp.name], access_caller=True)
                for imp in module.imports]

    def exception_handler(self, caller: wasmtime.Caller, code: int) -> None:
        self.code = code
        raise _CircuitTrap(code)        # wasmtime turns it into a trap that unwinds the circuit

    def print_error(self, caller: wasmtime.Caller) -> None:
        self.errors.append(_message(caller))

    def write_buffer(self, caller: wasmtime.Caller) -> None:
        msg = _message(caller)
        if msg == "\n":                 # every log() ends with one
            self._emit(self.line)
            self.line = ""
        else:
            self.line = f"{self.line} {msg}" if self.line else msg

    def show_shared(self, caller: wasmtime.Caller) -> None:
        read = caller.get("readSharedRWMemory")
        value = sum((read(caller, j) & 0xFFFFFFFF) << (32 * j) for j in range(self.n32))
        if not self.values_in_line:
            self._emit(str(value))
        else:
            self.line = f"{self.line} {value}" if self.line else str(value)

    def _emit(self, line: str) -> None:
        if self.log is not None:
            self.log(line)


class _CircuitTrap(Exception):
    def __init__(self, code: int):
        self.code = code


def _message(caller: wasmtime.Caller) -> str:
    get_char = caller.get("getMessageChar")
    chars = []
    while c := get_char(caller):
        chars.append(chr(c))
    return "".join(chars)


class WitnessCalculator:
    """A circom 2 circuit's .wasm, compiled once, that computes witnesses for many inputs.

    Attributes: `name` (the .wasm's path or given name, used in messages), `sha256`, `prime`,
    `n8` (bytes per field element), `n_witness`, `n_inputs` (input values the circuit takes),
    `circom_version` ("2.2.3"), `curve` (bn128 / bls12381, or None for another prime).

    Thread-safe: each calculation has its own wasmtime store.
    """

    def __init__(self, wasm: bytes, *, name: str = "circuit.wasm", cache_dir: Path | None | str = "default"):
        """Compiles (or loads from the compiled-module cache) the circuit `wasm`.

        `cache_dir`: where compiled modules are kept; "default" is cache.default_dir(), None none.

        Raises:
            FormatError: `wasm` is not a WebAssembly module.
            UnsupportedError: a module that is not circom 2's witness calculator.
        """
        self.name = name
        self.sha256 = hashlib.sha256(wasm).hexdigest()
        engine, self._batch = _engine_and_batch()
        self._engine = engine
        directory = cache.default_dir() if cache_dir == "default" else (Path(cache_dir) if cache_dir else None)
        try:
            self._module = cache.compiled_module(engine, wasm, f"{self.sha256}-{_wasmtime_tag()}", directory)
        except wasmtime.WasmtimeError as exc:
            raise FormatError(f"not a WebAssembly module: {str(exc).splitlines()[0]}", path=name) from None
        self._check_interface()
        store, ex, _ = self._instantiate(None)
        self.n32 = ex["getFieldNumLen32"](store)
        ex["getRawPrime"](store)
        self.prime = sum((ex["readSharedRWMemory"](store, j) & 0xFFFFFFFF) << (32 * j) for j in range(self.n32))
        self.n8 = 4 * self.n32
        self.n_witness = ex["getWitnessSize"](store)
        self.n_inputs = ex["getInputSize"](store)
        exports = {e.name for e in self._module.exports}
        self._minor = ex["getMinorVersion"](store) if "getMinorVersion" in exports else 0
        self._patch = ex["getPatchVersion"](store) if "getPatchVersion" in exports else 0
        major = ex["getVersion"](store)
        self.circom_version = f"{major}.{self._minor}.{self._patch}"
        if major != 2:          # the protocol above is circom 2's; another may differ in any call
            raise UnsupportedError(f"a circom {self.circom_version} witness calculator; zkqueue reads circom 2's",
                                   path=name, expected="circom 2", found=self.circom_version)

    @property
    def curve(self) -> Curve | None:
        """bn128 or bls12381 when the circuit's prime is one's scalar field, else None."""
        from .. import curves           # here: its import-time checks cost `wtns calculate` start-up

        return next((c for c in curves.CURVES.values() if c.r == self.prime), None)

    @property
    def field_name(self) -> str:
        curve = self.curve
        return f"{curve.name} scalar field" if curve else f"field of {self.name}"

    def _check_interface(self) -> None:
        exports = {e.name for e in self._module.exports}
        if "getVersion" not in exports and "getFrLen" in exports:
            raise UnsupportedError("a circom 1 witness calculator; compile the circuit with circom 2",
                                   path=self.name, expected="circom 2", found="circom 1")
        missing = [e for e in _EXPORTS if e not in exports]
        if missing:
            raise UnsupportedError(f"not a circom 2 witness calculator: no {', '.join(missing)} export",
                                   path=self.name, expected="circom 2 exports", found=sorted(exports))
        odd = [f"{i.module}.{i.name}" for i in self._module.imports
               if i.module != "runtime" or i.name not in RUNTIME_IMPORTS]
        if odd:
            raise UnsupportedError(f"the circuit imports {', '.join(odd)}, which zkqueue does not provide",
                                   path=self.name, expected=list(RUNTIME_IMPORTS), found=odd)

    def _instantiate(self, run: _Run | None):
        store = wasmtime.Store(self._engine)
        run = run or _Run(0, 0, 0, None)
        circuit = wasmtime.Instance(store, self._module, run.imports(store, self._module))
        ex = circuit.exports(store)
        batch = wasmtime.Instance(store, self._batch, [ex["getWitness"], ex["readSharedRWMemory"],
                                                       ex["writeSharedRWMemory"], ex["setInputSignal"]])
        return store, ex, batch.exports(store)

    def calculate(self, inputs: Mapping[str, Any], *, source: str | None = None,
                  log: Callable[[str], None] | None = None) -> bytes:
        """The .wtns file (bytes) of the witness for `inputs`, identical to `snarkjs wtns calculate`'s.

        `inputs` is input.json's object; `source` names it in errors (e.g. its path);
        `log` receives each line the circuit's log() prints.

        Raises:
            UnknownInputError, InputCountError, InputValueError: the inputs do not fit the circuit.
            CircuitAssertError: an assert in the circuit failed (circom error 4).
            CircuitRuntimeError: another error the circuit's code reports.
            FormatError: an array mixing bus objects and values.
        """
        return encode_wtns(self.prime, self.n8, self._values(inputs, source, log))

    def calculate_witness(self, inputs: Mapping[str, Any], *, source: str | None = None,
                          log: Callable[[str], None] | None = None) -> "Witness":
        """The same witness as a `Witness`, ready for groth16.prover (bn128 and bls12381 only).

        Raises:
            UnsupportedError: the circuit's prime is neither curve's scalar field.
            and everything `calculate` raises.
        """
        curve = self.curve
        if curve is None:
            raise UnsupportedError("the circuit's prime is neither bn128's nor bls12381's scalar field",
                                   path=self.name, expected="bn128 or bls12381", found=hex(self.prime))
        import numpy as np                       # here only: `wtns calculate` never needs it

        from ..formats.wtns import Witness
        values = np.frombuffer(self._values(inputs, source, log), dtype="<u8").reshape(-1, 4)
        return Witness(path=source or self.name, curve=curve, values=values)

    def check_inputs(self, inputs: Mapping[str, Any], *, source: str | None = None) -> None:
        """Checks `inputs` as `calculate` does before it runs the circuit - every name, array
        length and value, with the same errors - without computing the witness (so a failing
        `assert` in the circuit is not found here). The HTTP API refuses bad inputs with it
        before a job exists.

        Raises:
            UnknownInputError, InputCountError, InputValueError: the inputs do not fit the circuit.
            FormatError: an array mixing bus objects and values.
        """
        store, ex, _ = self._instantiate(_Run(self.n32, self._minor, self._patch, None))
        ex["init"](store, 0)
        self._records(flatten(inputs, source), store, ex, source)

    def _values(self, inputs: Mapping[str, Any], source: str | None,
                log: Callable[[str], None] | None) -> bytes:
        signals = flatten(inputs, source)
        run = _Run(self.n32, self._minor, self._patch, log)
        store, ex, batch = self._instantiate(run)
        ex["init"](store, 0)
        records, owners = self._records(signals, store, ex, source)

        memory = batch["memory"]
        data = b"\0" * 8 + b"".join(records)
        _ensure(store, memory, len(data))
        memory.write(store, data, 0)
        try:
            batch["setInputs"](store, len(records), self.n32)
        except (_CircuitTrap, wasmtime.Trap, wasmtime.WasmtimeError) as exc:
            at = struct.unpack("<I", memory.read(store, 0, 4))[0]
            raise self._failure(exc, run, owners[at] if at < len(owners) else None, source) from None

        size = self.n_witness * self.n8
        _ensure(store, memory, size)
        try:
            batch["readWitness"](store, self.n_witness, self.n32)
        except (_CircuitTrap, wasmtime.Trap, wasmtime.WasmtimeError) as exc:
            raise self._failure(exc, run, None, source) from None
        return bytes(memory.read(store, 0, size))

    def _records(self, signals, store, ex, source: str | None) -> tuple[list[bytes], list[str]]:
        """The batch module's records of every input value, and the label of each.

        Checks every name, length and value before setting any, so the first problem in the
        file is the one reported."""
        records, owners = [], []
        for sig in signals:
            h = sig.hash
            msb, lsb = h >> 32, h & 0xFFFFFFFF
            size = ex["getInputSignalSize"](store, _i32(msb), _i32(lsb))
            # circom 2.2 answers 0 for a name it does not know (older versions -1); an input of
            # no values cannot be given any either, so both read as "no such input"
            if size <= 0 and sig.values:
                raise UnknownInputError(f"unknown input signal \"{sig.name}\": {self.name} has no input "
                                        f"of that name", path=source, found=sig.name)
            if len(sig.values) != size:
                raise InputCountError(f"input signal \"{sig.name}\" takes {size} value{'s' * (size != 1)} "
                                      f"in {self.name}, found {len(sig.values)}", path=source,
                                      expected=size, found=len(sig.values))
            for i, (v, label) in enumerate(zip(sig.values, sig.labels)):
                x = to_field(v, label, self.prime, lambda: self.field_name, source)
                records.append(struct.pack("<III", msb, lsb, i) + x.to_bytes(self.n8, "little"))
                owners.append(label)
        if len(records) < self.n_inputs:
            raise InputCountError(f"sets {len(records)} of the {self.n_inputs} input values {self.name} "
                                  f"takes: an input signal is missing", path=source,
                                  expected=self.n_inputs, found=len(records))
        return records, owners

    def _failure(self, exc: BaseException, run: _Run, label: str | None, source: str | None) -> Exception:
        """The one-line error for a trap: circom's code and messages (template and line)."""
        code = exc.code if isinstance(exc, _CircuitTrap) else run.code
        where = "; ".join(m.strip() for m in run.errors if m.strip())
        if code is None:
            # A trap circom did not raise (out of bounds, stack exhausted): its first line.
            what = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return CircuitRuntimeError(f"{self.name} trapped computing the witness: {what}",
                                       path=source, found=what)
        text = CIRCOM_ERRORS.get(code, "Unknown error")
        msg = f"{text} in circuit {self.name} (circom error {code})"
        if code in (1, 2, 3, 6) and label is not None:
            msg += f" setting {label}"
        if where:
            msg += f": {where}"
        cls = CircuitAssertError if code == 4 else CircuitRuntimeError
        return cls(msg, code=code, path=source, found=text)


def _i32(word: int) -> int:
    """An unsigned 32-bit word as the signed value a wasm i32 parameter takes."""
    return word - (1 << 32) if word >= 1 << 31 else word


def _ensure(store: wasmtime.Store, memory: wasmtime.Memory, size: int) -> None:
    pages = -(-size // 65536)
    have = memory.size(store)
    if pages > have:
        memory.grow(store, pages - have)


def _wasmtime_tag() -> str:
    """Names the wasmtime build (its library's size and time) and our engine settings.

    Cheaper than importlib.metadata (60 ms); wasmtime also refuses a module compiled by
    another build, so this only keeps two installations from replacing each other's files.
    """
    lib = getattr(getattr(wasmtime, "_ffi", None), "dll", None)
    try:
        st = os.stat(lib._name)
        build = hashlib.sha256(f"{lib._name}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:12]
    except (AttributeError, TypeError, OSError):
        build = "unknown"
    return f"wasmtime-{build}-{_ENGINE_TAG}"


def load_calculator(wasm: str | Path | bytes, *, name: str | None = None,
                    cache_dir: Path | None | str = "default") -> WitnessCalculator:
    """The calculator for a circuit .wasm (a path, or its bytes), kept per process by sha256.

    A worker calls this for every job: the first call compiles (or maps the compiled module
    from the disk cache), the next ones with the same circuit return the same object.

    Raises:
        OSError: the file cannot be read.
        FormatError, UnsupportedError: as WitnessCalculator.
    """
    if isinstance(wasm, (bytes, bytearray, memoryview)):
        data, name = bytes(wasm), name or "circuit.wasm"
    else:
        data, name = Path(wasm).read_bytes(), name or str(wasm)
    key = (hashlib.sha256(data).hexdigest(), name)
    with _lock:
        if _engine is not None and _engine[0] != os.getpid():
            _calculators.clear()        # a forked child: those belong to the parent's engine
        calc = _calculators.get(key)
        if calc is not None:
            _calculators.move_to_end(key)
            return calc
    calc = WitnessCalculator(data, name=name, cache_dir=cache_dir)
    with _lock:
        _calculators[key] = calc
        while len(_calculators) > _MAX_CALCULATORS:
            _calculators.popitem(last=False)
    return calc


def calculate_witness(wasm: str | Path | bytes, inputs: Mapping[str, Any] | str | Path,
                      out_path: str | Path | None = None, *, source: str | None = None,
                      log: Callable[[str], None] | None = None) -> bytes:
    """`snarkjs wtns calculate` as a function: the .wtns bytes, also written to `out_path` if given.

    `inputs` is input.json's object or the path of the file (then `source` defaults to it).
    Nothing is written when the calculation fails.

    Raises:
        CircuitInputError (UnknownInputError, InputCountError, InputValueError),
        CircuitRuntimeError (CircuitAssertError), FormatError, UnsupportedError, OSError.
    """
    if isinstance(inputs, (str, Path)):
        source = source or str(inputs)
        inputs = read_inputs(inputs)
    data = load_calculator(wasm).calculate(inputs, source=source, log=log)
    if out_path is not None:
        _write_atomic(Path(out_path), data)
    return data


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
