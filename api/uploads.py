"""Streamed multipart uploads: each file part goes into the artifact store as it arrives.

A circuit's proving key may be gigabytes, so no part is ever held whole: the body is read
chunk by chunk (uvicorn stops reading the socket while the app has not taken the last
chunk), parsed by python-multipart's push parser, and each file part is written to its own
uncommitted store object (coordinator/store.py `Upload`) in writes of up to WRITE_BYTES,
off the event loop. What the API must check about a file is kept on the side as it goes
by: a `ContainerCapture` of a .zkey/.wtns/.r1cs's header, or a local spool copy of a .wasm
(small, and the witness calculator needs its bytes). Nothing is committed here: the route
checks the parts, then commits them all or aborts them all.

Limits: the body's size (Content-Length first, then the bytes counted, for a chunked
body), the time between two chunks, the number and size of the plain fields.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field

import anyio
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect, Request

from zkqueue.coordinator.store import ArtifactStore, Upload

from .capture import KEEP, ContainerCapture
from .errors import ApiError

WRITE_BYTES = 1 << 20          # one store write (and one thread hop) per MiB
MAX_FIELD_BYTES = 64 << 10     # a plain field: a sha256, a priority, a small JSON object


@dataclass
class FilePart:
    """One uploaded file, written to an uncommitted store object."""

    name: str                  # the form field ("zkey", "witness", ...)
    filename: str
    kind: str                  # zkey, wasm, r1cs, wtns
    upload: Upload
    capture: ContainerCapture | None = None
    spool: tempfile.SpooledTemporaryFile | None = None     # a .wasm's bytes, for its check
    pending: bytearray = field(default_factory=bytearray)

    @property
    def size(self) -> int:
        return self.upload.size + len(self.pending)

    def take(self, data: bytes) -> None:
        if self.capture is not None:
            self.capture.feed(data)
        if self.spool is not None:
            self.spool.write(data)
        self.pending.extend(data)

    def flush(self) -> None:
        """Writes what is pending to the store (in a worker thread: it blocks)."""
        data, self.pending = bytes(self.pending), bytearray()
        if data:
            self.upload.write(data)

    def spooled_bytes(self) -> bytes:
        assert self.spool is not None
        self.spool.seek(0)
        return self.spool.read()

    def close(self) -> None:
        if self.spool is not None:
            self.spool.close()


@dataclass
class Form:
    """A parsed multipart body: plain fields, and file parts in the order they came."""

    fields: dict[str, str] = field(default_factory=dict)
    files: list[FilePart] = field(default_factory=list)

    def file(self, name: str) -> FilePart | None:
        return next((f for f in self.files if f.name == name), None)

    def abort(self) -> None:
        """Drops every uncommitted object (blocks: call it off the event loop)."""
        for f in self.files:
            f.upload.abort()
            f.close()


async def read_form(request: Request, store: ArtifactStore, *, files: dict[str, str], fields: set[str],
                    max_bytes: int, idle_timeout_s: float, max_files: int, repeated: frozenset = frozenset()) -> Form:
    """Parses a multipart/form-data body, streaming each file part (named in `files`, with
    its kind) into the store; `fields` are the plain fields allowed, `repeated` the file
    parts that may come more than once. On any error every object written so far is dropped.

    Raises:
        ApiError: unsupported_media_type, invalid_multipart (malformed, or a part that is
            not allowed), payload_too_large (over `max_bytes`), upload_timeout (nothing
            received for `idle_timeout_s`).
    """
    content_type, params = parse_options_header(request.headers.get("content-type"))
    boundary = params.get(b"boundary")
    if content_type != b"multipart/form-data" or not boundary:
        raise ApiError("unsupported_media_type", "send multipart/form-data (with a boundary)",
                       {"found": request.headers.get("content-type")})
    form = Form()
    reader = _FormReader(store, form, files, fields, repeated, max_files)
    parser = MultipartParser(boundary, reader.callbacks())
    try:
        async for chunk in body_chunks(request, max_bytes, idle_timeout_s):
            try:
                parser.write(chunk)
            except Exception as exc:   # python-multipart's MultipartParseError and friends
                raise ApiError("invalid_multipart", f"malformed multipart body: {exc}") from None
            await reader.apply()
        try:
            parser.finalize()
        except Exception as exc:
            raise ApiError("invalid_multipart", f"malformed multipart body: {exc}") from None
        reader.finish()
    except BaseException:
        # Also on cancellation (the client went away): nothing uncommitted may stay behind.
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(form.abort)
        raise
    return form


async def body_chunks(request: Request, max_bytes: int, idle_timeout_s: float):
    """The request body's chunks as they arrive, within a size limit (the declared length
    first, then the bytes counted) and an idle timeout.

    Raises:
        ApiError: payload_too_large, upload_timeout, invalid_multipart (the client left).
    """
    check_length(request, max_bytes)
    received = 0
    stream = request.stream().__aiter__()
    while True:
        with anyio.move_on_after(idle_timeout_s) as idle:
            try:
                chunk = await stream.__anext__()
            except StopAsyncIteration:
                return
            except ClientDisconnect:
                raise ApiError("invalid_request", "the client closed the connection mid-body") from None
        if idle.cancelled_caught:
            raise ApiError("upload_timeout", f"nothing received for {idle_timeout_s:g} s; the upload is dropped",
                           {"received_bytes": received})
        received += len(chunk)
        if received > max_bytes:
            raise too_large(received, max_bytes)
        yield chunk


def check_length(request: Request, max_bytes: int) -> None:
    """Refuses a body whose declared length is over `max_bytes` before reading any of it.

    Raises:
        ApiError: payload_too_large.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise too_large(int(declared), max_bytes)


