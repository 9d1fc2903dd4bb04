"""Witness synthesis (groth16/witness): circuit.wasm + input.json -> .wtns, as snarkjs computes it.

The fixtures' witnesses were written by `snarkjs wtns calculate`; the circuits in
tests/circuits/witness*.circom are compiled here with circom2 and compared with snarkjs (and,
for bus inputs, with circom's own generated witness_calculator.js) run now. `zkqueue fullprove`
proofs are checked with `snarkjs groth16 verify`. Each bad input has its own test: exit 2, the
exact one-line message naming the input file, nothing written.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import (CIRCUITS, FIXTURE_NAMES, FIXTURES, ROOT, circom2, fixture_dir, run, snarkjs,
                      snarkjs_verifies, zkqueue)
from zkqueue.groth16 import curves
from zkqueue.groth16.errors import CircuitAssertError, InputValueError, UnknownInputError
from zkqueue.groth16.formats.wtns import read_wtns

BN_P = curves.BN128.r
GOOD = {"m": [["1", "2", "3", "4"], ["5", "6", "7", "8"], ["9", "10", "11", "12"]],
        "v": ["1", "2", "3", "4"], "k": "999"}
BEACON = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"


@pytest.fixture(scope="session")
def witness_circuits(tmp_path_factory) -> dict[str, Path]:
    """tests/circuits/witness.circom on each curve: its .wasm, and a .zkey + verification key
    (committed p12 powers of tau, one beacon contribution) for fullprove."""
    base = tmp_path_factory.mktemp("witness_circuits")
    out = {}
    for curve in ("bn128", "bls12381"):
        d = base / curve
        d.mkdir()
        shutil.copy(CIRCUITS / "witness.circom", d)
        circom2("witness.circom", "--r1cs", "--wasm", "--O1", "--prime", curve, "-o", ".", cwd=d)
        snarkjs("groth16", "setup", "witness.r1cs", FIXTURES / "ptau" / f"{curve}_p12.ptau", "w_0000.zkey", cwd=d)
        snarkjs("zkey", "beacon", "w_0000.zkey", "witness.zkey", BEACON, "10", cwd=d)
        snarkjs("zkey", "export", "verificationkey", "witness.zkey", "verification_key.json", cwd=d)
        out[curve] = d
    return out


def wasm_of(d: Path) -> Path:
    return d / "witness_js" / "witness.wasm"


def write_input(path: Path, obj) -> Path:
    path.write_text(json.dumps(obj))
    return path


def fails(*args) -> str:
    """Runs a zkqueue command that must fail on its input: exit 2, one line on stderr."""
    proc = zkqueue(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("zkqueue: error: "), proc.stderr
    return proc.stderr[len("zkqueue: error: "):].rstrip("\n")


# ---- byte-identical to snarkjs ---------------------------------------------------------------

@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_fixture_witness_equals_snarkjs(name, tmp_path):
    d = fixture_dir(name)
    proc = zkqueue("wtns", "calculate", d / "circuit_js" / "circuit.wasm", d / "input.json", tmp_path / "w.wtns")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "w.wtns").read_bytes() == (d / "witness.wtns").read_bytes()


def test_partition_inputs_equal_snarkjs():
    """Every partitions/input_i.json of the fixtures (both curves, chain and Poseidon)."""
    from zkqueue.groth16.witness import calculate_witness
    checked = 0
    for d in sorted(FIXTURES.glob("*/partitions")):
        for inp in sorted(d.glob("input_*.json")):
            expected = d / inp.name.replace("input_", "witness_").replace(".json", ".wtns")
            assert calculate_witness(d.parent / "circuit_js" / "circuit.wasm", inp) == expected.read_bytes(), inp
            checked += 1
    assert checked >= 16


SPELLINGS = {
    "strings": GOOD,
    # negative values (p + v), 0x hex, JSON numbers, a boolean, blanks, "+5", 0b/0o: as BigInt reads them
    "spellings": {"m": [[-1, "0x1F", 3.0, True], ["-5", " 6 ", "+7", "0b101"], ["0o17", 10, 11, "-12"]],
                  "v": ["0", str(BN_P - 1), "0XfF", 2**53], "k": -0},
    "large": {"m": [[str(BN_P - 1 - i - 4 * j) for i in range(4)] for j in range(3)],
              "v": [str(2**200 + i) for i in range(4)], "k": "0"},
}


@pytest.mark.parametrize("curve", ["bn128", "bls12381"])
@pytest.mark.parametrize("case", sorted(SPELLINGS))
def test_compiled_circuit_equals_snarkjs(witness_circuits, curve, case, tmp_path):
    """Array inputs (2-D and 1-D), every value spelling snarkjs accepts, log() output on stdout."""
    d = witness_circuits[curve]
    inp = write_input(tmp_path / "input.json", SPELLINGS[case])
    theirs = snarkjs("wtns", "calculate", wasm_of(d), inp, tmp_path / "snarkjs.wtns")
    proc = zkqueue("wtns", "calculate", wasm_of(d), inp, tmp_path / "ours.wtns")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "ours.wtns").read_bytes() == (tmp_path / "snarkjs.wtns").read_bytes()
    assert proc.stdout == theirs.stdout and proc.stdout.startswith("k squared ")    # the circuit's log()
    assert read_wtns(tmp_path / "ours.wtns").curve.name == curve


def test_bus_inputs_equal_circom_generated_calculator(tmp_path):
    """circom 2.2 bus inputs ("p[0].x"), against the witness_calculator.js circom generates."""
    shutil.copy(CIRCUITS / "witness_bus.circom", tmp_path)
    circom2("witness_bus.circom", "--r1cs", "--wasm", "--O1", "--prime", "bn128", "-o", ".", cwd=tmp_path)
    js = tmp_path / "witness_bus_js"
    inp = write_input(tmp_path / "in.json", {"p": [{"x": "2", "y": "3"}, {"x": "5", "y": "7"}],
                                             "q": {"x": "11", "y": "-1"}, "s": 4})
    run(["node", js / "generate_witness.js", js / "witness_bus.wasm", inp, tmp_path / "circom.wtns"])
    proc = zkqueue("wtns", "calculate", js / "witness_bus.wasm", inp, tmp_path / "ours.wtns")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "ours.wtns").read_bytes() == (tmp_path / "circom.wtns").read_bytes()


# ---- fullprove -----------------------------------------------------------------------------

@pytest.mark.parametrize("curve", ["bn128", "bls12381"])
def test_fullprove_verifies_with_snarkjs(witness_circuits, curve, tmp_path):
    d = witness_circuits[curve]
    inp = write_input(tmp_path / "input.json", SPELLINGS["spellings"])
    proc = zkqueue("fullprove", inp, wasm_of(d), d / "witness.zkey", tmp_path / "proof.json", tmp_path / "public.json")
    assert proc.returncode == 0, proc.stderr
    assert snarkjs_verifies(d / "verification_key.json", tmp_path / "public.json", tmp_path / "proof.json")
    # public.json is what snarkjs takes from its own witness: outputs, then the public input v
    snarkjs("wtns", "calculate", wasm_of(d), inp, tmp_path / "sj.wtns")
    snarkjs("wtns", "export", "json", tmp_path / "sj.wtns", tmp_path / "sj.json")
    n_public = 4 + 4                                   # dot[3], total; v[4]
    assert json.loads((tmp_path / "public.json").read_text()) == json.loads((tmp_path / "sj.json").read_text())[1:1 + n_public]


@pytest.mark.parametrize("name", ["bn128_chain_10", "bls12381_poseidon_10"])
def test_fullprove_fixture_verifies_with_snarkjs(name, tmp_path):
    d = fixture_dir(name)
    proc = zkqueue("fullprove", d / "input.json", d / "circuit_js" / "circuit.wasm", d / "circuit_final.zkey",
                   tmp_path / "proof.json", tmp_path / "public.json")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "public.json").read_text() == (d / "public.json").read_text()
    assert snarkjs_verifies(d / "verification_key.json", tmp_path / "public.json", tmp_path / "proof.json")


# ---- bad inputs: one line naming the input file, exit 2, nothing written --------------------

def bad_wtns(witness_circuits, tmp_path, obj) -> tuple[str, Path, Path]:
    d = witness_circuits["bn128"]
    inp = write_input(tmp_path / "input.json", obj)
    out = tmp_path / "w.wtns"
    msg = fails("wtns", "calculate", wasm_of(d), inp, out)
    assert not out.exists() and not list(tmp_path.glob("*.tmp"))
    return msg, inp, wasm_of(d)


def test_unknown_input_name(witness_circuits, tmp_path):
    msg, inp, wasm = bad_wtns(witness_circuits, tmp_path, {**GOOD, "kk": "1"})
    assert msg == f'{inp}: unknown input signal "kk": {wasm} has no input of that name'


def test_too_few_values_for_an_array(witness_circuits, tmp_path):
    msg, inp, wasm = bad_wtns(witness_circuits, tmp_path, {**GOOD, "v": ["1", "2", "3"]})
    assert msg == f'{inp}: input signal "v" takes 4 values in {wasm}, found 3'


def test_too_many_values_for_a_2d_array(witness_circuits, tmp_path):
    msg, inp, wasm = bad_wtns(witness_circuits, tmp_path, {**GOOD, "m": GOOD["m"] + [["1", "2", "3", "4"]]})
    assert msg == f'{inp}: input signal "m" takes 12 values in {wasm}, found 16'


def test_an_array_for_a_single_signal(witness_circuits, tmp_path):
    msg, inp, wasm = bad_wtns(witness_circuits, tmp_path, {**GOOD, "k": ["1", "2"]})
    assert msg == f'{inp}: input signal "k" takes 1 value in {wasm}, found 2'


def test_missing_input(witness_circuits, tmp_path):
    msg, inp, wasm = bad_wtns(witness_circuits, tmp_path, {"m": GOOD["m"], "v": GOOD["v"]})
    assert msg == f"{inp}: sets 16 of the 17 input values {wasm} takes: an input signal is missing"


def test_value_equal_to_the_prime(witness_circuits, tmp_path):
    m = [row[:] for row in GOOD["m"]]
    m[1][2] = str(BN_P)
    msg, inp, _ = bad_wtns(witness_circuits, tmp_path, {**GOOD, "m": m})
    assert msg == (f"{inp}: m[1][2] = {BN_P}: not an element of the bn128 scalar field (values must be "
                   f"below p = {BN_P}; negatives count down from p)")


def test_negative_value_beyond_the_prime(witness_circuits, tmp_path):
    msg, inp, _ = bad_wtns(witness_circuits, tmp_path, {**GOOD, "k": str(-BN_P)})
    assert msg == (f"{inp}: k = {-BN_P}: not an element of the bn128 scalar field (values must be "
                   f"below p = {BN_P}; negatives count down from p)")


def test_value_that_is_not_an_integer(witness_circuits, tmp_path):
    msg, inp, _ = bad_wtns(witness_circuits, tmp_path, {**GOOD, "v": ["1", "2.5", "3", "4"]})
    assert msg == f'{inp}: v[1] = "2.5": not an integer (expected decimal digits or a 0x hex number)'


def test_json_number_beyond_2_to_53(witness_circuits, tmp_path):
    (tmp_path / "input.json").write_text('{"m": %s, "v": ["1", "2", "3", "4"], "k": 12345678901234567890}'
                                         % json.dumps(GOOD["m"]))
    d = witness_circuits["bn128"]
    msg = fails("wtns", "calculate", wasm_of(d), tmp_path / "input.json", tmp_path / "w.wtns")
    assert msg == (f'{tmp_path / "input.json"}: k = 12345678901234567890: JSON numbers beyond 2^53 are '
                   f'rounded by JavaScript (snarkjs would use another value); write it as a string: '
                   f'"12345678901234567890"')
    assert not (tmp_path / "w.wtns").exists()


def test_failing_assert_names_template_and_line(witness_circuits, tmp_path):
    msg, inp, wasm = bad_wtns(witness_circuits, tmp_path, {**GOOD, "k": "1000"})
    # circom's own words (as snarkjs prints them): the failing template and line, then its caller
    assert msg == (f"{inp}: Assert Failed in circuit {wasm} (circom error 4): "
                   f"Error in template Check_1 line: 6; Error in template Witness_2 line: 34")


def test_input_file_that_is_not_json(witness_circuits, tmp_path):
    (tmp_path / "input.json").write_text('{"k": ')
    msg = fails("wtns", "calculate", wasm_of(witness_circuits["bn128"]), tmp_path / "input.json",
                tmp_path / "w.wtns")
    assert msg.startswith(f"{tmp_path / 'input.json'}: not valid JSON: ")


def test_wasm_that_is_not_webassembly(tmp_path):
    (tmp_path / "c.wasm").write_bytes(b"\0asm but not really")
    write_input(tmp_path / "input.json", GOOD)
    msg = fails("wtns", "calculate", tmp_path / "c.wasm", tmp_path / "input.json", tmp_path / "w.wtns")
    assert msg.startswith(f"{tmp_path / 'c.wasm'}: not a WebAssembly module: ")


def test_fullprove_failing_assert_proves_nothing(witness_circuits, tmp_path):
    d = witness_circuits["bls12381"]
    inp = write_input(tmp_path / "input.json", {**GOOD, "k": "5000"})
    msg = fails("fullprove", inp, wasm_of(d), d / "witness.zkey", tmp_path / "proof.json", tmp_path / "public.json")
    assert msg == (f"{inp}: Assert Failed in circuit {wasm_of(d)} (circom error 4): "
                   f"Error in template Check_1 line: 6; Error in template Witness_2 line: 34")
    assert not (tmp_path / "proof.json").exists() and not (tmp_path / "public.json").exists()


def test_fullprove_unknown_input_proves_nothing(witness_circuits, tmp_path):
    d = witness_circuits["bn128"]
    inp = write_input(tmp_path / "input.json", {**GOOD, "z": "1"})
    msg = fails("fullprove", inp, wasm_of(d), d / "witness.zkey", tmp_path / "proof.json", tmp_path / "public.json")
    assert msg == f'{inp}: unknown input signal "z": {wasm_of(d)} has no input of that name'
    assert not (tmp_path / "proof.json").exists() and not (tmp_path / "public.json").exists()


def test_fullprove_circuit_of_another_key(witness_circuits, tmp_path):
    """A .wasm and a .zkey of different circuits: exit 2 before proving, naming both."""
    d = fixture_dir("bn128_chain_10")
    inp = write_input(tmp_path / "input.json", GOOD)
    msg = fails("fullprove", inp, wasm_of(witness_circuits["bn128"]), d / "circuit_final.zkey",
                tmp_path / "proof.json", tmp_path / "public.json")
    assert "values but the key" in msg and str(d / "circuit_final.zkey") in msg
    assert not (tmp_path / "proof.json").exists()


# ---- the Python API the queue calls -----------------------------------------------------------

def test_api_errors_carry_what_was_expected(witness_circuits):
    from zkqueue.groth16.witness import load_calculator
    calc = load_calculator(wasm_of(witness_circuits["bn128"]))
    assert load_calculator(wasm_of(witness_circuits["bn128"])) is calc       # compiled once per process
    assert (calc.n_inputs, calc.n8, calc.curve.name, calc.prime) == (17, 32, "bn128", BN_P)
    with pytest.raises(UnknownInputError) as e:
        calc.calculate({**GOOD, "x": 1}, source="job-7/input-3")
    assert str(e.value).startswith("job-7/input-3: ") and e.value.found == "x" and not e.value.retryable
    with pytest.raises(InputValueError) as e:
        calc.calculate({**GOOD, "k": str(BN_P + 5)})
    assert e.value.found == BN_P + 5
    with pytest.raises(CircuitAssertError) as e:
        calc.calculate({**GOOD, "k": 1000})
    assert e.value.code == 4
    # a failed witness leaves nothing behind: the next one is right
    good = calc.calculate(GOOD)
    assert calc.calculate(GOOD) == good and len(good) == 12 + (12 + 40) + 12 + 32 * calc.n_witness
    w = calc.calculate_witness(GOOD)
    assert w.values.tobytes() == good[-calc.n_witness * 32:] and w.curve is curves.BN128


def test_compiled_module_cache(witness_circuits, tmp_path):
    """The compiled circuit is saved once, reused by later processes, and never loaded when
    others could have written it; a damaged file is compiled again."""
    d = witness_circuits["bls12381"]
    cache = tmp_path / "cache"
    inp = write_input(tmp_path / "input.json", GOOD)

    env = {**os.environ, "ZKQUEUE_WASM_CACHE": str(cache)}

    def calc(out: str, wasm: Path = wasm_of(d), inp: Path = inp) -> bytes:
        proc = subprocess.run([sys.executable, "-m", "zkqueue.groth16.cli", "wtns", "calculate", wasm, inp, tmp_path / out],
                              env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return (tmp_path / out).read_bytes()

    first = calc("a.wtns")
    (saved,) = cache.glob("*.cwasm")
    assert (cache.stat().st_mode & 0o077) == 0
    mtime = saved.stat().st_mtime_ns
    assert calc("b.wtns") == first and saved.stat().st_mtime_ns == mtime      # loaded, not rewritten
    saved.write_bytes(b"damaged")
    assert calc("c.wtns") == first and saved.read_bytes() != b"damaged"      # recompiled and replaced
    # Another circuit's compiled module under this name, writable by others: loading it would
    # fail this input; it must be ignored.
    other = fixture_dir("bn128_chain_10")
    calc("other.wtns", other / "circuit_js" / "circuit.wasm", other / "input.json")
    (other_saved,) = set(cache.glob("*.cwasm")) - {saved}
    saved.write_bytes(other_saved.read_bytes())
    saved.chmod(0o666)
    assert calc("d.wtns") == first


def test_importing_the_cli_does_not_load_wasmtime():
    code = "import sys, zkqueue.groth16.cli, zkqueue.groth16.witness, zkqueue.groth16.witness.cli; print('wasmtime' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert proc.stdout.strip() == "False"


FORK_CHILD = """
import json, os, signal, sys
from zkqueue.groth16.witness import load_calculator
d = sys.argv[1]
inp = json.load(open(d + "/input.json"))
calc = load_calculator(d + "/circuit_js/circuit.wasm")
first = calc.calculate(inp)
pid = os.fork()
if pid == 0:        # as a Celery prefork child: the parent compiled before forking
    signal.alarm(60)    # a hung child must end too, not outlive the test
    child = load_calculator(d + "/circuit_js/circuit.wasm")
    os._exit(0 if child is not calc and child.calculate(inp) == first else 1)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""


