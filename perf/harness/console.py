# SPDX-License-Identifier: Apache-2.0
"""Messages and progress for the harness: ``[scaling]`` lines on stderr, notes kept for the JSON, progress bars."""

from __future__ import annotations

import sys
import time

NOTES: list[str] = []


def note(msg: str) -> None:
    """A note for stderr and for the JSON."""
    NOTES.append(msg)
    print(f"[scaling] note: {msg}", file=sys.stderr, flush=True)


def log(msg: str) -> None:
    print(f"[scaling] {msg}", file=sys.stderr, flush=True)


try:
    from tqdm import tqdm as _tqdm
except ImportError:  # pragma: no cover - degrade to no bar
    _tqdm = None


class Progress:
    """Progress of one step: a tqdm bar when stderr is a terminal, else a ``[scaling]`` line every ``every_s`` s.

    In a log (stderr not a terminal, or no tqdm) a long step still says how far it got, without a bar's redraws.
    """

    every_s = 10.0

    def __init__(self, total: int, desc: str, unit: str = "it") -> None:
        self.total, self.desc, self.unit = total, desc, unit
        self.n, self.postfix = 0, ""
        self.t0 = self._last = time.perf_counter()
        self._bar = None
        if _tqdm is not None and sys.stderr.isatty():
            self._bar = _tqdm(total=total, desc=desc, unit=unit, leave=False, dynamic_ncols=True, file=sys.stderr)

    def update(self, n: int = 1) -> None:
        self.n += n
        if self._bar is not None:
            self._bar.update(n)
            return
        now = time.perf_counter()
        if now - self._last >= self.every_s:
            self._last = now
            post = f", {self.postfix}" if self.postfix else ""
            log(f"  {self.desc}: {self.n:,}/{self.total:,} {self.unit} after {now - self.t0:.0f} s{post}")

    def set_postfix_str(self, s: str) -> None:
        self.postfix = s
        if self._bar is not None:
            self._bar.set_postfix_str(s)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def bar(total: int, desc: str, unit: str = "it") -> Progress:
    """Progress of one step (see :class:`Progress`)."""
    return Progress(total, desc, unit)
