# SPDX-License-Identifier: Apache-2.0
"""RecordedLaunch: a recorded launch re-packs only what changed, and on the CPU calls the kernel's entry point with an
argument block kept between launches. Every launch is checked against NumPy's result of the same arguments."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

from frameview._core.launch import RecordedLaunch


@wp.struct
class _Gain:
    scale: wp.float32
    bias: wp.array(dtype=wp.float32)


@wp.kernel(enable_backward=False)
def _affine(src: wp.array(dtype=wp.float32), gain: _Gain, shift: float, out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    out[i] = src[i] * gain.scale + gain.bias[i] + shift + float(i)


def _gain(scale: float, bias: np.ndarray, device: str) -> _Gain:
    g = _Gain()
    g.scale = scale
    g.bias = wp.array(bias, dtype=wp.float32, device=device)
    return g


def _truth(src: np.ndarray, scale: float, bias: np.ndarray, shift: float, n: int) -> np.ndarray:
    return src[:n] * np.float32(scale) + bias[:n] + np.float32(shift) + np.arange(n, dtype=np.float32)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda:0", marks=pytest.mark.cuda)])
def test_each_launch_sees_the_arguments_it_was_given(device: str) -> None:
    if device.startswith("cuda") and not wp.is_cuda_available():
        pytest.skip("no CUDA device")
    rng = np.random.default_rng(3)
    n = 37
    srcs = [rng.normal(size=n).astype(np.float32) for _ in range(2)]
    biases = [rng.normal(size=n).astype(np.float32) for _ in range(2)]
    src_a = [wp.array(s, dtype=wp.float32, device=device) for s in srcs]
    gains = [_gain(2.0, biases[0], device), _gain(-0.5, biases[1], device)]
    out = [wp.zeros(n, dtype=wp.float32, device=device) for _ in range(2)]
    rec = RecordedLaunch(_affine, n, [src_a[0], gains[0], 1.0, out[0]], wp.get_device(device))
    # (src, gain, shift, out, dim): the same again, a new array, a new struct, a new scalar, a smaller dim, an output
    calls = [(0, 0, 1.0, 0, n), (0, 0, 1.0, 0, n), (1, 0, 1.0, 0, n), (1, 1, 1.0, 0, n), (1, 1, 4.5, 0, n),
             (0, 1, 4.5, 0, 11), (0, 0, -2.0, 1, n), (1, 0, -2.0, 1, 5)]  # fmt: skip
    for s, g, shift, o, dim in calls:
        out[o].zero_()
        rec.launch(dim, [src_a[s], gains[g], shift, out[o]])
        got = out[o].numpy()
        scale = (2.0, -0.5)[g]
        np.testing.assert_allclose(got[:dim], _truth(srcs[s], scale, biases[g], shift, dim), rtol=1e-6, atol=1e-6)
        assert not got[dim:].any(), "a launch wrote beyond its dimension"


def test_cpu_launches_call_the_entry_point_directly() -> None:
    """The kept argument block is in use on the Warp versions it was written against (1.17-1.19): a Warp whose
    launch layout changed would silently lose it."""
    version = tuple(int(p) for p in wp.config.version.split(".")[:2])
    if not (1, 17) <= version <= (1, 19):
        pytest.skip(f"the CPU entry was written against Warp 1.17-1.19's launch layout (this is {wp.config.version})")
    out = wp.zeros(4, dtype=wp.float32, device="cpu")
    rec = RecordedLaunch(_affine, 4, [out, _gain(1.0, np.zeros(4), "cpu"), 0.0, out], wp.get_device("cpu"))
    assert rec._cpu is not None


def test_cpu_capture_records_the_launch_instead_of_running_it() -> None:
    device = "cpu"
    src = wp.array(np.arange(6, dtype=np.float32), device=device)
    out = wp.zeros(6, dtype=wp.float32, device=device)
    gain = _gain(3.0, np.ones(6, dtype=np.float32), device)
    rec = RecordedLaunch(_affine, 6, [src, gain, 0.0, out], wp.get_device(device))
    try:
        capture = wp.ScopedCapture(device=device)
        with capture:
            rec.launch(6, [src, gain, 0.0, out])
    except Exception as exc:  # a Warp without CPU graph capture
        pytest.skip(f"no CPU capture in this Warp: {exc}")
    assert not out.numpy().any(), "a launch inside a CPU capture ran instead of being recorded"
    wp.capture_launch(capture.graph)
    np.testing.assert_allclose(out.numpy(), _truth(np.arange(6, dtype=np.float32), 3.0, np.ones(6), 0.0, 6))
