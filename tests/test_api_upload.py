"""A 2 GiB proving key streams through `zkqueue serve` into the store with the server's
resident memory under 200 MiB: the body is made on the fly by the client (a .zkey whose
header is real and whose point sections are zeros), never written to disk here."""

from __future__ import annotations

import hashlib
import struct
import threading

import psutil

from api_support import ZKEY, start_server
from queue_support import queue  # noqa: F401  (fixture)

from zkqueue.groth16.formats.binfile import BinFile

RSS_LIMIT = 200 << 20
CHUNK = b"\0" * (1 << 20)


def big_zkey(n_vars: int, log2_domain: int):
    """(size, chunks) of a bn128 .zkey with the fixture's header points and IC, `n_vars`
    wires and a 2^log2_domain domain; its point sections are zeros, streamed."""
    f = BinFile(ZKEY, b"zkey", ".zkey", versions=(1,))
    header = bytearray(f.section(2, "header"))
    pos = 4 + 32 + 4 + 32
    n_public = struct.unpack_from("<I", header, pos + 4)[0]
    struct.pack_into("<I", header, pos, n_vars)
    struct.pack_into("<I", header, pos + 8, 1 << log2_domain)
    small = [(1, struct.pack("<I", 1)), (2, bytes(header)), (3, bytes(f.section(3, "IC"))), (4, struct.pack("<I", 0))]
    zeros = [(5, n_vars * 64), (6, n_vars * 64), (7, n_vars * 128), (8, (n_vars - n_public - 1) * 64),
             (9, (1 << log2_domain) * 64)]
    size = 12 + sum(12 + len(d) for _, d in small) + sum(12 + n for _, n in zeros)

    def chunks():
        yield b"zkey" + struct.pack("<II", 1, len(small) + len(zeros))
        for stype, data in small:
            yield struct.pack("<IQ", stype, len(data)) + data
        for stype, n in zeros:
            yield struct.pack("<IQ", stype, n)
            while n:
                yield CHUNK if n >= len(CHUNK) else CHUNK[:n]
                n -= min(n, len(CHUNK))
    return size, n_public, chunks


def test_a_2_gib_key_streams_into_the_store_with_the_server_under_200_mib(queue, tmp_path):  # noqa: F811
    server = start_server(queue)
    try:
        http = server.http(server.key("big"), timeout=600)
        n_vars = 6 << 20
        size, n_public, chunks = big_zkey(n_vars, 21)
        assert size > 2 << 30
        boundary = b"zkqueue-test-boundary"
        head = (b"--" + boundary + b'\r\nContent-Disposition: form-data; name="zkey"; filename="big.zkey"\r\n'
                b"Content-Type: application/octet-stream\r\n\r\n")
        tail = b"\r\n--" + boundary + b"--\r\n"
        digest = hashlib.sha256()

        def body():
            yield head
            for chunk in chunks():
                digest.update(chunk)
                yield chunk
            yield tail

        proc = psutil.Process(server.proc.pid)
        before = proc.memory_info().rss
        peak = [before]
        done = threading.Event()

        def sample():
            while not done.wait(0.02):
                peak[0] = max(peak[0], proc.memory_info().rss)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            res = http.post("/v1/circuits", content=body(), headers={
                "content-type": f"multipart/form-data; boundary={boundary.decode()}",
                "content-length": str(len(head) + size + len(tail))})
        finally:
            done.set()
            sampler.join()
        assert res.status_code == 201, res.text
        circuit = res.json()
        assert (circuit["n_vars"], circuit["n_public"], circuit["domain_size"]) == (n_vars, n_public, 1 << 21)
        assert circuit["zkey_bytes"] == size and circuit["files"]["zkey"] == digest.hexdigest()
        stored = queue.tmp / "store" / "sha256" / digest.hexdigest()[:2] / digest.hexdigest()
        assert stored.stat().st_size == size
        print(f"server RSS {before / 2**20:.0f} MiB before, peak {peak[0] / 2**20:.0f} MiB during a "
              f"{size / 2**30:.2f} GiB upload")
        assert peak[0] < RSS_LIMIT, f"peak RSS {peak[0] / 2**20:.0f} MiB"
    finally:
        server.stop()
