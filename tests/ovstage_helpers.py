# SPDX-License-Identifier: Apache-2.0
"""Helpers for the ovstage tests: pxr stages copied into ovstage, and raw ovstage reads that bypass frameview.

Everything here talks to ovstage directly (never through the ovstage provider), so tests can check the
provider against what Fabric really holds.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

try:
    import ovstage
    from ovstage import Filter, FilterOp, OrdinalRange, PathDictionary, Predicate
    from ovstage import population as ovstage_population

    OVSTAGE_SKIP_REASON = ""
except ImportError as exc:  # no ovstage wheel for this platform / Python
    ovstage = None
    OVSTAGE_SKIP_REASON = f"ovstage is not importable ({exc}); install it with: pip install 'frameview[ovstage]'"
else:
    try:  # the wheel imports, but its native runtime may not load (e.g. libGL.so.1 missing on a bare GPU host)
        ovstage.Stage("frameview_probe")
    except RuntimeError as exc:
        ovstage = None
        OVSTAGE_SKIP_REASON = f"ovstage's native runtime does not load on this machine: {exc}"

WORLD_MATRIX = "omni:fabric:worldMatrix"
LOCAL_MATRIX = "omni:fabric:localMatrix"

requires_ovstage = pytest.mark.skipif(ovstage is None, reason=OVSTAGE_SKIP_REASON or "ovstage is importable")

_NAMES = itertools.count()
_COPIES: dict[int, Any] = {}


def ovstage_from_pxr(stage: Any, name: str | None = None) -> Any:
    """A new ``ovstage.Stage`` populated from a pxr stage (root layer exported to a USDA string), at ordinal 1."""
    ovs = ovstage.Stage(name or f"test_{next(_NAMES)}")
    ovstage_population.open_usd_from_string(ovs, stage.GetRootLayer().ExportToString(), ordinal=1)
    return ovs


def ovstage_for(stage: Any) -> Any:
    """The ovstage copy of a pxr stage, made once per pxr stage and destroyed with it (contract-suite factory)."""
    key = id(stage)
    entry = _COPIES.get(key)
    if entry is not None and entry[0]() is stage:
        return entry[1]
    ovs = ovstage_from_pxr(stage)
    _COPIES[key] = (weakref.ref(stage), ovs)
    weakref.finalize(stage, _COPIES.pop, key, None)
    return ovs


def _data(g: Any) -> np.ndarray:
    """A raw read group's column, one row per data row: ovstage 0.2 reports a matrix as 16 float64 lanes, which
    ``g.array(0)`` flattens (ovstage 0.3: a (rows, 4, 4) tensor)."""
    lanes = int(g.tensor(0).dtype.lanes)
    return g.array(0).reshape(-1, 4, 4) if lanes == 16 else g.array(0)


def _latest() -> Any:
    return OrdinalRange.latest((1 << 64) - 1)


def read_rows(ovs: Any, paths: Sequence[str], attr: str) -> dict[str, np.ndarray]:
    """``{path: value}`` of ``attr`` for the given prims that carry it (raw path-list query read)."""
    pd = PathDictionary(ovs)
    out: dict[str, np.ndarray] = {}
    with pd.create_path_list_from_strings(list(paths)) as plist, ovs.query_from_path_list(plist) as query:
        query.wait()
        with ovs.read_attributes(query, [pd.intern_token(attr)], _latest()) as read:
            read.wait()
            for g in read.groups():
                with g:
                    listed = pd.get_path_strings(g.prim_list)
                    data = _data(g)
                    for i in range(g.prim_count):
                        out[listed[g.prim_index(i)]] = np.array(data[g.data_row_index(i)])
    return out


def read_matrices(ovs: Any, paths: Sequence[str], attr: str = WORLD_MATRIX) -> np.ndarray:
    """(N, 4, 4) float64 matrices of ``attr`` for ``paths`` as Fabric holds them (KeyError for a prim without it)."""
    rows = read_rows(ovs, paths, attr)
    return np.array([rows[p] for p in paths], dtype=np.float64).reshape(-1, 4, 4)


def count_with(ovs: Any, attr: str) -> int:
    """How many prims of the stage carry ``attr`` (a HAS query)."""
    with ovs.query(Filter([Predicate(attr, FilterOp.HAS)])) as query:
        query.wait()  # ovstage 0.2: wait() returns None (0.3: the query)
        return int(query.result().total_prim_count)


def has_groups(ovs: Any, attrs: Sequence[str]) -> list[tuple[str, list[str], np.ndarray]]:
    """One read of ``attrs`` over a HAS query on ``attrs[0]``: ``(attribute, row paths, values)`` per group."""
    pd = PathDictionary(ovs)
    out = []
    with ovs.query(Filter([Predicate(attrs[0], FilterOp.HAS)])) as query:
        query.wait()
        with ovs.read_attributes(query, [pd.intern_token(a) for a in attrs], _latest()) as read:
            read.wait()
            for g in read.groups():
                with g:
                    listed = pd.get_path_strings(g.prim_list)
                    data = _data(g)
                    paths = [listed[g.prim_index(i)] for i in range(g.prim_count)]
                    values = np.array([data[g.data_row_index(i)] for i in range(g.prim_count)])
                    out.append((pd.token_to_string(g.attribute), paths, values))
    return out


def delete_prims(ovs: Any, paths: Sequence[str], ordinal: int) -> None:
    """Delete whole prims (an empty attribute list deletes the prims) and seal."""
    pd = PathDictionary(ovs)
    with pd.create_path_list_from_strings(list(paths)) as plist, ovs.query_from_path_list(plist) as query:
        ovs.delete_attributes(query, [], ordinal).wait()
    ovs.advance_write_floor(ordinal).wait()


def child_paths(ovs: Any, path: str) -> tuple[str, ...]:
    """Children of ``path`` as ovstage's hierarchy reports them."""
    pd = PathDictionary(ovs)
    with pd.create_path_list_from_strings([path]) as plist:
        return ovs.get_hierarchy(plist, 0, ovstage.HierarchyRelation.CHILDREN).items[0].paths


def write_local_matrices(ovs: Any, paths: Sequence[str], mats: np.ndarray, ordinal: int) -> None:
    """A foreign write (a simulator's sync step): local matrices of ``paths``, world matrices re-derived, sealed."""
    pd = PathDictionary(ovs)
    with pd.create_path_list_from_strings(list(paths)) as plist, ovs.query_from_path_list(plist) as query:
        mats = np.ascontiguousarray(mats, dtype=np.float64).reshape(len(paths), 4, 4)
        ovs.write_attribute(
            query, LOCAL_MATRIX, ordinal, mats, is_array=False, semantic=ovstage.AttributeSemantic.MATRIX
        ).wait()
    ovs.compute_hierarchy(ordinal, ordinal)
    tokens = [pd.intern_token(LOCAL_MATRIX), pd.intern_token(WORLD_MATRIX)]
    ovs.advance_write_floor(ordinal, ovstage.Scope.INCLUDE, tokens).wait()


def add_float_attribute(ovs: Any, paths: Sequence[str], name: str, ordinal: int) -> None:
    """Give ``paths`` a new float attribute (they move to another bucket: the rows of a view reorder), sealed."""
    pd = PathDictionary(ovs)
    token = pd.intern_token(name)
    with pd.create_path_list_from_strings(list(paths)) as plist, ovs.query_from_path_list(plist) as query:
        ovs.write_attribute(query, token, ordinal, np.ones(len(paths), np.float32), is_array=False).wait()
    ovs.advance_write_floor(ordinal, ovstage.Scope.INCLUDE, [token]).wait()
