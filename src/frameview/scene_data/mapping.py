# SPDX-License-Identifier: Apache-2.0
"""Linear-time path mapping between a backend's order and a consumer's order.

Physics backends report transforms in their own order (a rigid-body view's order, say); consumers want them in
their own path order. :func:`create_mapping` builds the index table that reorders one into the other in O(N):
one reverse dictionary over the target paths, one lookup per source path.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from itertools import repeat
from typing import Any

import numpy as np
import warp as wp

__all__ = ["as_path_sequence", "create_mapping", "map_paths", "to_path_strings"]

logger = logging.getLogger(__name__)

_NONE_TYPE = type(None)

# Up to this many entries, ``"".join`` is the cheapest proof that every entry is a str (about 5-12 ns per path on
# the 2-core dev box, against about 20 ns for ``set(map(type, ...))``); beyond it, allocating the joined string
# costs more than it saves (36 ns per path at 1M), so the type set is used instead.
_JOIN_CHECK_MAX = 1 << 19


def _is_sdf_path_type(t: type) -> bool:
    """Whether ``t`` is an ``Sdf.Path`` class (pxr or usdrt), recognised without importing either."""
    return t.__name__ == "Path" and "Sdf" in t.__module__


def as_path_sequence(paths: Any, name: str) -> Sequence[Any]:
    """``paths`` as an indexable sequence; a bare string or a non-sequence is a TypeError."""
    if isinstance(paths, (list, tuple)):
        return paths
    if isinstance(paths, np.ndarray) and paths.ndim == 1:
        return paths.tolist()
    if isinstance(paths, (str, bytes)) or not isinstance(paths, Sequence):
        raise TypeError(
            f"{name}: expected a list or tuple of str or Sdf.Path, got {type(paths).__name__}; "
            f"wrap a single path in a list: [{name}]"
        )
    return paths


def _all_str(paths: Sequence[Any]) -> bool:
    """Whether every entry is a ``str`` (or a subclass), checked at C speed."""
    if len(paths) <= _JOIN_CHECK_MAX:
        try:
            "".join(paths)
        except TypeError:
            return False
        return True
    return set(map(type, paths)) == {str}


def to_path_strings(paths: Sequence[Any], name: str, *, allow_none: bool = True) -> Sequence[str | None]:
    """Return ``paths`` as a sequence of ``str`` (and ``None``), converting ``Sdf.Path`` entries once.

    A list or tuple that holds only ``str`` (and ``None``) is returned as is, without a copy.

    Args:
        paths: A list or tuple (or other non-string sequence) of ``str``, ``Sdf.Path`` or ``None``.
        name: The argument name, for error messages.
        allow_none: Whether ``None`` entries are accepted.

    Returns:
        The paths as ``str`` (``None`` entries kept as ``None``), in the same order.

    Raises:
        TypeError: If ``paths`` is a single string or not a sequence, or an entry is neither ``str``, ``Sdf.Path``
            nor ``None`` (or is ``None`` when ``allow_none`` is false).
    """
    paths = as_path_sequence(paths, name)
    if _all_str(paths):
        return paths
    types = set(map(type, paths))
    needs_str = False
    for t in types:
        if t is _NONE_TYPE:
            if not allow_none:
                _raise_bad_entry(paths, name, allow_none)
        elif _is_sdf_path_type(t):
            needs_str = True
        elif not issubclass(t, str):
            _raise_bad_entry(paths, name, allow_none)
    if not needs_str:  # str (and subclasses such as numpy.str_, which hash and compare as str) and None
        return paths
    if _NONE_TYPE in types:
        return [None if p is None else str(p) for p in paths]
    return list(map(str, paths))


def _raise_bad_entry(paths: Sequence[Any], name: str, allow_none: bool) -> None:
    """Raise a TypeError naming the first entry of ``paths`` that is not a path."""
    for i, p in enumerate(paths):
        t = type(p)
        if (p is None and not allow_none) or not (p is None or issubclass(t, str) or _is_sdf_path_type(t)):
            expected = "str or Sdf.Path" + (" (or None)" if allow_none else "")
            raise TypeError(f"{name}[{i}]: expected {expected}, got {t.__name__} ({p!r})")
    raise AssertionError("unreachable")  # pragma: no cover


def create_mapping(
    source_paths: Sequence[Any], target_paths: Sequence[Any], *, device: wp.DeviceLike = "cpu"
) -> wp.array | None:
    """For each source path, its index in ``target_paths``.

    ``mapping[i]`` is the index of ``source_paths[i]`` in ``target_paths``. If a path occurs more than once in
    ``target_paths``, its first occurrence wins (as ``list.index``). A path that is absent, and a ``None`` entry in
    either sequence, maps to ``-1``. Cost is O(len(source) + len(target)): one reverse dictionary, one lookup per
    source path; ``Sdf.Path`` entries are converted to ``str`` once.

    Example:
        >>> import frameview as fv
        >>> fv.create_mapping(["/b", "/x", "/a"], ["/a", "/b", "/a"]).numpy()
        array([ 1, -1,  0], dtype=int32)
        >>> fv.create_mapping(["/a", "/b"], ["/a", "/b"]) is None  # identity
        True

    Args:
        source_paths: Paths to look up (list or tuple of ``str``, ``Sdf.Path`` or ``None``), length M.
        target_paths: Paths to look them up in (list or tuple of ``str``, ``Sdf.Path`` or ``None``), length N.
        device: Warp device of the returned array.

    Returns:
        ``None`` when the mapping is the identity (M == N and ``mapping[i] == i`` for every i, which includes
        M == N == 0); otherwise a (M,) int32 Warp array on ``device`` with values in ``[-1, N)``.

    Raises:
        TypeError: If either argument is not a sequence of paths (a ``str``, ``Sdf.Path`` or ``None`` each).
    """
    source = as_path_sequence(source_paths, "source_paths")
    target = to_path_strings(target_paths, "target_paths")
    return map_paths(source, target, device=device)


def map_paths(
    source: Sequence[Any], target: Sequence[str | None], *, device: wp.DeviceLike, source_name: str = "source_paths"
) -> wp.array | None:
    """:func:`create_mapping` for a ``target`` already converted by :func:`to_path_strings`.

    Source entries are validated lazily: a plain ``str`` hits the str-keyed index directly, and only the entries
    that miss (absent paths, ``None``, ``Sdf.Path``, or a wrong type) are examined, converted and looked up again.
    """
    n_source = len(source)
    n_target = len(target)
    # Built from the back so that the first occurrence is written last and wins; zip/dict run in C.
    index = dict(zip(reversed(target), range(n_target - 1, -1, -1), strict=True))
    index.pop(None, None)  # a None target matches nothing
    try:
        mapping = np.fromiter(map(index.get, source, repeat(-1)), dtype=np.int32, count=n_source)
    except TypeError:  # an unhashable source entry: name it
        to_path_strings(source, source_name)
        raise
    missed = np.flatnonzero(mapping < 0)
    if missed.size:
        entries = [source[i] for i in missed.tolist()]
        try:
            keys = to_path_strings(entries, source_name)
        except TypeError:
            to_path_strings(source, source_name)  # raises again, naming the entry's index in source_paths
            raise
        if keys is not entries:  # some entries were Sdf.Path: look them up as str
            mapping[missed] = np.fromiter(map(index.get, keys, repeat(-1)), dtype=np.int32, count=len(keys))
            missed = np.flatnonzero(mapping < 0)
    if (
        n_source == n_target
        and missed.size == 0
        and (n_source == 0 or (mapping[0] == 0 and mapping[-1] == n_source - 1))  # cheap early out
        and np.array_equal(mapping, np.arange(n_source, dtype=np.int32))
    ):
        logger.debug("create_mapping: identity over %d paths", n_source)
        return None
    logger.debug("create_mapping: %d source paths onto %d target paths, %d not found", n_source, n_target, missed.size)
    # on the CPU the Warp array takes over the NumPy buffer (it keeps a reference), elsewhere it is copied
    return wp.array(mapping, dtype=wp.int32, device=device, copy=False)
