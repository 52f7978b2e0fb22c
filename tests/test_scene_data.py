# SPDX-License-Identifier: Apache-2.0
"""create_mapping and SceneDataProvider, checked against list.index, float64 NumPy gathers and pxr Gf."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp
from helpers import quat_xyzw_to_rotation
from hypothesis import given, settings
from hypothesis import strategies as st
from pxr import Gf, Sdf

import frameview as fv

SENTINEL = 7.25  # prefilled into outputs: rows that must stay untouched keep it


# ---------------------------------------------------------------------------------------------------------------------
# independent references


def reference_mapping(source: list, target: list) -> list[int]:
    """The quadratic list.index definition: first occurrence wins, -1 for absent paths and None entries."""
    target = [None if t is None else str(t) for t in target]
    out = []
    for s in source:
        s = None if s is None else str(s)
        out.append(target.index(s) if s is not None and s in target else -1)
    return out


def compose_fabric(p: np.ndarray, q: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Fabric matrices (row-vector, translation in m[3, 0:3]) from position, xyzw quaternion and scale."""
    m = np.zeros((len(p), 4, 4))
    m[:, :3, :3] = s[:, :, None] * np.transpose(quat_xyzw_to_rotation(q), (0, 2, 1))
    m[:, 3, :3] = p
    m[:, 3, 3] = 1.0
    return m


