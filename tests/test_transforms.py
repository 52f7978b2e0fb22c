# SPDX-License-Identifier: Apache-2.0
"""The transform kernels against float64 NumPy and pxr Gf (both row-vector, like Fabric)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import warp as wp
from helpers import (
    assert_quats_close,
    assert_w_nonnegative,
    canonical,
    compose,
    has_shear,
    quat_to_rotation,
    random_quats,
    right_angle_quats,
)
from pxr import Gf

from frameview.kernels.transforms import (
    compose_matrices,
    decompose_matrices,
    local_to_world_matrices,
    replace_matrix_components,
    world_to_local_matrices,
)

# ---------------------------------------------------------------- kernel runners


def _decompose(mats: np.ndarray, device: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = len(mats)
    arr = wp.array(np.asarray(mats, dtype=np.float64), dtype=wp.mat44d, device=device)
    pos = wp.empty(n, dtype=wp.vec3f, device=device)
    quat = wp.empty(n, dtype=wp.quatf, device=device)
    scale = wp.empty(n, dtype=wp.vec3f, device=device)
    wp.launch(decompose_matrices, dim=n, inputs=[arr], outputs=[pos, quat, scale], device=device)
    return pos.numpy(), quat.numpy(), scale.numpy()


def _compose(t: np.ndarray, q: np.ndarray, s: np.ndarray, device: str) -> np.ndarray:
    n = len(t)
    out = wp.empty(n, dtype=wp.mat44d, device=device)
    inputs = [
        wp.array(np.asarray(t, np.float32), dtype=wp.vec3f, device=device),
        wp.array(np.asarray(q, np.float32), dtype=wp.quatf, device=device),
        wp.array(np.asarray(s, np.float32), dtype=wp.vec3f, device=device),
    ]
    wp.launch(compose_matrices, dim=n, inputs=inputs, outputs=[out], device=device)
    return out.numpy()


def _binary(kernel: wp.Kernel, a: np.ndarray, b: np.ndarray, device: str) -> np.ndarray:
    out = wp.empty(len(a), dtype=wp.mat44d, device=device)
    inputs = [wp.array(a, dtype=wp.mat44d, device=device), wp.array(b, dtype=wp.mat44d, device=device)]
    wp.launch(kernel, dim=len(a), inputs=inputs, outputs=[out], device=device)
    return out.numpy()


def _random_trs(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float32-representable translations, quaternions (either sign of w) and positive non-uniform scales."""
    t = rng.uniform(-10.0, 10.0, size=(n, 3)).astype(np.float32).astype(np.float64)
    q = random_quats(rng, n).astype(np.float32).astype(np.float64)
    s = rng.uniform(0.2, 3.0, size=(n, 3)).astype(np.float32).astype(np.float64)
    return t, q, s


# ---------------------------------------------------------------- compose / decompose


def test_compose_matches_gf(device: str) -> None:
    """compose_matrices equals Gf's scale * rotate * translate (row-vector) for random inputs."""
    t, q, s = _random_trs(np.random.default_rng(1), 64)
    expected = np.array([compose(*args) for args in zip(t, q, s, strict=True)])
    np.testing.assert_allclose(_compose(t, q, s, device), expected, atol=1e-6)


def test_compose_ninety_degrees_about_z_rotates_x_onto_y(device: str) -> None:
    """A +90 degree yaw maps the x axis onto +y (row 0 of the matrix), catching a transposed rotation."""
    h = np.sqrt(0.5)
    m = _compose(np.array([[1.0, 2.0, 3.0]]), np.array([[0.0, 0.0, h, h]]), np.ones((1, 3)), device)[0]
    expected = np.array(Gf.Matrix4d().SetRotate(Gf.Rotation(Gf.Vec3d(0, 0, 1), 90)).SetTranslateOnly((1, 2, 3)))
    np.testing.assert_allclose(m, expected, atol=1e-7)
    np.testing.assert_allclose(np.array([1.0, 0.0, 0.0, 1.0]) @ m, [1.0, 3.0, 3.0, 1.0], atol=1e-7)


def test_decompose_recovers_random_components(device: str) -> None:
    """decompose_matrices recovers translation, rotation (w >= 0) and scale of Gf-built matrices."""
    t, q, s = _random_trs(np.random.default_rng(2), 64)
    mats = np.array([compose(*args) for args in zip(t, q, s, strict=True)])
    pos, quat, scale = _decompose(mats, device)
    np.testing.assert_allclose(pos, t, atol=1e-5)
    np.testing.assert_allclose(scale, s, rtol=1e-6)
    assert_quats_close(quat, q)
    assert_w_nonnegative(quat)


