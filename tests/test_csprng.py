"""The blinding scalars' source (groth16/csprng.py): in range, unbiased, never fixed."""

from collections import Counter

import pytest

from zkqueue.groth16 import csprng, prover
from zkqueue.groth16.curves import CURVES


def test_randbelow_stays_in_range_and_reaches_both_ends():
    for n in (1, 2, 3, 255, 256, 257, 2**64 + 1):
        draws = [csprng.randbelow(n) for _ in range(400)]
        assert all(0 <= x < n for x in draws)
    small = {csprng.randbelow(5) for _ in range(500)}
    assert small == {0, 1, 2, 3, 4}  # misses a value with probability < 5 * (4/5)^500


def test_randbelow_is_unbiased_where_a_modulo_would_not_be():
    # n = 3 * 2^6 in 8 random bits: x % n would draw 0..63 twice as often as 64..191.
    n, draws = 192, 96_000
    counts = Counter(csprng.randbelow(n) < 64 for _ in range(draws))
    share = counts[True] / draws
    assert abs(share - 1 / 3) < 0.01, share  # about 6.5 standard deviations of slack


def test_randbits_width():
    assert csprng.randbits(0) == 0
    for k in (1, 7, 8, 9, 128):
        draws = [csprng.randbits(k) for _ in range(300)]
        assert all(0 <= x < 2**k for x in draws)
        assert max(draws) >= 2 ** (k - 1)  # the top bit is drawn too


def test_randbelow_rejects_an_empty_range():
    with pytest.raises(ValueError, match="positive bound, got 0"):
        csprng.randbelow(0)


@pytest.mark.parametrize("curve", sorted(CURVES))
def test_blinding_scalars_are_fresh_nonzero_field_elements(curve):
    c = CURVES[curve]
    pairs = [prover.blinding_scalars(c) for _ in range(50)]
    assert all(1 <= v < c.r for pair in pairs for v in pair)
    assert len({v for pair in pairs for v in pair}) == 100
