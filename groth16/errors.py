"""The error tree of the proving core.

Every error says whether retrying can help (`retryable`) and carries what was expected and
what was found, so that a job fails with a reason a user can act on. The queue maps
`retryable=False` to "fail the job now" and `retryable=True` to "try again, maybe elsewhere".
"""

from __future__ import annotations


class Groth16Error(Exception):
    """Base class of every error raised by the proving core."""

    retryable = False

    def __init__(self, message: str, *, path: str | None = None,
                 expected: object = None, found: object = None):
        self.path = str(path) if path is not None else None
        self.expected = expected
        self.found = found
        super().__init__(f"{self.path}: {message}" if self.path else message)


class InputError(Groth16Error):
    """The input files are wrong; the same input will fail the same way everywhere."""


class FormatError(InputError):
    """A file is truncated, corrupt, or not of the kind expected (magic, version, sections)."""


class UnsupportedError(InputError):
    """A well-formed file that zkqueue does not handle: another curve or protocol."""


class MismatchError(InputError):
    """Files that do not belong together: witness length or curve differs from the key's."""


class UnsatisfiedError(InputError):
    """The witness does not satisfy the circuit's constraints; no proof exists for it."""


class CircuitInputError(InputError):
    """An input JSON that does not fit the circuit's .wasm (witness calculation)."""


class UnknownInputError(CircuitInputError):
    """An input name the circuit has no input signal for."""


class InputCountError(CircuitInputError):
    """A signal array given the wrong number of values, or inputs left unset."""


class InputValueError(CircuitInputError):
    """A value that is not an integer, or not an element of the circuit's field."""


class CircuitRuntimeError(InputError):
    """The circuit's code failed on these inputs; `code` is circom's error code (or None)."""

    def __init__(self, message: str, *, code: int | None = None, **kw):
        self.code = code
        super().__init__(message, **kw)


class CircuitAssertError(CircuitRuntimeError):
    """An `assert` in the circuit failed (circom error 4)."""


class BackendError(Groth16Error):
    """A compute backend failed. Retryable unless it says otherwise."""

    retryable = True


class Cancelled(BackendError):
    """The caller cancelled a native call (zkq_prove's cancel flag) before it finished."""


class BackendUnavailable(BackendError):
    """A backend that was asked for cannot run here (no GPU, no compiler)."""

    retryable = False


class NativeBuildError(BackendUnavailable):
    """The native CPU kernels failed to compile."""