def test_right_angle_rotations_round_trip(device: str) -> None:
    """All 24 right-angle rotations decompose to themselves and compose like Gf (no transposes)."""
    q = right_angle_quats()
    n = len(q)
    t = np.tile([[0.5, -1.0, 2.0]], (n, 1))
    s = np.tile([[1.0, 2.0, 3.0]], (n, 1))
    expected = np.array([compose(*args) for args in zip(t, q, s, strict=True)])
    np.testing.assert_allclose(_compose(t, q, s, device), expected, atol=1e-7)
    pos, quat, scale = _decompose(expected, device)
    assert_quats_close(quat, q)
    assert_w_nonnegative(quat)
    np.testing.assert_allclose(scale, s, rtol=1e-6)
    np.testing.assert_allclose(pos, t, atol=1e-6)


def test_identity(device: str) -> None:
    """The identity matrix decomposes to zero translation, the identity quaternion (0, 0, 0, 1) and unit scale."""
    pos, quat, scale = _decompose(np.eye(4)[None], device)
    np.testing.assert_array_equal(pos, [[0.0, 0.0, 0.0]])
    np.testing.assert_allclose(quat, [[0.0, 0.0, 0.0, 1.0]], atol=1e-7)
    np.testing.assert_allclose(scale, [[1.0, 1.0, 1.0]], atol=1e-7)
    np.testing.assert_allclose(_compose(np.zeros((1, 3)), [[0, 0, 0, 1]], np.ones((1, 3)), device)[0], np.eye(4))


def test_quaternion_sign_and_norm_do_not_matter(device: str) -> None:
    """q, -q and 3q compose to the same matrix; decomposition returns the unit quaternion with w >= 0."""
    rng = np.random.default_rng(3)
    t, q, s = _random_trs(rng, 32)
    q[:, 3] = -np.abs(q[:, 3])  # all w < 0
    a = _compose(t, q, s, device)
    np.testing.assert_allclose(_compose(t, -q, s, device), a, atol=1e-6)
    np.testing.assert_allclose(_compose(t, 3.0 * q, s, device), a, atol=1e-6)
    _, quat, _ = _decompose(a, device)
    assert_w_nonnegative(quat)
    np.testing.assert_allclose(quat, canonical(q), atol=2e-6)


def test_negative_determinant_goes_on_x_and_recomposes(device: str) -> None:
    """A mirrored matrix decomposes with a negative x scale and recomposes to the original matrix."""
    rng = np.random.default_rng(4)
    t, q, s = _random_trs(rng, 16)
    s[:8, 1] *= -1.0  # mirror on y: reported on x instead
    s[8:, 2] *= -1.0  # mirror on z
    mats = np.array([compose(*args) for args in zip(t, q, s, strict=True)])
    assert np.all(np.linalg.det(mats[:, :3, :3]) < 0)
    pos, quat, scale = _decompose(mats, device)
    assert np.all(scale[:, 0] < 0) and np.all(scale[:, 1:] > 0)
    np.testing.assert_allclose(np.abs(scale), np.abs(s), rtol=1e-6)
    assert_w_nonnegative(quat)
    np.testing.assert_allclose(_compose(pos, quat, scale, device), mats, atol=1e-5)


def test_sheared_matrix_is_not_recomposed(device: str) -> None:
    """No-shear assumption: a sheared matrix gives row-length scales and a unit quaternion, which do not recompose."""
    m = compose([1.0, 2.0, 3.0], [0.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0])
    m[1, 0] = 0.5  # y axis leans towards x
    assert has_shear(m)
    pos, quat, scale = _decompose(m[None], device)
    np.testing.assert_allclose(pos[0], [1.0, 2.0, 3.0])
    np.testing.assert_allclose(scale[0], np.linalg.norm(m[:3, :3], axis=1), rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(quat[0]), 1.0, atol=1e-6)
    assert_w_nonnegative(quat)
    assert np.abs(_compose(pos, quat, scale, device)[0] - m).max() > 1e-2


# ---------------------------------------------------------------- world <-> local


def _random_parents(rng: np.random.Generator, n: int) -> np.ndarray:
    """Rotated parents with non-uniform scales, every fourth one a right-angle rotation."""
    t, q, s = _random_trs(rng, n)
    right = right_angle_quats()
    q[::4] = right[rng.integers(len(right), size=len(q[::4]))]
    return np.array([compose(*args) for args in zip(t, q, s, strict=True)])


