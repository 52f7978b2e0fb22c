# SPDX-License-Identifier: Apache-2.0
"""The machine a run measured on (:func:`machine_info`, in every result file) and how busy the rest of it was
(:class:`HostLoad`)."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import warp as wp

# Warp's banner and module-load lines would go to stdout, into the Markdown (every perf script describes its machine)
wp.config.quiet = True
if hasattr(wp, "LOG_WARNING"):  # Warp >= 1.19 gates them on the log level
    wp.config.log_level = wp.LOG_WARNING


class HostLoad:
    """CPU time other processes used while a block ran, in CPUs (1.0 = one core fully busy), from /proc/stat.

    The 2-core development VM is shared: another process on the sibling hardware thread slows every measurement
    (up to ~1.8x here), so each scene records how busy the rest of the machine was while it was measured.
    """

    def __enter__(self) -> HostLoad:
        self.other_cpus: float | None = None
        self._start = self._sample()
        return self

    def __exit__(self, *exc: object) -> None:
        end = self._sample()
        if self._start is None or end is None:
            return
        (w0, busy0, own0), (w1, busy1, own1) = self._start, end
        if w1 > w0:
            self.other_cpus = round(max(0.0, (busy1 - busy0) - (own1 - own0)) / (w1 - w0), 2)

    @staticmethod
    def _sample() -> tuple[float, float, float] | None:
        try:
            with open("/proc/stat") as f:
                fields = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        busy = (sum(fields[:8]) - fields[3] - fields[4]) / hz  # all but idle and iowait
        t = os.times()
        return time.perf_counter(), busy, t.user + t.system


def machine_info(device: str) -> dict:
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            mem = round(int(next(ln for ln in f if ln.startswith("MemTotal")).split()[1]) / 2**20, 1)
    except (OSError, StopIteration):
        pass
    info: dict[str, Any] = {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "cpu": cpu,
        "logical_cpus": os.cpu_count(),
        "memory_gib": mem,
        "loadavg_1min_at_start": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "warp": wp.config.version,
        "device": device,
        "device_name": wp.get_device(device).name,
        "cuda_devices": wp.get_cuda_device_count(),
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "argv": sys.argv[1:],
    }
    try:
        from pxr import Usd

        info["usd"] = ".".join(map(str, Usd.GetVersion()))
    except ImportError:
        info["usd"] = None
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).parent,
        )
        info["git_commit"] = commit.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        info["git_commit"] = None
    if device.startswith("cuda"):
        d = wp.get_device(device)
        info["device_memory_gib"] = round(getattr(d, "total_memory", 0) / 2**30, 1)
    return info
