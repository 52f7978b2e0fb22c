# SPDX-License-Identifier: Apache-2.0
"""The harness's clock: device-synchronised ``time.perf_counter`` with a warm-up, GC off and a time budget."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

import warp as wp


class Timer:
    """Times callables with device synchronisation before every clock read."""

    def __init__(self, device: str, reps: int, budget_s: float, min_reps: int = 3) -> None:
        self.device = device
        self.reps = reps
        self.budget_s = budget_s
        self.min_reps = min(min_reps, reps)

    def sync(self) -> None:
        wp.synchronize_device(self.device)

    def __call__(
        self,
        fn: Callable[[], Any],
        *,
        setup: Callable[[], Any] | None = None,
        teardown: Callable[[], Any] | None = None,
        reps: int | None = None,
        warmup: int = 1,
    ) -> dict:
        """Median / min / max seconds of ``fn()``; ``setup`` / ``teardown`` run around each call, untimed."""
        reps = reps or self.reps
        for _ in range(warmup):
            if setup:
                setup()
            fn()
            self.sync()
            if teardown:
                teardown()
        times: list[float] = []
        gc.collect()
        gc.disable()
        start = time.perf_counter()
        try:
            while len(times) < reps:
                if setup:
                    setup()
                self.sync()
                t0 = time.perf_counter()
                fn()
                self.sync()
                times.append(time.perf_counter() - t0)
                if teardown:
                    teardown()
                if len(times) >= self.min_reps and time.perf_counter() - start > self.budget_s:
                    break
        finally:
            gc.enable()
        return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times), "reps": len(times)}
