# SPDX-License-Identifier: Apache-2.0
"""Quiet Warp for the examples' command lines: no start-up banner, no per-module "took N ms (compiled)" lines, no
missing-CUDA-driver line on a machine without a GPU; one line instead when frameview's kernels are not compiled yet.

Only the examples' ``__main__`` blocks use this (``--verbose`` skips it): frameview itself leaves Warp's settings as
the application made them, since Warp's output belongs to whoever runs Warp.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import warp as wp

__all__ = ["quiet_warp"]


def quiet_warp(verbose: bool = False, announce: bool = True) -> None:
    """Initialise Warp quietly unless ``verbose``; with ``announce``, say when frameview's kernels compile first."""
    if verbose:
        wp.init()
        return
    wp.config.log_level = wp.LOG_WARNING  # the banner and module loads are logged at INFO
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as sink:  # Warp's native library prints the driver line itself
        os.dup2(sink.fileno(), 2)
        try:
            wp.init()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            said = sink.read().decode(errors="replace").splitlines()
    for line in said:  # everything but the missing-driver line (CPU-only machines are expected here)
        if line.strip() and "Could not find or load the NVIDIA CUDA driver" not in line:
            print(line, file=sys.stderr)
    if not announce:
        return
    cache = Path(str(getattr(wp.config, "kernel_cache_dir", "") or ""))
    if not (cache.is_dir() and any(p.name.startswith("wp_frameview.") for p in cache.iterdir())):
        print(
            f"frameview: Warp compiles frameview's kernels on first use (about 18 s on a CPU, once; cached in {cache})",
            file=sys.stderr,
        )
