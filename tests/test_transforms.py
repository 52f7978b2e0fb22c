# SPDX-License-Identifier: Apache-2.0
"""The transform kernels against float64 NumPy and pxr Gf (both row-vector, like Fabric)."""

from __future__ import annotations

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
    SHEAR_TOLERANCE,
    WRITE_OK,
    WRITE_SHEAR,
    WRITE_SINGULAR_PARENT,
    axis_scale,
    compose_matrix,
    decompose_matrices,
    local_point,
    solve_local,
)

# ---------------------------------------------------------------- test-only kernels over the library's functions


@wp.kernel
def compose_matrices(
    # inputs
    pos: wp.array(dtype=wp.vec3f),
    quat: wp.array(dtype=wp.quatf),
    scale: wp.array(dtype=wp.vec3f),
    # outputs
    mats_out: wp.array(dtype=wp.mat44d),
):
    i = wp.tid()
    mats_out[i] = compose_matrix(wp.vec3d(pos[i]), wp.quatd(quat[i]), wp.vec3d(scale[i]))


@wp.kernel
def solve_many(
    # inputs
    local: wp.array(dtype=wp.mat44d),
    parent_world: wp.array(dtype=wp.mat44d),
    in_world: int,
    flags: wp.vec3i,
    t: wp.array(dtype=wp.vec3d),
    q: wp.array(dtype=wp.quatd),
    s: wp.array(dtype=wp.vec3d),
    # outputs
    local_out: wp.array(dtype=wp.mat44d),
    status_out: wp.array(dtype=wp.int32),
):
    i = wp.tid()
    m, status = solve_local(local[i], parent_world[i], in_world, flags[0], t[i], flags[1], q[i], flags[2], s[i])
    local_out[i] = m
    status_out[i] = status


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


# ---------------------------------------------------------------- solve_local: the write solve of every backend


def _solve(local, parents, in_world, flags, t, q, s, device):
    n = len(local)
    out = wp.empty(n, dtype=wp.mat44d, device=device)
    status = wp.empty(n, dtype=wp.int32, device=device)
    wp.launch(
        solve_many,
        dim=n,
        inputs=[
            wp.array(np.asarray(local, np.float64), dtype=wp.mat44d, device=device),
            wp.array(np.asarray(parents, np.float64), dtype=wp.mat44d, device=device),
            int(in_world),
            wp.vec3i(*flags),
            wp.array(np.asarray(t, np.float64), dtype=wp.vec3d, device=device),
            wp.array(np.asarray(q, np.float64), dtype=wp.quatd, device=device),
            wp.array(np.asarray(s, np.float64), dtype=wp.vec3d, device=device),
        ],
        outputs=[out, status],
        device=device,
    )
    return out.numpy(), status.numpy()


def _similarity_parents(rng: np.random.Generator, n: int) -> np.ndarray:
    """Parents whose upper 3x3 is a uniform scale times an orthogonal matrix: rotations, mirrors, both."""
    t, q, _s = _random_trs(rng, n)
    scale = rng.uniform(0.3, 3.0, size=n)
    mirrors = np.array([[1, 1, 1], [-1, -1, -1], [1, -1, 1], [-1, 1, 1], [1, 1, -1]], dtype=np.float64)
    signs = mirrors[rng.integers(len(mirrors), size=n)]
    return np.array([compose(t[k], q[k], scale[k] * signs[k]) for k in range(n)])


def _world_rotation_rows(world: np.ndarray) -> np.ndarray:
    """Rotation rows of a shear-free matrix, the mirror on x (the library's decomposition convention)."""
    upper = world[:3, :3]
    s = np.linalg.norm(upper, axis=1)
    if np.linalg.det(upper) < 0:
        s[0] = -s[0]
    return upper / s[:, None]


@pytest.mark.parametrize("flags", [(1, 1, 0), (0, 1, 0)], ids=["pose", "orientation"])
def test_world_orientation_is_exact_under_similarity_parents(device: str, flags) -> None:
    """Under any similarity parent (mirrors included) a world orientation write reads back exactly, the local
    scale is kept, and a world position (when given) is exact; with positions=None the local translation is kept."""
    rng = np.random.default_rng(11)
    n = 64
    parents = _similarity_parents(rng, n)
    lt, lq, ls = _random_trs(rng, n)
    ls[::3, 1] *= -1.0  # some mirrored locals too
    local = np.array([compose(lt[k], lq[k], ls[k]) for k in range(n)])
    t, q = rng.uniform(-5, 5, (n, 3)), random_quats(rng, n)
    out, status = _solve(local, parents, True, flags, t, q, np.zeros((n, 3)), device)
    assert np.all(status == int(WRITE_OK))
    for k in range(n):
        world = out[k] @ parents[k]
        np.testing.assert_allclose(_world_rotation_rows(world), quat_to_rotation(q[k]), atol=1e-9)
        np.testing.assert_allclose(np.abs(np.linalg.norm(out[k][:3, :3], axis=1)), np.abs(ls[k]), rtol=1e-9)
        if flags[0]:
            np.testing.assert_allclose(world[3, :3], t[k], atol=1e-9)
        else:
            np.testing.assert_array_equal(out[k][3, :3], local[k][3, :3])


