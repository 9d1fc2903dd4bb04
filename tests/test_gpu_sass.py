"""bench/gpu_sass.py: its SASS parser and longest-path count on hand-written machine code
(branches, a predicated exit, a call not entered, a loop refused), and, where nvcc and
cuobjdump are installed, zkqueue's own product, square and mixed addition compiled for
sm_90 and counted (every field product's limb multiplies are IMAD.WIDE.U32(.X))."""

from __future__ import annotations

import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import gpu_sass  # noqa: E402


def sass(*lines: str) -> str:
    body = "\n".join(f"        /*{16 * i:04x}*/   {ln} ;  /* 0x0 */" for i, ln in enumerate(lines))
    return "\tcode for sm_90\n\t\tFunction : k\n" + body + "\n"


def count(*lines: str) -> gpu_sass.PathCount:
    return gpu_sass.longest_path(gpu_sass.parse_sass(sass(*lines))["k"])


def test_straight_line_counts_integer_instructions_only():
    c = count("S2R R0, SR_TID.X", "LDG.E R2, desc[UR4][R4.64]", "IMAD.WIDE.U32 R6, R2, R2, RZ",
              "IADD3.X R7, R7, RZ, RZ, P0, !PT", "@P0 SEL R8, R6, R7, P1", "STG.E desc[UR4][R4.64], R8", "EXIT")
    assert (c.integer, c.total) == (3, 7)
    assert c.opcodes == {"IMAD.WIDE.U32": 1, "IADD3.X": 1, "SEL": 1}


def test_longest_branch_is_taken_and_calls_are_not_entered():
    c = count("ISETP.NE.AND P0, PT, R0, RZ, PT",   # 0x00
              "@P0 BRA 0x50",                       # 0x10 -> short arm at 0x50
              "IMAD R1, R1, R1, RZ",                # 0x20 long arm: 3 integer
              "IMAD R2, R2, R2, RZ",                # 0x30
              "BRA 0x70",                           # 0x40
              "CALL.REL.NOINC 0x90",                # 0x50 short arm: a call, not entered
              "BRA 0x70",                           # 0x60
              "IADD3 R3, R1, R2, RZ",               # 0x70
              "EXIT",                               # 0x80
              "IMAD R9, R9, R9, RZ", "IMAD R9, R9, R9, RZ", "IMAD R9, R9, R9, RZ", "RET.REL.NODEC R2 0x0")
    assert c.integer == 4  # ISETP, 2 IMAD, IADD3: the callee's three IMADs are not counted


def test_predicated_exit_falls_through_and_dead_code_is_ignored():
    c = count("@P0 EXIT", "IMAD R1, R1, R1, RZ", "EXIT", "BRA 0x30")
    assert c.integer == 1


def test_a_loop_is_refused():
    with pytest.raises(ValueError, match="loop"):
        count("IMAD R1, R1, R1, RZ", "@P0 BRA 0x0", "EXIT")



def test_zkqueue_field_kernels_use_wide_multiply_adds(tmp_path):
    nvcc, cuobjdump = gpu_sass.find_nvcc(), gpu_sass.find_cuobjdump()
    if not nvcc or not cuobjdump:
        pytest.skip("needs nvcc and cuobjdump")
    counts = gpu_sass.ours(gpu_sass.curves.BN128, tmp_path, nvcc, cuobjdump)
    for op in gpu_sass.OPS:
        assert counts[op].integer > 0
    # 8 x 8 limb products a_j b_i and 8 x 8 of m p_j: each is one 32x32 -> 64 multiply-add,
    # but for m p_0, whose low half only cancels the accumulator's low limb (ptxas keeps its
    # high half: an IMAD.HI.U32), so 120 of them. The old row-by-row chains had none.
    c = counts["mul"].opcodes
    assert gpu_sass.wide_madds(counts["mul"]) >= 120 and c["IMAD.HI.U32"] <= 8, c
    assert counts["madd"].integer > 8 * counts["mul"].integer