def test_local_to_world_is_local_times_parent(device: str) -> None:
    """local_to_world_matrices computes local @ parent_world (row-vector) under rotated, scaled parents."""
    rng = np.random.default_rng(5)
    parents = _random_parents(rng, 32)
    local = np.array([compose(*args) for args in zip(*_random_trs(rng, 32), strict=True)])
    np.testing.assert_allclose(_binary(local_to_world_matrices, local, parents, device), local @ parents, atol=1e-9)
    # the world position is the local translation carried through the parent
    world_pos = np.einsum("ni,nij->nj", np.c_[local[:, 3, :3], np.ones(32)], parents)[:, :3]
    np.testing.assert_allclose((local @ parents)[:, 3, :3], world_pos, atol=1e-9)


def test_world_local_round_trip(device: str) -> None:
    """world_to_local_matrices inverts local_to_world_matrices (float64, 1e-9)."""
    rng = np.random.default_rng(6)
    parents = _random_parents(rng, 32)
    local = np.array([compose(*args) for args in zip(*_random_trs(rng, 32), strict=True)])
    world = _binary(local_to_world_matrices, local, parents, device)
    np.testing.assert_allclose(_binary(world_to_local_matrices, world, parents, device), local, atol=1e-9)
    np.testing.assert_allclose(
        _binary(world_to_local_matrices, world, parents, device), world @ np.linalg.inv(parents), atol=1e-9
    )


def test_child_world_pose_under_right_angle_parent_with_nonuniform_scale(device: str) -> None:
    """Under a 90-degree-yawed parent scaled (1, 2, 3), a child at local x=1 sits at parent-world +2 along y."""
    h = np.sqrt(0.5)
    parent = compose([10.0, 0.0, 0.0], [0.0, 0.0, h, h], [1.0, 2.0, 3.0])
    local = compose([0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0])
    world = _binary(local_to_world_matrices, local[None], parent[None], device)[0]
    pos, quat, scale = _decompose(world[None], device)
    # local +y is scaled by 2 then yawed onto -x
    np.testing.assert_allclose(pos[0], [8.0, 0.0, 0.0], atol=1e-6)
    assert_quats_close(quat, [[0.0, 0.0, h, h]])
    np.testing.assert_allclose(scale[0], [1.0, 2.0, 3.0], atol=1e-6)


# ---------------------------------------------------------------- replace_components


@pytest.mark.parametrize(
    "flags", list(itertools.product((0, 1), repeat=3)), ids=lambda f: "tqs=" + "".join(map(str, f))
)
def test_replace_components_keeps_unflagged(device: str, flags: tuple[int, int, int]) -> None:
    """replace_matrix_components sets the flagged components and keeps the others (unflagged inputs may be empty)."""
    rng = np.random.default_rng(7)
    n = 16
    t0, q0, s0 = _random_trs(rng, n)
    t1, q1, s1 = _random_trs(rng, n)
    mats = np.array([compose(*args) for args in zip(t0, q0, s0, strict=True)])
    set_t, set_q, set_s = flags

    def arr(values: np.ndarray, flag: int, dtype: type) -> wp.array:
        if not flag:
            return wp.empty(0, dtype=dtype, device=device)
        return wp.array(values.astype(np.float32), dtype=dtype, device=device)

    out = wp.empty(n, dtype=wp.mat44d, device=device)
    wp.launch(
        replace_matrix_components,
        dim=n,
        inputs=[
            wp.array(mats, dtype=wp.mat44d, device=device),
            set_t,
            arr(t1, set_t, wp.vec3f),
            set_q,
            arr(q1, set_q, wp.quatf),
            set_s,
            arr(s1, set_s, wp.vec3f),
        ],
        outputs=[out],
        device=device,
    )
    expected = np.array(
        [compose(t1[k] if set_t else t0[k], q1[k] if set_q else q0[k], s1[k] if set_s else s0[k]) for k in range(n)]
    )
    np.testing.assert_allclose(out.numpy(), expected, atol=1e-5)
    for k in range(n):  # and the rotation really is the requested one, not its transpose
        upper = out.numpy()[k][:3, :3]
        np.testing.assert_allclose(
            upper / np.linalg.norm(upper, axis=1)[:, None], quat_to_rotation(q1[k] if set_q else q0[k]), atol=1e-5
        )
