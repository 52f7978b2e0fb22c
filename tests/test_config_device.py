# SPDX-License-Identifier: Apache-2.0
"""FrameViewCfg checks its device before any stage work: unknown strings and invisible CUDA devices fail at once."""

from __future__ import annotations

import subprocess
import sys

import pytest
import warp as wp

import frameview as fv

BASE = {"prim_path": "/World/envs/env_.*/Camera", "backend": "fabric"}


@pytest.mark.parametrize("device", ["gpu", "cuda0", "CPU", "cuda:-1", "cuda:x", "cpu:0", ""])
def test_unknown_device_string_lists_the_valid_forms(device: str) -> None:
    """A device string Warp does not name is a ValueError listing 'cpu', 'cuda' and 'cuda:N'."""
    with pytest.raises(ValueError, match=r"unknown device .*\['cpu', 'cuda', 'cuda:N'\]"):
        fv.FrameViewCfg.from_dict({**BASE, "device": device})


def test_device_of_the_wrong_type_is_a_type_error() -> None:
    """A non-string device (an int ordinal) is a TypeError naming the field."""
    with pytest.raises(TypeError, match=r"FrameViewCfg\.device"):
        fv.FrameViewCfg.from_dict({**BASE, "device": 0})


def test_cpu_is_always_valid() -> None:
    """device='cpu' validates on every machine."""
    assert fv.FrameViewCfg.from_dict({**BASE, "device": "cpu"}).device == "cpu"


@pytest.mark.skipif(wp.get_cuda_device_count() > 0, reason="this machine has a CUDA device")
@pytest.mark.parametrize("device", ["cuda", "cuda:0", "cuda:1"])
def test_cuda_without_a_gpu_says_use_cpu(device: str) -> None:
    """On a machine without CUDA, a cuda device fails in validate() with 'no CUDA device is visible; use cpu'."""
    with pytest.raises(ValueError, match=r"no CUDA device is visible; use device='cpu'"):
        fv.FrameViewCfg.from_dict({**BASE, "device": device})


@pytest.mark.skipif(wp.get_cuda_device_count() == 0, reason="needs a CUDA device")
def test_cuda_ordinal_beyond_the_visible_devices_lists_them() -> None:
    """cuda:N with N >= the device count names the visible devices."""
    n = wp.get_cuda_device_count()
    assert fv.FrameViewCfg.from_dict({**BASE, "device": "cuda:0"}).device == "cuda:0"
    with pytest.raises(ValueError, match=r"no such CUDA device; visible: \['cuda:0'"):
        fv.FrameViewCfg.from_dict({**BASE, "device": f"cuda:{n}"})


def test_make_frame_view_checks_the_device_before_touching_the_stage() -> None:
    """make_frame_view rejects a bad device without calling the backend: the stage argument is never used."""

    class Untouchable:
        def __getattr__(self, name: str) -> object:
            raise AssertionError(f"the stage was used ({name}) before the device was checked")

    cfg = fv.FrameViewCfg(prim_path=BASE["prim_path"], backend="fabric", device="gpu")
    with pytest.raises(ValueError, match="unknown device 'gpu'"):
        fv.make_frame_view(cfg, Untouchable())


def test_python_m_frameview_reports_version_backends_providers_devices() -> None:
    """`python -m frameview` prints the version and a section for backends, providers and devices."""
    out = subprocess.run([sys.executable, "-m", "frameview"], capture_output=True, text=True, check=True).stdout
    assert out.startswith(f"frameview {fv.__version__}")
    for section in ("backends (FrameViewCfg.backend):", "fabric providers", "devices (FrameViewCfg.device):"):
        assert section in out
    for name in ("memory", "ovstage", "usdrt", "cpu"):
        assert f"  {name}" in out