def too_large(size: int, max_bytes: int) -> ApiError:
    return ApiError("payload_too_large", f"the body is over the limit of {max_bytes} bytes",
                    {"limit_bytes": max_bytes, "found_bytes": size})


class _FormReader:
    """Builds a Form from python-multipart's callbacks. The parser calls them synchronously
    inside parser.write(chunk); they only queue events, and apply() then acts on them, since
    acting means writing to the store, in a worker thread."""

    def __init__(self, store: ArtifactStore, form: Form, files: dict[str, str], fields: set[str],
                 repeated: frozenset, max_files: int):
        self.store, self.form, self.files, self.fields = store, form, files, fields
        self.repeated, self.max_files = repeated, max_files
        self.events: list[tuple[str, bytes]] = []
        self.headers: dict[bytes, bytes] = {}
        self._header_field, self._header_value = bytearray(), bytearray()
        self.current: FilePart | None = None      # the file part being received
        self.field: str | None = None             # ... or the plain field
        self.value = bytearray()

    def callbacks(self) -> dict:
        def on_header_end():
            self.headers[bytes(self._header_field).lower()] = bytes(self._header_value)
            self._header_field.clear()
            self._header_value.clear()
        return {
            "on_part_begin": self.headers.clear,
            "on_header_field": lambda data, start, end: self._header_field.extend(data[start:end]),
            "on_header_value": lambda data, start, end: self._header_value.extend(data[start:end]),
            "on_header_end": on_header_end,
            "on_headers_finished": lambda: self.events.append(
                ("headers", self.headers.get(b"content-disposition", b""))),
            "on_part_data": lambda data, start, end: self.events.append(("data", bytes(data[start:end]))),
            "on_part_end": lambda: self.events.append(("end", b"")),
        }

    async def apply(self) -> None:
        """Acts on the events of the last chunk, in order."""
        for kind, data in self.events:
            await getattr(self, f"_on_{kind}")(data)
        self.events.clear()

    async def _on_headers(self, disposition: bytes) -> None:
        _, options = parse_options_header(disposition)
        name = options.get(b"name", b"").decode(errors="replace")
        filename = options.get(b"filename")
        if name in self.files:
            if filename is None:
                raise ApiError("invalid_multipart", f"part {name!r} must be a file (a filename)")
            if self.form.file(name) is not None and name not in self.repeated:
                raise ApiError("invalid_multipart", f"part {name!r} given twice")
            if len(self.form.files) >= self.max_files:
                raise ApiError("invalid_multipart", f"more than {self.max_files} files in one request")
            self.current = await anyio.to_thread.run_sync(_new_part, self.store, name,
                                                          filename.decode(errors="replace"), self.files[name])
            self.form.files.append(self.current)
        elif name in self.fields and filename is None:
            if name in self.form.fields:
                raise ApiError("invalid_multipart", f"field {name!r} given twice")
            self.field = name
        else:
            raise ApiError("invalid_multipart", f"unexpected part {name!r}",
                           {"expected": sorted(self.files) + sorted(self.fields), "found": name})

    async def _on_data(self, data: bytes) -> None:
        if self.current is not None:
            self.current.take(data)
            if len(self.current.pending) >= WRITE_BYTES:
                await anyio.to_thread.run_sync(self.current.flush)
        elif self.field is not None:
            self.value.extend(data)
            if len(self.value) > MAX_FIELD_BYTES:
                raise ApiError("payload_too_large", f"field {self.field!r} is over {MAX_FIELD_BYTES} bytes")

    async def _on_end(self, _: bytes) -> None:
        if self.current is not None:
            await anyio.to_thread.run_sync(self.current.flush)
            self.current = None
        elif self.field is not None:
            self.form.fields[self.field] = self.value.decode(errors="replace").strip()
            self.field, self.value = None, bytearray()

    def finish(self) -> None:
        if self.current is not None or self.field is not None:
            raise ApiError("invalid_multipart", "the body ended inside a part")


def _new_part(store: ArtifactStore, name: str, filename: str, kind: str) -> FilePart:
    part = FilePart(name=name, filename=filename, kind=kind, upload=store.open_upload())
    if kind in KEEP:
        part.capture = ContainerCapture(KEEP[kind])
    else:    # a .wasm: kept whole (in memory up to 8 MiB, then on local disk) for its check
        part.spool = tempfile.SpooledTemporaryFile(max_size=8 << 20)
    return part
