# SPDX-License-Identifier: Apache-2.0
"""The status-word protocol of device errors (``frameview._core.device_errors.DeviceErrors``), run on the CPU.

On CUDA a call that can fail ends with a kernel that counts it and stores ``(calls, status)`` into pinned memory;
the host counts the same calls and names the failing one from the word. Warp's CPU launches are synchronous, so the
protocol runs here exactly as on a GPU that has finished its work; the CUDA suite runs it through the views.
"""

from __future__ import annotations

import pytest
import warp as wp

from frameview._core.device_errors import STATUS_CODES, STATUS_OK, DeviceErrors, split_status


class _FailedError(Exception):
    pass


def _factory(name: str):
    def make(value: int) -> Exception:
        return _FailedError(name, *split_status(value))

    return make


def _call(errors: DeviceErrors, name: str, fail_row: int | None = None) -> None:
    """One call that can fail: its kernels (maybe) report, it publishes, it queues its error factory."""
    if fail_row is not None and int(errors.status.numpy()[0]) == STATUS_OK:  # the word is sticky
        errors.status.fill_(fail_row * int(STATUS_CODES) + 1)
    errors.publish()
    errors.settle(_factory(name), now=False, published=True)


@pytest.fixture
def errors() -> DeviceErrors:
    return DeviceErrors(wp.get_device("cpu"), deferred=True)


def test_clean_calls_are_forgotten(errors: DeviceErrors) -> None:
    for k in range(10):
        _call(errors, f"call {k}")
    errors.poll()
    assert not errors._pending
    word = int(errors._host[0])
    assert (word >> 32, word & 0xFFFFFFFF) == (10, STATUS_OK)


def test_the_failing_call_is_named_not_the_first_queued(errors: DeviceErrors) -> None:
    _call(errors, "first")
    _call(errors, "second", fail_row=3)
    _call(errors, "third")  # a no-op on the device: the word is sticky
    with pytest.raises(_FailedError) as info:
        errors.poll()
    assert info.value.args == ("second", 3, 1)
    _call(errors, "fourth")  # counting resumed where the device stopped: the failing call's number
    errors.poll()
    assert not errors._pending
    assert int(errors._host[0]) >> 32 == 3


def test_more_queued_calls_than_the_limit(errors: DeviceErrors) -> None:
    for k in range(3 * DeviceErrors._MAX_PENDING):
        _call(errors, f"call {k}")
        assert len(errors._pending) < DeviceErrors._MAX_PENDING
    _call(errors, "late", fail_row=0)
    with pytest.raises(_FailedError, match="late"):
        errors.poll()


def test_a_failure_in_a_captured_call_is_reported_without_a_name(errors: DeviceErrors, monkeypatch) -> None:
    _call(errors, "before")
    monkeypatch.setattr(errors, "is_capturing", lambda: True)
    errors.status.fill_(2 * int(STATUS_CODES) + 5)
    errors.publish()  # uncounted: the caller's graph runs it later, any number of times
    monkeypatch.undo()
    _call(errors, "after")
    with pytest.raises(RuntimeError, match=r"captured in a CUDA graph failed \(row 2, error code 5\)"):
        errors.poll()
    _call(errors, "clean")
    errors.poll()
    assert not errors._pending


def test_check_raises_what_no_queued_call_names(errors: DeviceErrors) -> None:
    errors.status.fill_(7 * int(STATUS_CODES) + 2)
    with pytest.raises(_FailedError) as info:
        errors.check(_factory("check"))
    assert info.value.args == ("check", 7, 2)
    errors.check(_factory("check"))  # reset: nothing left to raise
