# SPDX-License-Identifier: Apache-2.0
"""The array arguments carry real types (unions of what the views accept), which the public signatures use; mypy
checks calls against them (tests/typecheck/public_api.py)."""

from __future__ import annotations

import typing
from collections.abc import Sequence

import numpy as np
import warp as wp

import frameview as fv


def test_aliases_are_unions_of_the_accepted_kinds() -> None:
    """ArrayLike, IndicesLike, MaskLike and BoolsLike name Warp, NumPy, torch-like and sequence inputs, not Any."""
    for alias, extra in ((fv.ArrayLike, Sequence[Sequence[float]]), (fv.IndicesLike, Sequence[int]),
                         (fv.MaskLike, Sequence[bool]), (fv.BoolsLike, Sequence[bool])):  # fmt: skip
        members = typing.get_args(alias)
        assert {wp.array, np.ndarray, fv.TensorLike, extra} <= set(members), alias
        assert typing.Any not in members


def test_public_signatures_use_them() -> None:
    """The setters' and getters' parameters resolve to the aliases (what Sphinx renders and mypy checks)."""
    hints = typing.get_type_hints(fv.BaseFrameView.set_world_poses)
    assert hints["positions"] == fv.ArrayLike | None
    assert hints["indices"] == fv.IndicesLike and hints["mask"] == fv.MaskLike
    assert typing.get_type_hints(fv.BaseFrameView.set_visibility)["visible"] == fv.BoolsLike
    assert typing.get_type_hints(fv.ArticulationView.get_dof_positions)["indices"] == fv.IndicesLike
    assert typing.get_type_hints(fv.XformSpaceWriter.set_poses)["orientations"] == fv.ArrayLike | None