def test_translation_only_writes_keep_the_upper_3x3_bit_for_bit(device: str) -> None:
    """A world or local translation write keeps the local 3x3 exactly (shear included) under any invertible parent,
    non-uniform or sheared ones too; the world position is exact."""
    rng = np.random.default_rng(12)
    n = 32
    parents = np.array([compose(*args) for args in zip(*_random_trs(rng, n), strict=True)])
    parents[::2, 1, 0] += 0.4  # sheared parents
    local = np.array([compose(*args) for args in zip(*_random_trs(rng, n), strict=True)])
    local[::3, 2, 1] += 0.7  # sheared locals
    t = rng.uniform(-5, 5, (n, 3))
    for in_world in (True, False):
        out, status = _solve(local, parents, in_world, (1, 0, 0), t, np.tile([0, 0, 0, 1.0], (n, 1)),
                             np.zeros((n, 3)), device)  # fmt: skip
        assert np.all(status == int(WRITE_OK))
        np.testing.assert_array_equal(out[:, :3, :3], local[:, :3, :3])
        got = np.einsum("ni,nij->nj", np.c_[out[:, 3, :3], np.ones(n)], parents)[:, :3] if in_world else out[:, 3, :3]
        np.testing.assert_allclose(got, t, atol=1e-9)


def test_world_scale_is_exact_under_similarity_parents(device: str) -> None:
    """A world scale write reads back (the mirror shown on x) and keeps the world rotation and the translation."""
    rng = np.random.default_rng(13)
    n = 48
    parents = _similarity_parents(rng, n)
    local = np.array([compose(*args) for args in zip(*_random_trs(rng, n), strict=True)])
    before = local @ parents
    s = rng.uniform(0.2, 3.0, (n, 3))
    s[:, 0] *= np.sign(np.linalg.det(before[:, :3, :3]))  # ask for the world's own mirror: no rotation change
    out, status = _solve(local, parents, True, (0, 0, 1), np.zeros((n, 3)), np.tile([0, 0, 0, 1.0], (n, 1)), s,
                         device)  # fmt: skip
    assert np.all(status == int(WRITE_OK))
    for k in range(n):
        world = out[k] @ parents[k]
        scale = np.linalg.norm(world[:3, :3], axis=1) * np.array([np.sign(np.linalg.det(world[:3, :3])), 1, 1])
        np.testing.assert_allclose(scale, s[k], rtol=1e-9)
        np.testing.assert_allclose(_world_rotation_rows(world), _world_rotation_rows(before[k]), atol=1e-9)
        np.testing.assert_array_equal(out[k][3, :3], local[k][3, :3])


@pytest.mark.parametrize("flags", [(0, 1, 0), (0, 0, 1), (1, 1, 1)], ids=["orientation", "scale", "all"])
def test_local_writes_keep_what_was_not_asked(device: str, flags) -> None:
    """Local orientation / scale writes rebuild the 3x3 from the kept and given components; the translation is kept
    unless written."""
    rng = np.random.default_rng(14)
    n = 32
    lt, lq, ls = _random_trs(rng, n)
    local = np.array([compose(lt[k], lq[k], ls[k]) for k in range(n)])
    t, q, s = _random_trs(rng, n)
    out, status = _solve(local, np.tile(np.eye(4), (n, 1, 1)), False, flags, t, q, s, device)
    assert np.all(status == int(WRITE_OK))
    for k in range(n):
        expected = compose(t[k] if flags[0] else lt[k], q[k] if flags[1] else lq[k], s[k] if flags[2] else ls[k])
        np.testing.assert_allclose(out[k], expected, atol=1e-9)


