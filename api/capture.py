"""Checks the headers of uploaded .zkey / .wtns / .r1cs files as they stream past.

An upload goes to the artifact store chunk by chunk and is never held whole, here or on a
local disk (keys are gigabytes, and the store may be S3). The readers of groth16/formats
need a file, but they only read a few bytes of it: the 12-byte file header, each section's
12-byte header and a few small sections (a .zkey's protocol, groth16 header and IC points;
a .wtns's header). `ContainerCapture` follows the iden3 container as the bytes go by and
keeps exactly those; `check()` lays them into a sparse temporary file of the upload's full
size (the gaps cost no disk) and runs the real reader on it. So an upload is checked by
the same code as `zkqueue prove` checks its input, before it is committed to the store.
"""

from __future__ import annotations

import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

MAX_SECTIONS = 64              # snarkjs writes 10 (.zkey), 2 (.wtns), 3-5 (.r1cs)
MAX_KEPT_BYTES = 64 << 20      # a .zkey's IC section: (public signals + 1) G1 points

# What each kind's reader reads of a section: section type -> bytes (None: all of it).
KEEP = {
    "zkey": {1: None, 2: None, 3: None, 4: 4},   # protocol, groth16 header, IC, coefficient count
    "wtns": {1: None},                           # header (prime, witness length)
    "r1cs": {1: None},                           # header (prime, wires, constraints)
}


class ContainerCapture:
    """Follows an iden3 binary container (magic, version, nSections, then per section: type
    u32, size u64, payload) fed in chunks of any size, keeping the bytes named by `keep`."""

    def __init__(self, keep: dict[int, int | None]):
        self.keep = keep
        self.size = 0
        self.pieces: list[tuple[int, bytearray]] = []   # (offset in the file, bytes)
        self.problem: str | None = None                 # set when the bytes cannot be a container
        self._need = 12             # bytes still to read into the header being collected
        self._header = bytearray()
        self._in_file_header = True
        self._sections = 0
        self._skip = 0              # payload bytes to pass over
        self._take = 0              # payload bytes to keep, before the skip
        self._kept = 0

    def feed(self, data: bytes) -> None:
        view = memoryview(data)
        while view and self.problem is None:
            if self._take:                       # a payload to keep
                n = min(self._take, len(view))
                self.pieces[-1][1].extend(view[:n])
                self._take -= n
            elif self._skip:                     # a payload to pass over
                n = min(self._skip, len(view))
                self._skip -= n
            else:                                # the file header or a section header
                n = min(self._need, len(view))
                self._header.extend(view[:n])
                self._need -= n
                if not self._need:
                    self._header_done(at=self.size + n)
            self.size += n
            view = view[n:]
        self.size += len(view)                   # what follows a problem is only counted

    def _header_done(self, at: int) -> None:
        """A 12-byte header ended at file offset `at`: keep it, and plan its payload."""
        header, self._header, self._need = bytes(self._header), bytearray(), 12
        self.pieces.append((at - 12, bytearray(header)))
        if self._in_file_header:
            self._in_file_header = False         # magic and version are the reader's to judge
            return
        self._sections += 1
        if self._sections > MAX_SECTIONS:
            self.problem = f"more than {MAX_SECTIONS} sections"
            return
        stype, ssize = struct.unpack("<IQ", header)
        want = self.keep.get(stype, 0)
        take = ssize if want is None else min(want, ssize)
        self._kept += take
        if self._kept > MAX_KEPT_BYTES:
            self.problem = f"section {stype} is too large for its kind ({ssize} bytes)"
            return
        if take:
            self.pieces.append((at, bytearray()))
        self._take, self._skip = take, ssize - take


@dataclass
class Checked:
    """What the reader found in an upload: its kind and the numbers the API keeps."""

    kind: str
    meta: dict
    verification_key: dict | None = None     # a .zkey's verification_key.json object


def _sparse_copy(capture: ContainerCapture, directory: Path, name: str) -> Path:
    path = directory / name
    with open(path, "wb") as f:
        f.truncate(capture.size)
        for offset, data in capture.pieces:
            f.seek(offset)
            f.write(data)
    return path


def check(kind: str, capture: ContainerCapture, filename: str) -> Checked:
    """Runs the proving core's reader of `kind` on what `capture` kept of an upload.

    Raises:
        groth16.errors.InputError (FormatError, UnsupportedError): the reader's own message,
            naming `filename`.
    """
    from zkqueue.groth16.errors import FormatError

    if capture.problem:
        raise FormatError(f"not a {kind} file: {capture.problem}", path=filename)
    with tempfile.TemporaryDirectory(prefix="zkqueue-upload-") as tmp:
        path = _sparse_copy(capture, Path(tmp), Path(filename).name or f"upload.{kind}")
        try:
            return _READERS[kind](path)
        except FormatError as exc:
            # The reader names the sparse copy; the client knows the file by its own name.
            exc.args = (str(exc).replace(str(path), filename),)
            exc.path = filename
            raise


def _zkey(path: Path) -> Checked:
    from zkqueue.groth16 import verifier
    from zkqueue.groth16.formats import jsonfiles, zkey

    h = zkey.read_header(path)
    vk = h.verification_key
    meta = {"curve": h.curve.name, "n_vars": h.n_vars, "n_public": h.n_public, "domain_size": h.domain_size,
            "n_coefs": h.n_coefs}
    return Checked("zkey", meta, jsonfiles.verification_key_json(vk, verifier.alphabeta_json(vk)))


def _wtns(path: Path) -> Checked:
    from zkqueue.groth16.formats import wtns

    h = wtns.read_header(path)
    return Checked("wtns", {"curve": h.curve.name, "n_witness": h.n_witness})


def _r1cs(path: Path) -> Checked:
    from zkqueue.groth16 import curves
    from zkqueue.groth16.formats.binfile import BinFile, read_prime

    f = BinFile(path, b"r1cs", ".r1cs", versions=(1,))
    hdr = f.section(1, "header")
    _, prime, pos = read_prime(hdr, 0, str(path), ".r1cs")
    curve = curves.by_scalar_prime(prime, path=str(path))
    n_wires, n_pub_out, n_pub_in, _n_prv_in, _n_labels, n_constraints = struct.unpack_from("<IIIIQI", hdr, pos)
    return Checked("r1cs", {"curve": curve.name, "n_wires": n_wires, "n_public": n_pub_out + n_pub_in,
                            "n_constraints": n_constraints})


_READERS = {"zkey": _zkey, "wtns": _wtns, "r1cs": _r1cs}