def random_poses(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random float64 positions, unit xyzw quaternions and positive scales."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(-100.0, 100.0, (n, 3))
    q = rng.normal(size=(n, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    s = rng.uniform(0.2, 3.0, (n, 3))
    return p, q, s


def assert_quats_close(actual: np.ndarray, expected: np.ndarray, atol: float = 2e-6) -> None:
    """Quaternions equal up to sign (q and -q are the same rotation)."""
    sign = np.where(np.sum(actual * expected, axis=-1, keepdims=True) < 0.0, -1.0, 1.0)
    np.testing.assert_allclose(actual * sign, expected, atol=atol)


def paths(n: int, prefix: str = "/World/envs/env_") -> list[str]:
    return [f"{prefix}{i}/body" for i in range(n)]


def outputs(n: int, device: str) -> tuple[wp.array, wp.array, wp.array]:
    """Positions, orientations and scales, prefilled with SENTINEL."""
    return (
        wp.array(np.full((n, 3), SENTINEL, np.float32), dtype=wp.vec3f, device=device),
        wp.array(np.full((n, 4), SENTINEL, np.float32), dtype=wp.quatf, device=device),
        wp.array(np.full((n, 3), SENTINEL, np.float32), dtype=wp.vec3f, device=device),
    )


# ---------------------------------------------------------------------------------------------------------------------
# create_mapping


def test_mapping_matches_list_index_on_reversed_order():
    """A reversed source maps to descending target indices, as list.index says."""
    target = paths(100)
    source = target[::-1]
    mapping = fv.create_mapping(source, target)
    assert mapping.dtype == wp.int32
    assert mapping.shape == (100,)
    assert mapping.numpy().tolist() == reference_mapping(source, target)


def test_mapping_first_occurrence_wins_for_duplicate_targets():
    """A path repeated in target_paths maps to its first occurrence, like list.index."""
    target = ["/a", "/b", "/a", "/c", "/b"]
    source = ["/b", "/a", "/c", "/a"]
    assert fv.create_mapping(source, target).numpy().tolist() == [1, 0, 3, 0]


def test_mapping_missing_paths_and_none_entries_map_to_minus_one():
    """Absent paths and None entries (in either list) give -1; a None source never matches a None target."""
    target = ["/a", None, "/b"]
    source = ["/b", "/missing", None, "/a"]
    assert fv.create_mapping(source, target).numpy().tolist() == [2, -1, -1, 0]


@pytest.mark.parametrize(
    ("source", "target", "expected"),
    [
        ([], [], None),
        ([], ["/a"], []),
        (["/a"], [], [-1]),
    ],
)
def test_mapping_empty_inputs(source, target, expected):
    """Empty inputs: both empty is the (trivial) identity; otherwise a correctly sized int32 array."""
    mapping = fv.create_mapping(source, target)
    if expected is None:
        assert mapping is None
    else:
        assert mapping.dtype == wp.int32
        assert mapping.numpy().tolist() == expected


def test_mapping_identity_detection():
    """None exactly when lengths match and mapping[i] == i; duplicates or partial matches are not identity."""
    target = paths(50)
    assert fv.create_mapping(list(target), target) is None
    assert fv.create_mapping(tuple(target), [Sdf.Path(p) for p in target]) is None
    # equal lists that repeat a path are not the identity: the repeat maps to the first occurrence
    assert fv.create_mapping(["/a", "/a"], ["/a", "/a"]).numpy().tolist() == [0, 0]
    # a prefix of the target (different length) is not the identity
    assert fv.create_mapping(target[:10], target).numpy().tolist() == list(range(10))
    # a swap is not the identity
    swapped = [target[1], target[0], *target[2:]]
    assert fv.create_mapping(swapped, target).numpy().tolist()[:3] == [1, 0, 2]
    # a missing path at the end is not the identity
    assert fv.create_mapping([*target[:-1], "/nope"], target).numpy()[-1] == -1


def test_mapping_accepts_sdf_paths_lists_and_tuples():
    """Sdf.Path and str entries, in lists or tuples, mix freely and give the same mapping as plain strings."""
    target = paths(20)
    source = [*target[::3], "/missing"]
    expected = reference_mapping(source, target)
    for src in (source, tuple(source), [Sdf.Path(p) for p in source], tuple(Sdf.Path(p) for p in source)):
        for tgt in (target, tuple(target), [Sdf.Path(p) for p in target]):
            assert fv.create_mapping(src, tgt).numpy().tolist() == expected
    mixed = [Sdf.Path(source[0]), None, source[1]]
    assert fv.create_mapping(mixed, target).numpy().tolist() == [expected[0], -1, expected[1]]


@pytest.mark.parametrize(
    ("source", "target", "match"),
    [
        ("/World/a", ["/World/a"], "source_paths: expected a list or tuple"),
        (["/a"], "/a", "target_paths: expected a list or tuple"),
        (["/a", 3], ["/a"], r"source_paths\[1\]: expected str or Sdf.Path \(or None\), got int"),
        (["/a"], ["/a", b"/b"], r"target_paths\[1\]: expected str or Sdf.Path"),
        (42, ["/a"], "source_paths: expected a list or tuple"),
        (["/a", ["/b"]], ["/a"], r"source_paths\[1\]: expected str or Sdf.Path \(or None\), got list"),
        (["/a", "/b"], ["/a", 2.0], r"target_paths\[1\]: expected str or Sdf.Path \(or None\), got float"),
    ],
)
def test_mapping_rejects_non_path_inputs(source, target, match):
    """A bare string, a non-sequence or a non-path entry is a TypeError naming the argument (and index)."""
    with pytest.raises(TypeError, match=match):
        fv.create_mapping(source, target)


def test_mapping_accepts_numpy_string_arrays():
    """1-D NumPy string arrays behave like lists of str."""
    target = np.array(["/a", "/b", "/c"])
    source = np.array(["/c", "/x", "/a"])
    assert fv.create_mapping(source, target).numpy().tolist() == [2, -1, 0]


def test_mapping_with_many_sdf_sources_and_bad_entry_after_hits():
    """Sdf.Path sources resolve even when most plain-str entries hit; a bad entry is named by its own index."""
    target = paths(300)
    source = [Sdf.Path(p) if k % 2 else p for k, p in enumerate(target[::-1])]
    assert fv.create_mapping(source, target).numpy().tolist() == list(range(299, -1, -1))
    with pytest.raises(TypeError, match=r"source_paths\[250\]: expected str or Sdf.Path \(or None\), got int"):
        fv.create_mapping([*target[:250], 7, *target[251:]], target)


def test_mapping_lives_on_requested_device(device):
    """The mapping array is int32 on the requested device with the list.index values."""
    target = paths(33)
    source = [target[5], "/missing", target[0], target[5]]
    mapping = fv.create_mapping(source, target, device=device)
    assert mapping.device == wp.get_device(device)
    assert mapping.dtype == wp.int32
    assert mapping.numpy().tolist() == [5, -1, 0, 5]


@settings(max_examples=200, deadline=None)
@given(
    source=st.lists(st.one_of(st.none(), st.sampled_from(["/a", "/b", "/c", "/d", "/e"])), max_size=12),
    target=st.lists(st.one_of(st.none(), st.sampled_from(["/a", "/b", "/c", "/d"])), max_size=12),
)
def test_mapping_property_matches_list_index(source, target):
    """For arbitrary small lists with duplicates and Nones, create_mapping equals the list.index definition."""
    mapping = fv.create_mapping(source, target)
    expected = reference_mapping(source, target)
    if mapping is None:
        assert len(source) == len(target)
        assert expected == list(range(len(source)))
    else:
        assert mapping.numpy().tolist() == expected
        assert not (len(source) == len(target) and expected == list(range(len(source))))


# ---------------------------------------------------------------------------------------------------------------------
# SceneDataProvider: matrix source


def test_reference_composition_agrees_with_gf():
    """The test's own NumPy composition matches pxr Gf (scale, then rotate, then translate; row-vector)."""
    p, q, s = random_poses(5, seed=1)
    m = compose_fabric(p, q, s)
    for k in range(5):
        rot = Gf.Matrix4d().SetRotate(Gf.Quatd(q[k, 3], Gf.Vec3d(*q[k, :3])))
        gf = Gf.Matrix4d().SetScale(Gf.Vec3d(*s[k])) * rot * Gf.Matrix4d().SetTranslate(Gf.Vec3d(*p[k]))
        np.testing.assert_allclose(m[k], np.array(gf), atol=1e-12)


@pytest.mark.parametrize("layout", ["mat44d", "float64"])
def test_matrix_source_gather_matches_numpy(device, layout):
    """Mapped rows get position, xyzw quaternion and scale of source row mapping[i]; -1 rows stay untouched."""
    n = 64
    p, q, s = random_poses(n, seed=2)
    m = compose_fabric(p, q, s)
    matrices = wp.array(m, dtype=wp.mat44d if layout == "mat44d" else wp.float64, device=device)
    backend_paths = paths(n)
    provider = fv.SceneDataProvider(backend_paths, matrices)
    assert provider.device == wp.get_device(device)
    consumer = [*backend_paths[::-2], "/not/there", backend_paths[3]]
    mapping = provider.create_mapping(consumer)
    idx = np.array(reference_mapping(consumer, backend_paths))
    pos, quat, scale = outputs(len(consumer), device)
    assert provider.get_transforms(pos, quat, mapping, scales=scale) is True
    hit = idx >= 0
    np.testing.assert_allclose(pos.numpy()[hit], p[idx[hit]], rtol=1e-6, atol=1e-5)
    assert_quats_close(quat.numpy()[hit].astype(np.float64), q[idx[hit]])
    np.testing.assert_allclose(scale.numpy()[hit], s[idx[hit]], rtol=1e-6)
    for out in (pos, quat, scale):
        assert np.all(out.numpy()[~hit] == SENTINEL)


def test_matrix_decomposition_matches_gf(device):
    """Positions and quaternions from matrices agree with Gf's ExtractTranslation / ExtractRotationQuat."""
    p, q, s = random_poses(16, seed=3)
    m = compose_fabric(p, q, s)
    provider = fv.SceneDataProvider(paths(16), wp.array(m, dtype=wp.mat44d, device=device))
    pos, quat, _ = outputs(16, device)
    assert provider.get_transforms(pos, quat)
    for k in range(16):
        gf = Gf.Matrix4d(m[k].tolist())
        np.testing.assert_allclose(pos.numpy()[k], np.array(gf.ExtractTranslation()), rtol=1e-6, atol=1e-5)
        rq = gf.RemoveScaleShear().ExtractRotationQuat()
        expected = np.array([*rq.GetImaginary(), rq.GetReal()])
        assert_quats_close(quat.numpy()[k : k + 1].astype(np.float64), expected[None])


def test_reflected_matrix_recomposes(device):
    """A matrix with a negative determinant decomposes into a proper rotation and scales that recompose it."""
    p, q, s = random_poses(8, seed=4)
    s[:, 0] *= -1.0  # mirror along x
    m = compose_fabric(p, q, s)
    assert np.all(np.linalg.det(m[:, :3, :3]) < 0)
    provider = fv.SceneDataProvider(paths(8), wp.array(m, dtype=wp.mat44d, device=device))
    pos, quat, scale = outputs(8, device)
    assert provider.get_transforms(pos, quat, scales=scale)
    qn = quat.numpy().astype(np.float64)
    np.testing.assert_allclose(np.linalg.norm(qn, axis=1), 1.0, atol=1e-6)
    recomposed = compose_fabric(pos.numpy().astype(np.float64), qn, scale.numpy().astype(np.float64))
    np.testing.assert_allclose(recomposed, m, rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------------------------------------------------------------
# SceneDataProvider: pose source, callables, identity, count


@pytest.mark.parametrize("layout", ["vector", "float32"])
def test_pose_source_gather_matches_numpy(device, layout):
    """A (positions, orientations) source gathers exactly source[mapping[i]], in both array layouts."""
    n = 40
    rng = np.random.default_rng(5)
    p = rng.normal(size=(n, 3)).astype(np.float32)
    q = rng.normal(size=(n, 4)).astype(np.float32)
    if layout == "vector":
        source = (wp.array(p, dtype=wp.vec3f, device=device), wp.array(q, dtype=wp.quatf, device=device))
    else:
        source = (wp.array(p, dtype=wp.float32, device=device), wp.array(q, dtype=wp.float32, device=device))
    backend_paths = paths(n)
    provider = fv.SceneDataProvider(backend_paths, source)
    consumer = [backend_paths[i] for i in rng.permutation(n)[:25]] + [None, "/gone"]
    mapping = provider.create_mapping(consumer)
    idx = np.array(reference_mapping(consumer, backend_paths))
    m = len(consumer)
    pos = wp.array(np.full((m, 3), SENTINEL, np.float32), dtype=wp.float32, device=device)  # (M, 3) float32 form
    quat = wp.array(np.full((m, 4), SENTINEL, np.float32), dtype=wp.float32, device=device)
    assert provider.get_transforms(pos, quat, mapping)
    expected_p = np.full((m, 3), SENTINEL, np.float32)
    expected_q = np.full((m, 4), SENTINEL, np.float32)
    expected_p[idx >= 0] = p[idx[idx >= 0]]
    expected_q[idx >= 0] = q[idx[idx >= 0]]
    np.testing.assert_array_equal(pos.numpy(), expected_p)
    np.testing.assert_array_equal(quat.numpy(), expected_q)


def test_identity_mapping_is_none_and_gathers_in_order(device):
    """The backend's own order gives mapping None, and get_transforms without a mapping copies row i to row i."""
    n = 10
    p, q, s = random_poses(n, seed=6)
    provider = fv.SceneDataProvider(paths(n), wp.array(compose_fabric(p, q, s), dtype=wp.mat44d, device=device))
    assert provider.create_mapping(paths(n)) is None
    pos, quat, _ = outputs(n, device)
    assert provider.get_transforms(pos, quat, provider.create_mapping(paths(n)))
    np.testing.assert_allclose(pos.numpy(), p, rtol=1e-6, atol=1e-5)
    assert_quats_close(quat.numpy().astype(np.float64), q)


def test_callable_source_is_read_each_call(device):
    """A callable source is called per read; returning None writes nothing and returns False."""
    n = 6
    state = {"value": None}
    provider = fv.SceneDataProvider(paths(n), lambda: state["value"], device=device)
    pos, quat, _ = outputs(n, device)
    assert provider.get_transforms(pos, quat) is False
    assert np.all(pos.numpy() == SENTINEL)
    for step in range(2):
        p = np.full((n, 3), float(step), np.float32)
        q = np.tile(np.array([0, 0, 0, 1], np.float32), (n, 1))
        state["value"] = (wp.array(p, dtype=wp.vec3f, device=device), wp.array(q, dtype=wp.quatf, device=device))
        assert provider.get_transforms(pos, quat) is True
        np.testing.assert_array_equal(pos.numpy(), p)
    state["value"] = wp.zeros(n + 1, dtype=wp.mat44d, device=device)
    with pytest.raises(ValueError, match=rf"expected {n} rows \(one per path\), got {n + 1}"):
        provider.get_transforms(pos, quat)


def test_all_unmapped_rows_write_nothing(device):
    """A mapping of only -1 (no consumer path known to the backend) leaves the outputs untouched, returns False."""
    provider = fv.SceneDataProvider(paths(4), wp.zeros(4, dtype=wp.mat44d, device=device))
    mapping = provider.create_mapping(["/x", None, "/y"])
    assert mapping.numpy().tolist() == [-1, -1, -1]
    pos, quat, scale = outputs(3, device)
    assert provider.get_transforms(pos, quat, mapping, scales=scale) is False
    for out in (pos, quat, scale):
        assert np.all(out.numpy() == SENTINEL)


def test_count_limits_rows_and_none_outputs_are_skipped(device):
    """count=k writes only rows < k; an output passed as None is skipped; zero rows return False."""
    n = 8
    p, q, s = random_poses(n, seed=7)
    provider = fv.SceneDataProvider(paths(n), wp.array(compose_fabric(p, q, s), dtype=wp.mat44d, device=device))
    mapping = provider.create_mapping(paths(n)[::-1])
    pos, _, scale = outputs(n + 4, device)  # longer than needed: allowed with count
    assert provider.get_transforms(pos, None, mapping, scales=scale, count=5) is True
    idx = np.arange(n)[::-1][:5]
    np.testing.assert_allclose(pos.numpy()[:5], p[idx], rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(scale.numpy()[:5], s[idx], rtol=1e-6)
    assert np.all(pos.numpy()[5:] == SENTINEL)
    assert provider.get_transforms(pos, None, mapping, count=0) is False
    assert provider.get_transforms(None, None, mapping) is False


def test_empty_provider():
    """A provider over zero paths maps anything to -1 and writes nothing."""
    provider = fv.SceneDataProvider([], wp.zeros(0, dtype=wp.mat44d))
    assert provider.count == 0
    assert provider.create_mapping([]) is None
    pos, quat, _ = outputs(0, "cpu")
    assert provider.get_transforms(pos, quat) is False
    mapping = provider.create_mapping(["/a"])
    pos, quat, _ = outputs(1, "cpu")
    assert provider.get_transforms(pos, quat, mapping) is False


# ---------------------------------------------------------------------------------------------------------------------
# SceneDataProvider: errors


@pytest.fixture
def provider_cpu() -> fv.SceneDataProvider:
    p, q, s = random_poses(4, seed=8)
    return fv.SceneDataProvider(paths(4), wp.array(compose_fabric(p, q, s), dtype=wp.mat44d))


@pytest.mark.parametrize(
    ("positions", "orientations", "error", "match"),
    [
        (wp.zeros(4, dtype=wp.vec3d), None, TypeError, r"positions: expected dtype wp.vec3f \(N,\) or float32"),
        (wp.zeros((4, 3), dtype=wp.float64), None, TypeError, "positions: expected dtype wp.vec3f"),
        (None, wp.zeros(4, dtype=wp.vec4f), TypeError, r"orientations: expected dtype wp.quatf \(N,\) or float32"),
        (None, wp.zeros(4, dtype=wp.quatd), TypeError, "orientations: expected dtype wp.quatf"),
        (np.zeros((4, 3), np.float32), None, TypeError, "positions: expected a Warp array"),
        (wp.zeros((4, 4), dtype=wp.float32), None, ValueError, r"positions: expected shape \(N, 3\)"),
        (None, wp.zeros((4, 3), dtype=wp.float32), ValueError, r"orientations: expected shape \(N, 4\)"),
        (wp.zeros(3, dtype=wp.vec3f), None, ValueError, r"positions: expected 4 rows .*got 3"),
        (None, wp.zeros(5, dtype=wp.quatf), ValueError, r"orientations: expected 4 rows .*got 5"),
    ],
)
def test_output_validation(provider_cpu, positions, orientations, error, match):
    """Wrong dtype is a TypeError naming the argument and the expected dtype; wrong shape/length a ValueError."""
    with pytest.raises(error, match=match):
        provider_cpu.get_transforms(positions, orientations)


def test_scales_from_pose_source_is_rejected():
    """Asking a position/orientation source for scales is a ValueError (it has none)."""
    provider = fv.SceneDataProvider(paths(2), (wp.zeros(2, dtype=wp.vec3f), wp.zeros(2, dtype=wp.quatf)))
    with pytest.raises(ValueError, match="no scale"):
        provider.get_transforms(None, None, scales=wp.zeros(2, dtype=wp.vec3f))


def test_mapping_validation(provider_cpu):
    """A mapping of the wrong type/dtype is a TypeError, of the wrong rank a ValueError; bad counts too."""
    pos = wp.zeros(3, dtype=wp.vec3f)
    with pytest.raises(TypeError, match="mapping: expected dtype int32, got int64"):
        provider_cpu.get_transforms(pos, None, wp.zeros(3, dtype=wp.int64))
    with pytest.raises(TypeError, match="mapping: expected a Warp int32 array"):
        provider_cpu.get_transforms(pos, None, np.zeros(3, np.int32))
    with pytest.raises(ValueError, match=r"mapping: expected shape \(M,\)"):
        provider_cpu.get_transforms(pos, None, wp.zeros((3, 1), dtype=wp.int32))
    mapping = wp.array([0, 1, 2], dtype=wp.int32)
    with pytest.raises(ValueError, match=r"count: expected 0 <= count <= 3"):
        provider_cpu.get_transforms(pos, None, mapping, count=4)
    with pytest.raises(TypeError, match="count: expected an int"):
        provider_cpu.get_transforms(pos, None, mapping, count=2.0)
    with pytest.raises(ValueError, match=r"positions: expected at least count=3 rows, got 2"):
        provider_cpu.get_transforms(wp.zeros(2, dtype=wp.vec3f), None, wp.array([0, 1, 2, 3], dtype=wp.int32), count=3)


@pytest.mark.parametrize("bad", [4, 100, -2])
def test_out_of_range_mapping_raises_index_error(device, bad):
    """A mapping value outside [-1, N) is an IndexError naming the row; it is never read, valid rows are written."""
    n = 4
    p, q, s = random_poses(n, seed=9)
    provider = fv.SceneDataProvider(paths(n), wp.array(compose_fabric(p, q, s), dtype=wp.mat44d, device=device))
    mapping = wp.array([2, bad, -1], dtype=wp.int32, device=device)
    pos, quat, _ = outputs(3, device)
    with pytest.raises(IndexError, match=rf"mapping\[1\] = {bad} is out of range for a source of 4 transforms"):
        provider.get_transforms(pos, quat, mapping)
    np.testing.assert_allclose(pos.numpy()[0], p[2], rtol=1e-6, atol=1e-5)
    assert np.all(pos.numpy()[1:] == SENTINEL)


def test_constructor_validation():
    """Bad sources, counts, paths or a callable without a device are clear errors at construction."""
    with pytest.raises(ValueError, match=r"expected 3 rows \(one per path\), got 2"):
        fv.SceneDataProvider(paths(3), wp.zeros(2, dtype=wp.mat44d))
    with pytest.raises(TypeError, match=r"transforms: expected wp.mat44d \(N,\) or float64 \(N, 4, 4\)"):
        fv.SceneDataProvider(paths(2), wp.zeros((2, 4, 4), dtype=wp.float32))
    with pytest.raises(ValueError, match=r"transforms: expected shape \(N,\) of wp.mat44d or \(N, 4, 4\) float64"):
        fv.SceneDataProvider(paths(2), wp.zeros((2, 16), dtype=wp.float64))
    with pytest.raises(ValueError, match="expected as many orientations as positions"):
        fv.SceneDataProvider(paths(2), (wp.zeros(2, dtype=wp.vec3f), wp.zeros(3, dtype=wp.quatf)))
    with pytest.raises(TypeError, match="transforms: expected a Warp array of matrices"):
        fv.SceneDataProvider(paths(2), np.zeros((2, 4, 4)))
    with pytest.raises(ValueError, match="device: required when transforms is a callable"):
        fv.SceneDataProvider(paths(2), lambda: None)
    with pytest.raises(TypeError, match=r"paths\[1\]: expected str or Sdf.Path, got NoneType"):
        fv.SceneDataProvider(["/a", None], wp.zeros(2, dtype=wp.mat44d))
    provider = fv.SceneDataProvider(["/a", "/b"], wp.zeros(2, dtype=wp.mat44d))
    with pytest.raises(TypeError, match=r"paths\[2\]: expected str or Sdf.Path \(or None\), got int"):
        provider.create_mapping(["/b", "/a", 3])
    with pytest.raises(TypeError, match="paths: expected a list or tuple"):
        provider.create_mapping("/a")


@pytest.mark.skipif(wp.get_cuda_device_count() == 0, reason="needs a CUDA device to put arrays on two devices")
def test_device_mismatch_is_value_error():
    """Outputs or a mapping on another device than the provider's are a ValueError naming the argument."""
    provider = fv.SceneDataProvider(paths(2), wp.zeros(2, dtype=wp.mat44d, device="cuda:0"))
    with pytest.raises(ValueError, match="positions: expected an array on cuda:0"):
        provider.get_transforms(wp.zeros(2, dtype=wp.vec3f, device="cpu"), None)
    with pytest.raises(ValueError, match="mapping: expected an array on cuda:0"):
        provider.get_transforms(None, None, wp.zeros(2, dtype=wp.int32, device="cpu"))


# ---------------------------------------------------------------------------------------------------------------------
# SceneDataProvider: the inputs users pass (torch tensors, column slices, ProxyArray-likes)


class _Proxy:
    """What Isaac Lab 3's ``ProxyArray`` offers: the same memory as ``.warp`` (and ``.torch``)."""

    def __init__(self, array: wp.array) -> None:
        self.warp = array


@pytest.mark.parametrize("kind", ["torch", "torch_slices", "proxy"])
def test_torch_and_proxy_inputs_gather_what_numpy_says(device, kind):
    """Sources, outputs and the mapping as torch tensors (outputs as column slices of one (M, 13) state tensor,
    written in place) or ProxyArray-likes: rows source[mapping[i]] (NumPy), the other columns untouched."""
    torch = pytest.importorskip("torch")
    tdev = "cpu" if device == "cpu" else "cuda:0"
    n = 30
    rng = np.random.default_rng(8)
    p = rng.normal(size=(n, 3)).astype(np.float32)
    q = rng.normal(size=(n, 4)).astype(np.float32)
    m = compose_fabric(*random_poses(n, 9))
    backend_paths = paths(n)
    consumer = [backend_paths[i] for i in rng.permutation(n)[:20]] + [None]
    idx = np.array(reference_mapping(consumer, backend_paths))
    rows = len(consumer)
    if kind == "proxy":
        pw, qw = wp.array(p, dtype=wp.vec3f, device=device), wp.array(q, dtype=wp.quatf, device=device)
        sources = [(_Proxy(pw), _Proxy(qw))]
    else:
        sources = [(torch.tensor(p, device=tdev), torch.tensor(q, device=tdev)), torch.tensor(m, device=tdev)]
    for source in sources:
        provider = fv.SceneDataProvider(backend_paths, source)
        assert provider.device == wp.get_device(device)
        mapping = provider.create_mapping(consumer)
        state = torch.full((rows, 13), SENTINEL, device=tdev)
        if kind == "torch_slices":
            pos, quat = state[:, 0:3], state[:, 3:7]
        elif kind == "torch":
            pos, quat = torch.full((rows, 3), SENTINEL, device=tdev), torch.full((rows, 4), SENTINEL, device=tdev)
        else:
            pos = _Proxy(wp.array(np.full((rows, 3), SENTINEL, np.float32), dtype=wp.vec3f, device=device))
            quat = _Proxy(wp.array(np.full((rows, 4), SENTINEL, np.float32), dtype=wp.quatf, device=device))
        passed_mapping = _Proxy(mapping) if kind == "proxy" else wp.to_torch(mapping)
        assert provider.get_transforms(pos, quat, passed_mapping)
        got_p = pos.warp.numpy() if kind == "proxy" else pos.cpu().numpy()
        got_q = quat.warp.numpy() if kind == "proxy" else quat.cpu().numpy()
        hit = idx >= 0
        if isinstance(source, tuple):
            np.testing.assert_array_equal(got_p[hit], p[idx[hit]])
            np.testing.assert_array_equal(got_q[hit], q[idx[hit]])
        else:
            np.testing.assert_allclose(got_p[hit], m[idx[hit], 3, :3], rtol=1e-6, atol=1e-4)
        np.testing.assert_array_equal(got_p[~hit], SENTINEL)
        if kind == "torch_slices":
            np.testing.assert_array_equal(state[:, 7:].cpu().numpy(), SENTINEL)  # the other columns untouched


def test_torch_inputs_of_the_wrong_kind_are_named(device):
    """A float64 or (M, 4) torch output, an int64 torch mapping: TypeError / ValueError naming the argument."""
    torch = pytest.importorskip("torch")
    tdev = "cpu" if device == "cpu" else "cuda:0"
    provider = fv.SceneDataProvider(paths(3), (torch.zeros((3, 3), device=tdev), torch.zeros((3, 4), device=tdev)))
    good_q = torch.zeros((3, 4), device=tdev)
    with pytest.raises(TypeError, match="positions: expected a float32 \\(N, 3\\) torch tensor"):
        provider.get_transforms(torch.zeros((3, 3), dtype=torch.float64, device=tdev), good_q)
    with pytest.raises(TypeError, match="positions: expected a float32 \\(N, 3\\) torch tensor"):
        provider.get_transforms(torch.zeros((3, 4), device=tdev), good_q)
    with pytest.raises(TypeError, match="mapping: expected dtype int32"):
        provider.get_transforms(torch.zeros((3, 3), device=tdev), good_q, torch.arange(3, device=tdev))