def test_rotation_writes_on_sheared_prims_and_world_writes_under_singular_parents_fail(device: str) -> None:
    """Statuses: a rotation or scale write on a sheared local matrix (cosine between rows > SHEAR_TOLERANCE) is
    WRITE_SHEAR; a world write under a parent with a zero scale is WRITE_SINGULAR_PARENT; nothing is solved."""
    local = np.eye(4)
    local[1, 0] = 10.0 * float(SHEAR_TOLERANCE) + 1e-3
    flat = np.diag([1.0, 0.0, 1.0, 1.0])
    q = np.array([[0.0, 0.0, 0.0, 1.0]])
    _out, status = _solve(local[None], np.eye(4)[None], False, (0, 1, 0), np.zeros((1, 3)), q, np.ones((1, 3)), device)
    assert status[0] == int(WRITE_SHEAR)
    _out, status = _solve(np.eye(4)[None], flat[None], True, (1, 0, 0), np.zeros((1, 3)), q, np.ones((1, 3)), device)
    assert status[0] == int(WRITE_SINGULAR_PARENT)


def test_child_world_pose_under_right_angle_parent_with_nonuniform_scale(device: str) -> None:
    """Under a 90-degree-yawed parent scaled (1, 2, 3), a child at local x=1 sits at parent-world +2 along y."""
    h = np.sqrt(0.5)
    parent = compose([10.0, 0.0, 0.0], [0.0, 0.0, h, h], [1.0, 2.0, 3.0])
    local = compose([0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0])
    world = local @ parent
    pos, quat, scale = _decompose(world[None], device)
    # local +y is scaled by 2 then yawed onto -x
    np.testing.assert_allclose(pos[0], [8.0, 0.0, 0.0], atol=1e-6)
    assert_quats_close(quat, [[0.0, 0.0, h, h]])
    np.testing.assert_allclose(scale[0], [1.0, 2.0, 3.0], atol=1e-6)


@wp.kernel
def local_points_and_scales(
    # inputs
    points: wp.array(dtype=wp.vec3d),
    mats: wp.array(dtype=wp.mat44d),
    # outputs
    local_out: wp.array(dtype=wp.vec3d),
    scale_out: wp.array(dtype=wp.vec3d),
):
    i = wp.tid()
    local_out[i] = local_point(points[i], mats[i])
    scale_out[i] = axis_scale(mats[i])


def test_local_point_inverts_affine_and_projective_matrices(device: str) -> None:
    """``local_point(p, m) @ m == p`` against NumPy's float64 inverse: affine matrices (the adjugate path: rotations,
    mirrors, non-uniform scales, shear) and matrices with a projective column (the general inverse); ``axis_scale``
    is the scale ``decompose_matrix`` reports, bit for bit."""
    rng = np.random.default_rng(21)
    n = 64
    mats = np.stack([compose(rng.uniform(-5, 5, 3), q, rng.uniform(0.2, 3.0, 3)) for q in random_quats(rng, n)])
    mats[::4, 0, 0] *= -1.0  # mirrors
    mats[1::4, 1, :3] += 0.4 * mats[1::4, 0, :3]  # shear
    mats[2::4, :3, 3] = rng.uniform(-0.1, 0.1, (len(mats[2::4]), 3))  # projective column
    mats[3::8, 3, 3] = 2.0
    points = rng.uniform(-10, 10, (n, 3))
    out = wp.zeros(n, dtype=wp.vec3d, device=device)
    scale = wp.zeros(n, dtype=wp.vec3d, device=device)
    wp.launch(local_points_and_scales, dim=n, inputs=[wp.array(points, dtype=wp.vec3d, device=device),
              wp.array(mats, dtype=wp.mat44d, device=device)], outputs=[out, scale], device=device)  # fmt: skip
    truth = np.einsum("ni,nij->nj", np.c_[points, np.ones(n)], np.linalg.inv(mats))
    truth = truth[:, :3] / truth[:, 3:]
    affine = np.all(mats[:, :, 3] == [0.0, 0.0, 0.0, 1.0], axis=1)
    assert affine.sum() >= n // 2 and (~affine).sum() >= n // 8
    np.testing.assert_allclose(out.numpy()[affine], truth[affine], rtol=1e-10, atol=1e-10)
    # projective rows: the library maps p through inverse(m) as a row-vector affine point (no division by w), as
    # before; the truth here applies the same convention
    general = np.einsum("ni,nij->nj", np.c_[points, np.ones(n)], np.linalg.inv(mats))[:, :3]
    np.testing.assert_allclose(out.numpy()[~affine], general[~affine], rtol=1e-9, atol=1e-9)
    pos = wp.zeros(n, dtype=wp.vec3f, device=device)
    quat = wp.zeros(n, dtype=wp.quatf, device=device)
    dec_scale = wp.zeros(n, dtype=wp.vec3f, device=device)
    wp.launch(decompose_matrices, dim=n, inputs=[wp.array(mats, dtype=wp.mat44d, device=device)],
              outputs=[pos, quat, dec_scale], device=device)  # fmt: skip
    np.testing.assert_array_equal(scale.numpy().astype(np.float32), dec_scale.numpy())
