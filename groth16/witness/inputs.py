"""Input JSON for circom witness calculation, read the way snarkjs reads it.

snarkjs (`wtns calculate`, `groth16 fullprove`) passes input.json through ffjavascript's
unstringifyBigInts and circom_runtime, which flattens each signal's (nested) array and turns
every value into a field element with JavaScript's BigInt(v) mod p. We accept the same
spellings and give the same field elements, with two deliberate differences that turn silent
surprises into errors:

* a value >= p (or <= -p) is refused: it is not an element of the field, and snarkjs would
  silently reduce it mod p; negative values in (-p, 0) are accepted and mean p + v, as in
  snarkjs;
* a JSON *number* beyond 2^53 is refused: JavaScript has already rounded it to a double by
  the time snarkjs sees it, so the witness would not hold the number the file shows.

Objects (circom 2.2 bus inputs) are named "a.b" and "a[0].b", as circom's own generated
witness_calculator.js names them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import FormatError, InputValueError

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MAX_SAFE_JSON_INT = 2**53            # JavaScript numbers are exact only up to here
_DECIMAL = re.compile(r"[+-]?[0-9]+")
_PREFIXED = re.compile(r"0([xob])([0-9a-f]+)", re.IGNORECASE)
_BASES = {"x": 16, "o": 8, "b": 2}


def fnv_hash(name: str) -> int:
    """circom's 64-bit FNV-1a hash of a signal name, over its UTF-16 code units (as JS does).

    The module looks input signals up by this hash (getInputSignalSize / setInputSignal).
    """
    h = _FNV_OFFSET
    data = name.encode("utf-16-le")
    for i in range(0, len(data), 2):
        h ^= data[i] | (data[i + 1] << 8)
        h = (h * _FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


class InputSignal:
    """One input name of input.json with its values flattened in circom's order.

    `labels[i]` says where values[i] stands in the file (e.g. "m[1][2]"), for error messages.
    (A plain class: `dataclasses` would add to `zkqueue wtns calculate`'s start-up.)
    """

    __slots__ = ("name", "values", "labels")

    def __init__(self, name: str, values: list[Any], labels: list[str]):
        self.name = name
        self.values = values
        self.labels = labels

    @property
    def hash(self) -> int:
        return fnv_hash(self.name)


def read_inputs(path: str | Path) -> dict[str, Any]:
    """Reads an input.json: a JSON object from signal names to values or (nested) arrays.

    Raises:
        FormatError: not valid JSON, or not a JSON object.
        OSError: the file cannot be read.
    """
    path = str(path)
    with open(path, "rb") as f:
        return parse_inputs(f.read(), source=path)


def parse_inputs(data: bytes | str, source: str | None = None) -> dict[str, Any]:
    """An input.json's content (e.g. from the artifact store) as read_inputs reads the file.

    Raises:
        FormatError: not valid JSON, or not a JSON object; `source` names it.
    """
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise FormatError(f"not valid JSON: {exc}", path=source) from None
    if not isinstance(obj, dict):
        raise FormatError("an input file must hold a JSON object of signal names to values",
                          path=source, expected="object", found=type(obj).__name__)
    return obj


def flatten(inputs: Mapping[str, Any], source: str | None = None) -> list[InputSignal]:
    """The input signals of `inputs` in file order, each with its values flattened.

    Raises:
        FormatError: an array mixing objects with values (bus inputs must be all objects).
    """
    out: dict[str, InputSignal] = {}

    def values_of(label: str, v: Any, vals: list, labels: list) -> None:
        if isinstance(v, list):
            for i, item in enumerate(v):
                values_of(f"{label}[{i}]", item, vals, labels)
        else:
            vals.append(v)
            labels.append(label)

    def qualify(prefix: str, v: Any) -> None:
        if isinstance(v, Mapping):
            for k, item in v.items():
                qualify(f"{prefix}.{k}" if prefix else str(k), item)
        elif isinstance(v, list) and _holds_object(v):
            _check_all_objects(prefix, v, source)
            for i, item in enumerate(v):
                qualify(f"{prefix}[{i}]", item)
        else:
            vals: list = []
            labels: list = []
            values_of(prefix, v, vals, labels)
            out[prefix] = InputSignal(prefix, vals, labels)

    qualify("", dict(inputs))
    return list(out.values())


def _holds_object(v: list) -> bool:
    return any(isinstance(x, Mapping) or (isinstance(x, list) and _holds_object(x)) for x in v)


def _check_all_objects(prefix: str, v: list, source: str | None) -> None:
    for i, item in enumerate(v):
        if isinstance(item, list):
            _check_all_objects(f"{prefix}[{i}]", item, source)
        elif not isinstance(item, Mapping):
            raise FormatError(f"{prefix}: an array of bus objects also holds {json.dumps(item)} at "
                              f"{prefix}[{i}]", path=source, expected="only objects", found=item)


def to_int(value: Any, label: str, source: str | None = None) -> int:
    """The integer a JSON value means to snarkjs (BigInt(v) after unstringifyBigInts).

    Strings: decimal with an optional sign, or 0x / 0o / 0b; surrounding blanks ignored;
    "" is 0 (as BigInt("") is). Numbers: integral values up to 2^53. true / false: 1 / 0.

    Raises:
        InputValueError: anything else, naming `label` and the value.
    """
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        if abs(value) > _MAX_SAFE_JSON_INT:
            raise InputValueError(
                f"{label} = {value}: JSON numbers beyond 2^53 are rounded by JavaScript (snarkjs would "
                f"use another value); write it as a string: \"{value}\"", path=source,
                expected="a string for large values", found=value)
        return value
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise InputValueError(f"{label} = {value!r}: not an integer", path=source,
                                  expected="an integer", found=value)
        if abs(value) > _MAX_SAFE_JSON_INT:
            raise InputValueError(
                f"{label} = {value!r}: JSON numbers beyond 2^53 are not exact; write it as a string "
                f"of digits", path=source, expected="a string for large values", found=value)
        return int(value)
    if isinstance(value, str):
        s = value.strip()
        if s == "":
            return 0
        if _DECIMAL.fullmatch(s):
            return int(s, 10)
        m = _PREFIXED.fullmatch(s)
        if m:
            try:
                return int(m.group(2), _BASES[m.group(1).lower()])
            except ValueError:
                pass            # e.g. a 9 in an 0o number: reported below
        raise InputValueError(f"{label} = {json.dumps(value)}: not an integer (expected decimal digits "
                              f"or a 0x hex number)", path=source, expected="an integer", found=value)
    raise InputValueError(f"{label} = {json.dumps(value)}: not an integer", path=source,
                          expected="an integer", found=value)


def to_field(value: Any, label: str, prime: int, field_name: str | Callable[[], str],
             source: str | None = None) -> int:
    """`value` as an element of the field of `prime`; negative values v in (-p, 0) mean p + v.

    `field_name` ("bn128 scalar field"), or a function giving it, names the field in errors.

    Raises:
        InputValueError: not an integer, or not in (-p, p).
    """
    n = to_int(value, label, source)
    if not -prime < n < prime:
        if callable(field_name):
            field_name = field_name()
        raise InputValueError(f"{label} = {n}: not an element of the {field_name} (values must be "
                              f"below p = {prime}; negatives count down from p)", path=source,
                              expected="-p < value < p", found=n)
    return n % prime
