"""The circuit registry: a proving key with, optionally, its .wasm and .r1cs, checked once.

A circuit is content: its id is derived from the sha256 of its files, so the same files
registered twice (by one key or two) are one circuit, stored once. What each key may use
is the set of circuits it registered (zkq:apikey:{key}:circuits). What the API learned
checking a file (its kind and header numbers, a key's verification key) is kept under the
file's sha256 (zkq:artifact:{sha}), so naming that file by hash later needs neither its
body nor a second check. Every function here blocks (Redis, the store): the routes call
them off the event loop.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from functools import lru_cache

import redis

from zkqueue.coordinator import keys
from zkqueue.coordinator.errors import ArtifactMissing
from zkqueue.coordinator.store import ArtifactStore

from .auth import ApiKey
from .capture import check
from .errors import ApiError, from_groth16
from .uploads import Form

ROLES = ("zkey", "wasm", "r1cs")        # the files of a circuit; zkey required
KIND = {"zkey": "zkey", "wasm": "wasm", "r1cs": "r1cs"}


@dataclass
class Circuit:
    id: str
    zkey: str
    wasm: str
    r1cs: str
    vk: str
    wasm_name: str
    curve: str
    n_vars: int
    n_public: int
    domain_size: int
    zkey_bytes: int
    created_at: float

    def view(self) -> dict:
        """The circuit as GET /v1/circuits/{id} shows it."""
        return {"circuit_id": self.id, "curve": self.curve, "n_public": self.n_public, "n_vars": self.n_vars,
                "domain_size": self.domain_size, "zkey_bytes": self.zkey_bytes,
                "files": {"zkey": self.zkey, "wasm": self.wasm or None, "r1cs": self.r1cs or None,
                          "verification_key": self.vk},
                "accepts": ["witnesses", "inputs"] if self.wasm else ["witnesses"], "created_at": self.created_at}


def circuit_id(zkey: str, wasm: str, r1cs: str) -> str:
    """32 hex characters naming the circuit made of these files (sha256s; "" for none)."""
    return hashlib.sha256(f"zkey:{zkey}\nwasm:{wasm}\nr1cs:{r1cs}".encode()).hexdigest()[:32]


def get(r: redis.Redis, key: ApiKey, cid: str) -> Circuit:
    """A circuit `key` registered.

    Raises:
        ApiError: circuit_not_found (no such circuit, or another key's: the two read the same).
    """
    if len(cid) != 32 or not r.sismember(keys.api_key_circuits(key.id), cid):
        raise ApiError("circuit_not_found", f"no circuit {cid}", {"circuit_id": cid})
    rec = {k.decode(): v.decode() for k, v in r.hgetall(keys.circuit(cid)).items()}
    if not rec:
        raise ApiError("circuit_not_found", f"no circuit {cid}", {"circuit_id": cid})
    return Circuit(id=cid, zkey=rec["zkey"], wasm=rec["wasm"], r1cs=rec["r1cs"], vk=rec["vk"],
                   wasm_name=rec["wasm_name"], curve=rec["curve"], n_vars=int(rec["n_vars"]),
                   n_public=int(rec["n_public"]), domain_size=int(rec["domain_size"]),
                   zkey_bytes=int(rec["zkey_bytes"]), created_at=float(rec["created_at"]))


def known(r: redis.Redis, sha: str) -> dict | None:
    """What the API recorded about stored file `sha` when it checked it, if it did."""
    raw = r.get(keys.artifact(sha))
    return json.loads(raw) if raw else None


def remember(r: redis.Redis, sha: str, meta: dict) -> None:
    r.set(keys.artifact(sha), json.dumps(meta))


def check_stored(r: redis.Redis, store: ArtifactStore, role: str, sha: str) -> dict | None:
    """The checked header of a file named by sha256 in a circuit: from the registry, or read
    from the store when an earlier client (the Python Client) put it there unchecked; None
    when the store does not have it.

    Raises:
        ApiError: invalid_zkey / invalid_wasm / invalid_r1cs: the stored file is not one.
    """
    meta = known(r, sha)
    if meta is not None and meta.get("kind") == KIND[role]:
        return meta
    try:
        path = store.local_path(sha, verify=False)
    except ArtifactMissing:
        return None
    from zkqueue.groth16.errors import InputError

    from .capture import KEEP, ContainerCapture, check
    try:
        if role == "wasm":
            meta = wasm_meta(path.read_bytes(), sha)
            vk = None
        else:
            capture = ContainerCapture(KEEP[role])
            with open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    capture.feed(chunk)
            checked = check(role, capture, f"{role} {sha}")
            meta, vk = {"kind": role, **checked.meta}, checked.verification_key
    except InputError as exc:
        raise from_groth16(f"invalid_{role}", exc, extra={"sha256": sha}) from None
    if vk is not None:
        meta["vk"] = store.put_bytes(vk_bytes(vk))
    meta["bytes"] = store.size(sha)
    remember(r, sha, meta)
    return meta


def vk_bytes(vk: dict) -> bytes:
    """verification_key.json as snarkjs writes it (JSON.stringify(vk, null, 1))."""
    return json.dumps(vk, indent=1).encode()


def wasm_meta(data: bytes, name: str) -> dict:
    """The header numbers of a circom .wasm (compiles it: the calculator stays cached).

    Raises:
        FormatError, UnsupportedError: not a circom 2 witness calculator of bn128 or bls12381.
    """
    from zkqueue.groth16.errors import UnsupportedError
    from zkqueue.groth16.witness import load_calculator

    calc = load_calculator(data, name=name)
    if calc.curve is None:
        raise UnsupportedError("the circuit's prime is neither bn128's nor bls12381's scalar field",
                               path=name, expected="bn128 or bls12381", found=hex(calc.prime))
    return {"kind": "wasm", "curve": calc.curve.name, "n_witness": calc.n_witness, "n_inputs": calc.n_inputs,
            "circom": calc.circom_version}


def cross_check(metas: dict[str, dict]) -> None:
    """Refuses files that cannot be one circuit: a .wasm or .r1cs of another curve, or of
    another number of wires or public signals than the key's.

    Raises:
        ApiError: circuit_mismatch.
    """
    z = metas["zkey"]
    for role, other, mine in (("wasm", "n_witness", "n_vars"), ("r1cs", "n_wires", "n_vars"),
                              ("r1cs", "n_public", "n_public")):
        m = metas.get(role)
        if not m:
            continue
        if m["curve"] != z["curve"]:
            raise ApiError("circuit_mismatch", f"the .{role} is for {m['curve']}, the .zkey for {z['curve']}",
                           {"file": role, "expected": z["curve"], "found": m["curve"]})
        if m[other] != z[mine]:
            raise ApiError("circuit_mismatch", f"the .{role} has {other} {m[other]}, the .zkey {mine} {z[mine]}: "
                           "they are not of one circuit", {"file": role, "expected": z[mine], "found": m[other]})


def register(r: redis.Redis, key: ApiKey, shas: dict[str, str], metas: dict[str, dict],
             wasm_name: str) -> tuple[Circuit, bool]:
    """Records the circuit of these checked files and gives `key` use of it; True when
    `key` did not have it before."""
    z = metas["zkey"]
    cid = circuit_id(shas["zkey"], shas.get("wasm", ""), shas.get("r1cs", ""))
    fields = {"zkey": shas["zkey"], "wasm": shas.get("wasm", ""), "r1cs": shas.get("r1cs", ""), "vk": z["vk"],
              "wasm_name": wasm_name if shas.get("wasm") else "", "curve": z["curve"], "n_vars": z["n_vars"],
              "n_public": z["n_public"], "domain_size": z["domain_size"], "zkey_bytes": z["bytes"],
              "created_at": repr(time.time())}
    # The first registration's record stands (its created_at); the fields are the same content.
    if not r.exists(keys.circuit(cid)):
        r.hset(keys.circuit(cid), mapping=fields)
    added = r.sadd(keys.api_key_circuits(key.id), cid)
    return get(r, key, cid), bool(added)


def register_form(r: redis.Redis, store: ArtifactStore, key: ApiKey, form: Form) -> tuple[dict, bool]:
    """POST /v1/circuits's work once the body is read and its fields checked (api/models.py:
    CircuitByHash, CircuitUpload): checks every file (uploaded or named by sha256), commits
    the uploads, records the circuit for `key`. Returns (the circuit's view with how each file
    came, True when `key` did not have it before).

    Raises:
        ApiError: invalid_request, upload_required, digest_mismatch, invalid_zkey,
            invalid_wasm, invalid_r1cs, circuit_mismatch.
    """
    try:
        return _register_checked(r, store, key, form)
    finally:
        form.abort()          # whatever was not committed (on success: nothing is left)


def _register_checked(r: redis.Redis, store: ArtifactStore, key: ApiKey, form: Form) -> tuple[dict, bool]:
    metas, shas, how, missing, vk = {}, {}, {}, [], None
    for role in ROLES:
        part, named = form.file(role), form.fields.get(f"{role}_sha256")
        if part is not None:
            try:
                if role == "wasm":
                    meta = wasm_meta(part.spooled_bytes(), part.filename)
                else:
                    checked = check(role, part.capture, part.filename)
                    meta, vk = {"kind": role, **checked.meta}, checked.verification_key or vk
            except Exception as exc:
                from zkqueue.groth16.errors import InputError
                if isinstance(exc, InputError):
                    raise from_groth16(f"invalid_{role}", exc, source=part.filename) from None
                raise
            sha = part.upload.sha256
            if named is not None and named != sha:
                raise ApiError("digest_mismatch", f"{part.filename} hashes to {sha}, not the {role}_sha256 sent",
                               {"file": role, "expected": named, "found": sha})
            metas[role], shas[role] = {**meta, "bytes": part.size}, sha
        elif named is not None:
            meta = check_stored(r, store, role, named)
            if meta is None:
                missing.append(role)
            else:
                metas[role], shas[role], how[role] = meta, named, "named"
    if "zkey" not in shas and "zkey" not in missing:
        raise ApiError("invalid_request", "a circuit needs its .zkey: a `zkey` file part, or zkey_sha256",
                       {"expected": "zkey"})
    if missing:
        raise ApiError("upload_required", f"the store does not have the {', '.join(missing)} named by sha256: "
                       "send the file(s)", {"missing": missing})
    cross_check(metas)
    for part in form.files:
        sha, existed = part.upload.commit()
        how[part.name] = "already_stored" if existed else "stored"
        meta = dict(metas[part.name])
        if part.name == "zkey":
            meta["vk"] = store.put_bytes(vk_bytes(vk))
            metas["zkey"] = meta
        remember(r, sha, meta)
    wasm = form.file("wasm")       # its name shows in the witness calculator's messages
    circuit, created = register(r, key, shas, metas, wasm.filename if wasm else "circuit.wasm")
    return {**circuit.view(), "uploaded": how}, created


@lru_cache(maxsize=16)
def calculator(store_url: str, wasm_sha: str, wasm_name: str):
    """The witness calculator of a stored .wasm, kept per process (compiling costs)."""
    from zkqueue.groth16.witness import load_calculator
    store = ArtifactStore(store_url)
    return load_calculator(store.local_path(wasm_sha, verify=False).read_bytes(), name=wasm_name)

