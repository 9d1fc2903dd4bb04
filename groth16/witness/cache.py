"""Compiled circuit modules kept on disk, so each circuit is compiled once per machine.

Compiling a circom .wasm to machine code (Cranelift) takes 0.1 s for a small circuit and
seconds for a large one: more than computing its witness. wasmtime can save a compiled module
(`Module.serialize`) and map it back (`Module.deserialize_file`) in well under a millisecond.

A saved module is native code that wasmtime runs without checking it, so only files that this
process's user wrote are loaded: the directory must be owned by us and not writable by group or
others, and so must each file. The name holds the wasm's sha256, the wasmtime version and our
engine settings; wasmtime itself refuses a file made by another version or configuration, and
such a file is then compiled again and replaced. Nothing here is pickle or any other format that
outside data could choose.

Where: $ZKQUEUE_WASM_CACHE (empty or "off" disables it), else wasm/ in the project's cache
directory, $ZKQUEUE_CACHE_DIR (default ~/.cache/zkqueue), beside the native kernels.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import wasmtime

from zkqueue import config

log = logging.getLogger(__name__)

def default_dir() -> Path | None:
    """The cache directory (config.process().wasm_cache), or None when caching is turned off."""
    value = config.process().wasm_cache
    return None if value.strip().lower() in ("0", "off", "no", "none") else Path(value)


def _private(st: os.stat_result) -> bool:
    # Someone else's file, or one that others may rewrite, could hold any machine code.
    return st.st_uid == os.geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _usable_dir(directory: Path) -> bool:
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = directory.stat()
    except OSError as exc:
        log.debug("wasm cache %s unusable: %s", directory, exc)
        return False
    if not (stat.S_ISDIR(st.st_mode) and _private(st)):
        log.warning("not using the wasm cache %s: it must be a directory owned by this user and "
                    "writable by no one else", directory)
        return False
    return True


def compiled_module(engine: wasmtime.Engine, wasm: bytes, key: str,
                    directory: Path | None) -> wasmtime.Module:
    """`wasm` compiled for `engine`: loaded from `directory` when a saved copy fits, else
    compiled (and saved there when possible). `key` names the file; it must change whenever
    `wasm` or the engine's settings do (the caller uses sha256 and a settings tag).

    Raises:
        wasmtime.WasmtimeError: `wasm` is not a valid WebAssembly module.
    """
    path = None
    if directory is not None and _usable_dir(directory):
        path = directory / f"{key}.cwasm"
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            fd = None
        if fd is not None:
            try:
                if _private(os.fstat(fd)):
                    return _load(engine, fd)
                log.warning("ignoring %s: not owned by this user or writable by others", path)
                path = None
            except wasmtime.WasmtimeError as exc:
                log.info("recompiling %s: %s", path, str(exc).splitlines()[0])
            finally:
                os.close(fd)
    module = wasmtime.Module(engine, wasm)
    if path is not None:
        _save(module, path)
    return module


def _load(engine: wasmtime.Engine, fd: int) -> wasmtime.Module:
    # Through the descriptor whose owner was checked, not the name: it cannot be swapped between.
    proc = f"/proc/self/fd/{fd}"
    if os.path.exists(proc):
        return wasmtime.Module.deserialize_file(engine, proc)      # mapped, not read
    with os.fdopen(os.dup(fd), "rb") as f:
        return wasmtime.Module.deserialize(engine, f.read())


def _save(module: wasmtime.Module, path: Path) -> None:
    import tempfile                      # only here: it costs start-up time on every run

    try:
        data = module.serialize()
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".cwasm")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)          # readers see the old file or the whole new one
        except BaseException:
            os.unlink(tmp)
            raise
    except (OSError, wasmtime.WasmtimeError) as exc:
        log.debug("could not save %s: %s", path, exc)
