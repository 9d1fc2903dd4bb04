"""The interface every proving backend implements.

Arrays are numpy ``uint64`` arrays of little-endian 64-bit words, one row per element:
  * Fr elements: shape (n, 4). "mont" arrays hold Montgomery form (x * 2^256 mod r),
    "std" arrays standard form (MSM scalars are standard form, as in .wtns files).
  * G1 affine points: shape (n, 2 * n8q / 8); G2 affine points: shape (n, 4 * n8q / 8);
    coordinates in Montgomery form, infinity all zeros: the .zkey encoding, so key
    sections are passed as zero-copy views.
A backend is bound to one curve (`groth16.curves.Curve`) when it is created.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from ..errors import InputError


class Backend(Protocol):
    """What the prover needs from a compute device. Methods raise `BackendError` on failure."""

    name: str

    def evaluate_ab(self, coefs: np.ndarray, witness_std: np.ndarray, domain_size: int
                    ) -> tuple[np.ndarray, np.ndarray]:
        """Evaluations of A and B on the domain (Montgomery form, shape (domain_size, 4)).

        `coefs` is the raw section 4 of a .zkey after its u32 count, viewed as a structured
        array with fields matrix (u32), constraint (u32), signal (u32), value (4 x u64:
        the coefficient times R^2, so that one Montgomery multiply with a standard-form
        witness value yields the Montgomery form of the product).
        """

    def mul(self, a_mont: np.ndarray, b_mont: np.ndarray) -> np.ndarray:
        """Pointwise a * b (Montgomery form in and out)."""

    def ntt(self, values_mont: np.ndarray, *, inverse: bool = False, coset_shift: int | None = None
            ) -> np.ndarray:
        """Forward or inverse NTT over the size-n domain (n a power of two), natural order.

        Forward with `coset_shift` g first multiplies coefficient i by g^i (so it evaluates
        on g*<omega>); inverse with `coset_shift` g divides value i by g^i afterwards.
        Roots of unity are snarkjs's (see Curve.root_of_unity). Returns a new array.
        """

    def h_scalars(self, a_mont: np.ndarray, b_mont: np.ndarray, c_mont: np.ndarray) -> np.ndarray:
        """a*b - c pointwise, converted out of Montgomery form: the H MSM's scalars."""

    def msm_g1(self, points: np.ndarray, scalars_std: np.ndarray) -> bytes:
        """sum scalars[i] * points[i] on G1, as affine LEM bytes (zeros for infinity)."""

    def msm_g2(self, points: np.ndarray, scalars_std: np.ndarray) -> bytes:
        """sum scalars[i] * points[i] on G2, as affine LEM bytes (zeros for infinity)."""


def as_words(a: np.ndarray, width: int, what: str) -> np.ndarray:
    """`a` as a contiguous (n, width) uint64 array (a view where possible)."""
    arr = np.ascontiguousarray(a)
    if arr.dtype == np.uint64 and arr.ndim == 2 and arr.shape[1] == width:
        return arr  # the same object: the CUDA backend recognises its own outputs by identity
    if arr.dtype != np.uint64:
        if arr.dtype == np.uint8 and arr.size % (8 * width) == 0:
            arr = arr.reshape(-1).view(np.uint64)  # raw bytes (e.g. a file section)
        else:
            arr = np.ascontiguousarray(arr, dtype=np.uint64)
    if arr.size % width:
        raise InputError(f"{what}: {arr.size} words is not a whole number of {width}-word elements",
                         expected=f"multiple of {width}", found=arr.size)
    return arr.reshape(-1, width)
