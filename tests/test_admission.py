"""Admission's verdict (workers/admission.judge) on a GPU worker: the device's memory is judged
beside the host's. The device model (workers/key_needs.device_needs) is from the buffers the
CUDA prover allocates; it has not been calibrated against a GPU's measured peak (no GPU in
CI), so these tests pin the verdict's logic, not the model's constants."""

from __future__ import annotations

import pytest

from zkqueue.workers import admission
from zkqueue.workers.key_needs import KeyShape, device_needs, host_needs
from zkqueue.workers.memory import MemoryLimit

GIB = 1 << 30
# A 2^24 key of 2 GiB: about 7 GiB on the device by the model (key, NTT buffers, MSM sort arrays).
BIG = KeyShape("bn128", domain_size=1 << 24, n_vars=1 << 24, n_public=1, zkey_bytes=2 * GIB)


@pytest.fixture(autouse=True)
def roomy_host(monkeypatch):
    """A host limit with room for everything: only the device decides here."""
    monkeypatch.setattr(admission, "process_limit", lambda: MemoryLimit(64 * GIB, 1 * GIB, "test host"))


def test_the_model_asks_more_of_the_device_than_the_key_itself():
    assert 6 * GIB < device_needs(BIG) < 8 * GIB
    assert host_needs(BIG, "cuda") < GIB


def test_a_gpu_without_room_for_the_key_refuses_it_naming_the_gpu():
    v = admission.judge(BIG, "cuda", threads=1, held_key_bytes=0, holds_it=False, device_free_bytes=4 * GIB)
    assert not v.fits and v.device_short
    assert v.words() == (f"needs about {device_needs(BIG) >> 20} MiB of GPU memory, this worker's GPU has room "
                         f"for {4 * GIB >> 20} MiB")


def test_a_gpu_with_room_takes_it():
    v = admission.judge(BIG, "cuda", threads=1, held_key_bytes=0, holds_it=False, device_free_bytes=16 * GIB)
    assert v.fits and not v.device_short


def test_keys_the_gpu_holds_count_as_room_they_are_evicted_first():
    tight = admission.judge(BIG, "cuda", threads=1, held_key_bytes=0, holds_it=False, device_free_bytes=5 * GIB)
    evicting = admission.judge(BIG, "cuda", threads=1, held_key_bytes=3 * GIB, holds_it=False,
                               device_free_bytes=5 * GIB)
    assert not tight.fits and evicting.fits


def test_a_key_already_loaded_fits_whatever_the_reading():
    assert admission.judge(BIG, "cuda", threads=1, held_key_bytes=2 * GIB, holds_it=True,
                           device_free_bytes=0).fits


def test_without_a_device_reading_or_on_a_cpu_the_device_is_not_judged():
    assert admission.judge(BIG, "cuda", threads=1, held_key_bytes=0, holds_it=False, device_free_bytes=None).fits
    cpu = admission.judge(BIG, "cpu", threads=1, held_key_bytes=0, holds_it=False, device_free_bytes=0)
    assert cpu.device_room_bytes is None and not cpu.device_short


def test_the_host_still_decides_when_it_is_the_short_one(monkeypatch):
    monkeypatch.setattr(admission, "process_limit", lambda: MemoryLimit(1 * GIB, 900 << 20, "cgroup v2 /test"))
    v = admission.judge(BIG, "cuda", threads=1, held_key_bytes=0, holds_it=False, device_free_bytes=16 * GIB)
    assert not v.fits and not v.device_short and "(cgroup v2 /test)" in v.words()