def test_forked_child_computes_witnesses():
    """A process forked after compiling (Celery's prefork pool) compiles again and computes:
    no compiler thread pool is inherited half-alive (that hung before parallel compilation
    was turned off)."""
    env = {**os.environ, "ZKQUEUE_WASM_CACHE": "off"}            # compile in parent and child
    proc = subprocess.run([sys.executable, "-c", FORK_CHILD, str(fixture_dir("bn128_chain_10"))],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=180)
    assert proc.returncode == 0 and proc.stdout.strip() == "0", proc.stdout + proc.stderr


def test_api_from_artifact_bytes():
    """What a queue worker holds: the circuit and the input as bytes, named for messages."""
    from zkqueue.groth16.errors import FormatError
    from zkqueue.groth16.witness import load_calculator, parse_inputs
    d = fixture_dir("bls12381_chain_10")
    calc = load_calculator((d / "circuit_js" / "circuit.wasm").read_bytes(), name="job-1/circuit.wasm")
    inputs = parse_inputs((d / "input.json").read_bytes(), source="job-1/input-0.json")
    assert calc.calculate(inputs, source="job-1/input-0.json") == (d / "witness.wtns").read_bytes()
    with pytest.raises(UnknownInputError) as e:
        calc.calculate({**inputs, "y": "1"}, source="job-1/input-1.json")
    assert str(e.value) == ('job-1/input-1.json: unknown input signal "y": job-1/circuit.wasm has no '
                            'input of that name')
    with pytest.raises(FormatError) as e:
        parse_inputs(b'["1"]', source="job-1/input-2.json")
    assert str(e.value) == "job-1/input-2.json: an input file must hold a JSON object of signal names to values"


def test_webassembly_that_is_not_a_circom_circuit(tmp_path):
    import wasmtime
    (tmp_path / "other.wasm").write_bytes(wasmtime.wat2wasm('(module (func (export "main")))'))
    write_input(tmp_path / "input.json", GOOD)
    msg = fails("wtns", "calculate", tmp_path / "other.wasm", tmp_path / "input.json", tmp_path / "w.wtns")
    assert msg.startswith(f"{tmp_path / 'other.wasm'}: not a circom 2 witness calculator: no getVersion, ")
    assert not (tmp_path / "w.wtns").exists()
