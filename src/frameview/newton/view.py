# SPDX-License-Identifier: Apache-2.0
"""NewtonFrameView: camera and sensor frames that ride on Newton bodies, posed from the simulation state on the GPU.

Reads compose each frame's constant offset (from the stage, see :mod:`frameview.newton.frames`) with its body's
pose in ``state.body_q``, in one Warp launch over the rows read (the kernels: :mod:`frameview.newton.kernels`).
Writes change the frames' offsets only: no body moves, nothing is written to USD (:mod:`frameview.newton.
write_kernels`).
"""

from __future__ import annotations

import contextlib
import gc
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import warp as wp

try:
    import newton
    from pxr import Usd, UsdGeom
except ImportError as exc:  # newton and usd-core are the optional extra frameview[newton]
    raise ImportError(
        f"NewtonFrameView needs newton and pxr ({exc.name} is missing): install frameview[newton] "
        "(newton, newton-usd-schemas) and frameview[usd] (usd-core), or run inside Kit for pxr",
        name=exc.name,
    ) from exc

from .._core.launch import OffsetKeys, address
from .._core.launch_caches import LaunchCache
from .._core.quat_order import check_quat_order, wxyz_outputs
from .._core.rows import ALL, INDEXED, MASK, Rows
from ..base import BaseFrameView
from ..kernels.requests import WriteRequests
from .engine import NewtonEngine
from .frames import FrameStore, frame_store
from .kernels import NO_OFFSET, read_local_poses_all, read_poses
from .mirror import MirrorRows
from .scale_kernels import read_scales
from .write_kernels import commit_writes, solve_writes, stage_rows

__all__ = ["NewtonFrameView"]

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def _collection_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for a view build: it makes a few small containers per env and frees
    them at its end, and each collection the build's allocations trigger walks the young objects of the process (an
    Isaac Lab process holds over a million). Nothing is collected meanwhile that the build does not free itself."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class NewtonFrameView(BaseFrameView):
    """Frames (cameras, sensors, Xforms) that ride on Newton bodies: world poses from the simulation state.

    Each viewed prim is a *frame*: a non-physics prim that binds to its nearest ancestor that is a body of the Newton
    model (a prim with ``UsdPhysics.RigidBodyAPI``, found in ``model.body_label`` by its prim path), or, without
    one, is fixed in the world. Its pose relative to that body is read from the stage once (``UsdGeom.XformCache``,
    the stage's default time code); after that the stage is not read again, and never written.

    - **Reads.** World pose = ``body_q[body] * offset``, composed in one Warp launch over the rows read (all,
      ``indices`` or ``mask``), from the state the view is given, read at each call: no host round trip, so the read
      can be captured in a CUDA graph (a graph keeps the ``body_q`` array the state held when it was captured:
      capture the read with the simulation step so that the solver's state swaps are captured too). On CUDA the view
      replays a call that repeats (same rows, same state) as a CUDA graph of its own, captured for the address of
      that state's ``body_q``: after a swap it replays the other state's graph, never a stale one. Local poses are
      relative to the frame's USD parent, as on every other backend. Isaac Lab's Newton view calls the pose relative
      to the *body* "local"; here that is the world pose expressed in the body frame.
    - **Writes** change frame offsets only, never a body, never USD: a world write solves the offset that puts the
      frame at the given world pose on its body's current pose (``offset = inv(body_q[body]) * pose``), keeping the
      frame's local scale; ``None`` keeps a component; viewed or not, frames below a written frame on the same body
      follow it. Write body poses through Newton (``state.body_q``, ``state.body_qd``).
    - **Scales.** ``body_q`` carries no scale: each frame keeps the scales the stage gives it (its own local scale,
      its ancestors', its body prim's), constant while bodies move.
      :meth:`~frameview.BaseFrameView.get_world_scales` reports them, :meth:`~frameview.BaseFrameView.set_local_scales`
      changes a frame's local scale (frames below it follow).
    - **Sharing.** Every view of the same model and stage shares the frames' offsets (one store per model), so a
      write through one view is seen by every other, as with Fabric. The store's arrays are replaced when a new view
      adds frames beyond their capacity: build the views before capturing graphs that use them.

    - **Cloned envs.** When the model replicates one env (bodies labelled ``/World/envs/env_i/...``) and the stage
      holds env_0's prims alone (Isaac Lab kit-less), the pattern also finds the frames of the other envs, in env
      order after the stage's own: each rides on its own env's body with env_0's offset (see
      :doc:`newton`). :attr:`~frameview.BaseFrameView.prim_paths` names them; they have no prim of their own.

    Physics prims (bodies, colliders, joints) are rejected with ``ValueError`` naming the prim: this view reads frames
    that ride on bodies, it does not move bodies. A view is meant for one thread (the one that steps the
    simulation); calls from other threads are serialised on one lock per model and get their own output buffers.

    Example:
        >>> import newton  # doctest: +SKIP
        >>> builder = newton.ModelBuilder()
        >>> builder.add_usd(stage)  # bodies from UsdPhysics.RigidBodyAPI prims, labelled by prim path
        >>> model = builder.finalize(device="cuda:0")
        >>> sim = {"state": model.state()}  # the solver swaps states: hand the view a callable
        >>> view = fv.NewtonFrameView("/World/envs/env_.*/Robot/Camera", stage=stage, model=model,
        ...                           state=lambda: sim["state"])
        >>> pos, quat = view.get_world_poses()  # (N,) vec3f, (N,) quatf xyzw, world frame, from body_q

    Args:
        prim_path: A path, a path with a regular expression per component (``/World/envs/env_.*/Camera``), or a
            list of paths (:func:`frameview.resolve_prim_paths`).
        stage: The pxr stage the model was built from.
        model: The ``newton.Model`` (bodies are matched by ``model.body_label``), or a callable returning it (a
            view made from a callable raises :class:`~frameview.StaleViewError` once it returns another).
        state: The ``newton.State`` to read body poses from, or a callable taking no arguments that returns the
            current one (solvers swap states every step: the view never keeps a ``body_q`` array).
        device: Warp device of the returned arrays: the model's device (``None``, the default, picks it).
        forward: A callable run before each world read (forward kinematics after a reset wrote joint
            coordinates); ``None``: Isaac Lab's ``NewtonManager.forward`` when the handles are Isaac Lab's, else
            nothing (:doc:`newton`).
        quat_order: ``"xyzw"`` (the default) or ``"wxyz"``: the order of every orientation the view takes and returns
            (see :class:`~frameview.BaseFrameView`).
    """

    _device_rows = True

    def __init__(
        self,
        prim_path: str | Sequence[str],
        *,
        stage: Usd.Stage,
        model: newton.Model | Callable[[], newton.Model],
        state: newton.State | Callable[[], newton.State],
        device: str | None = None,
        forward: Callable[[], Any] | None = None,
        quat_order: str = "xyzw",
    ) -> None:
        if not isinstance(stage, Usd.Stage):
            raise TypeError(f"stage: expected a pxr Usd.Stage, got {type(stage).__name__}")
        check_quat_order(quat_order)  # before the frame store grows
        engine = NewtonEngine(f"NewtonFrameView({prim_path!r})", model, state, None, forward)
        model = engine.model
        model_device = str(wp.get_device(model.device))
        if device is None:
            device = model_device
        elif str(wp.get_device(device)) != model_device:
            raise ValueError(
                f"device: the Newton model lives on {model_device!r}, the view asks for {device!r}; pass "
                f"device={model_device!r} (or None)"
            )
        store = frame_store(model, stage)
        self._lock = store.lock  # BaseFrameView runs every public call under it: one lock per model and stage
        with store.lock, _collection_paused():
            listing = store.listing()  # the stage's prims, listed once while the stage does not change
            paths = store.resolve(prim_path, listing)  # the stage's prims, and the cloned envs' in Newton only
            nodes = store.add(paths, listing)
        super().__init__(prim_path, paths, device=device, quat_order=quat_order)
        self._store: FrameStore = store
        self._engine = engine
        engine.name(repr(self))
        self._model = model
        self._nodes = nodes
        """(N,) int32 host copy of :attr:`_view_node`: each viewed frame's node in the store."""
        self._bodies = store.body_of(nodes)
        self._needs_bodies = bool((self._bodies >= 0).any())
        dev = self._device
        self._view_node = wp.array(nodes, dtype=wp.int32, device=dev)
        self._requests = WriteRequests(dev)
        self._no_index = wp.empty(0, dtype=wp.int32, device=dev)
        self._no_mask = wp.empty(0, dtype=wp.bool, device=dev)
        self._no_bodies = wp.empty(0, dtype=wp.transformf, device=dev)
        self._quat_signs = wp.empty(0, dtype=wp.float32, device=dev)  # w >= 0 (see _use_quat_signs)
        self._fill_signs: Callable[[], None] | None = None
        self._no_signs = self._quat_signs
        self._launches = LaunchCache(dev, self._errors)
        self._checked_body_q: wp.array | None = None  # the last body_q that passed _body_q's checks
        self._offset_key = OffsetKeys(NO_OFFSET)
        self._mirror = MirrorRows(self.prim_paths, dev)
        self._current_state()  # check the state now: a wrong one fails here, not at the first read
        self._body_q()

    # ---------------------------------------------------------------- properties

    @property
    def backend(self) -> str:
        """``"newton"``."""
        return "newton"

    @property
    def model(self) -> newton.Model:
        """The Newton model whose bodies the frames ride on."""
        return self._model

    @property
    def body_indices(self) -> np.ndarray:
        """(N,) int32: the Newton body each viewed frame rides on (its row of ``state.body_q``), -1 when fixed in the
        world. A copy."""
        return self._bodies.copy()

    @property
    def state(self) -> newton.State:
        """The state the next call reads (the callable's current answer)."""
        self._check_open()
        return self._current_state()

    # ---------------------------------------------------------------- fabric mirror

    def mirror_to(self, target: BaseFrameView) -> None:
        """Write the frames' world poses into another view over the same prims (e.g. a :class:`FabricFrameView`, so
        that Fabric consumers such as renderers see the simulated frames), in one read and one write.

        Call it after each step (and after writes to this view). ``target`` may list the prims in another order or
        only some of them; it keeps its own local scales (this view's
        :meth:`~frameview.BaseFrameView.set_local_scales` is not mirrored).

        Args:
            target: A view whose every prim is one of this view's.

        Raises:
            ValueError: ``target`` views a prim that this view does not.
        """
        if not isinstance(target, BaseFrameView):
            raise TypeError(f"target: expected a FrameView, got {type(target).__name__}")
        pos, quat = self._get_world_poses_xyzw(self._mirror.rows_for(target.prim_paths))
        target.set_world_poses(pos, wxyz_outputs(quat) if target.quat_order == "wxyz" else quat)

    # ---------------------------------------------------------------- plumbing

    def _use_quat_signs(self, signs: wp.array | None, fill: Callable[[], None] | None = None) -> None:
        """World orientations with the sign ``signs[row] * (body * offset)`` instead of ``w >= 0`` (the Isaac Lab
        adapter: Isaac Lab's Newton view returns the product's sign); ``None`` goes back to ``w >= 0``. A world write
        of orientations sets the written rows' signs so that they read back as written (as Isaac Lab's view does),
        in its commit launch, unless frames of the store are anchored on others (then the caller realigns them).
        ``fill`` fills ``signs`` (from the cached offsets, computed by then) before the view's next read or write."""
        self._quat_signs = signs if signs is not None else wp.empty(0, dtype=wp.float32, device=self._device)
        self._fill_signs = fill if signs is not None else None
        self._launches.clear()

    def _prepare(self) -> None:
        """What the view's first read or write needs first (:meth:`FrameStore.ensure_offsets`, the signs' ``fill``):
        construction reads the stage only and launches nothing."""
        self._store.ensure_offsets()
        fill, self._fill_signs = self._fill_signs, None
        if fill is not None:
            fill()

    def _current_state(self) -> newton.State:
        return self._engine.state()

    @property
    def forward_hook(self) -> bool:
        """Whether reads run a kinematics hook first (``forward=``, or Isaac Lab's ``NewtonManager.forward``
        recognised behind the handles; :doc:`newton`)."""
        return self._engine.has_forward

    def _body_q(self) -> wp.array:
        """The current state's ``body_q``, checked (dtype, length, device); an empty array when no frame needs it."""
        if not self._needs_bodies:
            return self._no_bodies
        self._engine.check_current()
        self._engine.fresh()  # pending forward kinematics of reset envs (Isaac Lab's NewtonManager.forward)
        body_q = self._current_state().body_q
        if body_q is self._checked_body_q:  # the same array as last call (its dtype, shape, device cannot change)
            return body_q
        if not isinstance(body_q, wp.array) or body_q.dtype != wp.transformf or body_q.ndim != 1:
            raise TypeError(
                f"state.body_q: expected a (body_count,) wp.transformf array, got {type(body_q).__name__}"
                + (f" of dtype {body_q.dtype} and shape {body_q.shape}" if isinstance(body_q, wp.array) else "")
            )
        if body_q.shape[0] != self._store.body_count:
            raise ValueError(
                f"state.body_q: expected {self._store.body_count} bodies (the model's), got {body_q.shape[0]}; pass a "
                "state of this view's model"
            )
        if body_q.device != self._device:
            raise ValueError(f"state.body_q: lives on {body_q.device}, expected the model's device {self.device}")
        self._checked_body_q = body_q
        return body_q

    def _rows_params(self, rows: Rows) -> list:
        indices = rows.indices if rows.kind == INDEXED else self._no_index
        mask = rows.mask if rows.kind == MASK else self._no_mask
        return [self._view_node, self.count, int(rows.kind), indices, mask]

    def _launch_rows_key(self, rows: Rows) -> tuple:
        """What a call's launches read of its rows, by address (see :class:`LaunchCache`): the view's own arrays
        (``view_node``, the empty placeholders, the status word) never change; the store's are replaced together, all
        at once, when a later view grows it beyond its capacity (``store.local`` names them: the replaced arrays are
        kept alive, so its address is never reused)."""
        kind = rows.kind
        where = address(rows.indices) if kind == INDEXED else address(rows.mask) if kind == MASK else None
        return (rows.count, where, self._store.local.ptr)

    # ---------------------------------------------------------------- reads

    def _read_poses(self, world: bool, rows: Rows, pos_out: wp.array, quat_out: wp.array, offset: wp.quatf) -> None:
        """One launch (on CUDA a graph replay, once the same call repeats): keyed on ``body_q``'s address, so a
        state swap never replays a graph captured with another state's poses."""
        if self._store.offsets_stale or self._fill_signs is not None:
            self._prepare()
        body_q = self._body_q() if world else self._no_bodies
        offset_key = self._offset_key(offset)
        name = ("poses", world, rows.kind, rows.checked, offset_key is None)
        key = (*self._launch_rows_key(rows), body_q.ptr, pos_out.ptr, quat_out.ptr, offset_key,
               self._quat_signs.ptr) if self._launches.keyed else None  # fmt: skip
        store = self._store
        if not world and rows.kind == ALL:  # a full local read: the lean kernel (no rows to select or check)
            self._launches.run(name, key, lambda: [(read_local_poses_all, rows.count, [
                store.local, store.offset, store.sheared, self._view_node, offset, self._quat_signs, pos_out, quat_out,
            ])])  # fmt: skip  (nothing in it can fail: no status to publish)
            return
        self._launches.run(name, key, lambda: [(read_poses, rows.count, [
            store.local, store.chain, store.anchor, store.body, store.offset, store.sheared, body_q,
            *self._rows_params(rows), int(world), offset, self._quat_signs,
            pos_out, quat_out, self._errors.status,
        ])], publish=not rows.checked)  # fmt: skip

    def _read_scales(self, world: bool, rows: Rows, scale_out: wp.array) -> None:
        body_q = self._body_q() if world else self._no_bodies
        name = ("scales", world, rows.kind, rows.checked)
        key = (*self._launch_rows_key(rows), body_q.ptr, scale_out.ptr) if self._launches.keyed else None
        store = self._store
        self._launches.run(name, key, lambda: [(read_scales, rows.count, [
            store.local, store.chain, store.anchor, store.body, body_q, *self._rows_params(rows), int(world),
            scale_out, self._errors.status,
        ])], publish=not rows.checked)  # fmt: skip

    def _read_world_poses(self, rows: Rows, pos_out: wp.array, quat_out: wp.array) -> None:
        self._read_poses(True, rows, pos_out, quat_out, NO_OFFSET)

    def _read_local_poses(self, rows: Rows, pos_out: wp.array, quat_out: wp.array) -> None:
        self._read_poses(False, rows, pos_out, quat_out, NO_OFFSET)

    def _read_world_scales(self, rows: Rows, scale_out: wp.array) -> None:
        self._read_scales(True, rows, scale_out)

    def _read_local_scales(self, rows: Rows, scale_out: wp.array) -> None:
        self._read_scales(False, rows, scale_out)

    def _read_world_poses_rotated(self, rows: Rows, pos_out: wp.array, quat_out: wp.array, offset: wp.quatf) -> None:
        """World poses with each orientation right-multiplied by ``offset`` in the same launch (camera frames)."""
        self._read_poses(True, rows, pos_out, quat_out, offset)

    # ---------------------------------------------------------------- writes

    def _write(
        self,
        rows: Rows,
        *,
        in_world: bool,
        pos: wp.array | None = None,
        quat: wp.array | None = None,
        scale: wp.array | None = None,
    ) -> None:
        """Stage the rows, solve every written frame against its parent's world matrix after the write, commit all
        rows or none and refresh the cached offsets of the frames that moved (three launches, four when a frame is
        anchored on another; no host round trip). The key holds the store's node count: a graph made before frames
        were added would neither refresh them nor know that they may be anchored."""
        store, status = self._store, self._errors.status
        if store.offsets_stale or self._fill_signs is not None:
            self._prepare()
        new_local = self._args.outputs("newton_new_local", wp.mat44d, rows.count)  # scratch, one row per request row
        body_q = self._body_q() if in_world else self._no_bodies
        name = ("write", in_world, rows.kind, pos is None, quat is None, scale is None, store.anchored)
        key = (
            *self._launch_rows_key(rows),
            store.count,
            body_q.ptr,
            address(pos),
            address(quat),
            address(scale),
            new_local.ptr,
            self._quat_signs.ptr,
        ) if self._launches.keyed else None  # fmt: skip

        def build() -> list:
            rows_params = self._rows_params(rows)
            anchored = store.anchored  # then every frame's offset is refreshed after the commit, else the commit's
            request = self._requests(in_world, pos, quat, scale)
            signs = self._quat_signs if not anchored else self._no_signs
            steps = [
                (solve_writes, rows.count, [
                    store.local, store.chain, store.anchor, store.body, store.sheared, body_q, *rows_params,
                    store.req_row, request, int(not anchored), new_local, status,
                ]),
                (commit_writes, rows.count, [
                    new_local, *rows_params, status, int(not anchored), store.chain, store.body, body_q, request,
                    store.local, store.req_row, store.offset, store.sheared, signs,
                ]),
            ]  # fmt: skip
            if anchored:  # rows read other rows' requests: staged first; frames below a written one moved with it
                steps.insert(0, (stage_rows, rows.count, [*rows_params, store.req_row, status]))
                steps.append(store.refresh_step())
            return steps

        self._launches.run(name, key, build, publish=True)

    def _write_world_poses(self, rows: Rows, pos: wp.array | None, quat: wp.array | None) -> None:
        self._write(rows, in_world=True, pos=pos, quat=quat)

    def _write_local_poses(self, rows: Rows, pos: wp.array | None, quat: wp.array | None) -> None:
        self._write(rows, in_world=False, pos=pos, quat=quat)

    def _write_local_scales(self, rows: Rows, scales: wp.array) -> None:
        self._write(rows, in_world=False, scale=scales)

    # ---------------------------------------------------------------- visibility (host path)

    def _read_visibility(self, rows: np.ndarray | None) -> np.ndarray:
        """The stage's computed visibility (Newton has none of its own)."""
        stage = self._store.stage
        paths = self.prim_paths if rows is None else [self.prim_paths[i] for i in rows.tolist()]
        invisible = UsdGeom.Tokens.invisible
        source = self._store.source_path  # a frame cloned in Newton only reads its source prim's visibility
        return np.array(
            [UsdGeom.Imageable(stage.GetPrimAtPath(source(p))).ComputeVisibility() != invisible for p in paths]
        )

    def _write_visibility(self, rows: np.ndarray | None, visible: np.ndarray) -> None:
        raise NotImplementedError(
            "NewtonFrameView does not write visibility (it never writes USD, and Newton has no visibility): set it "
            "through a UsdFrameView or FabricFrameView over the same prims"
        )

    # ---------------------------------------------------------------- lifecycle

    def _release(self) -> None:
        self._launches.clear()
        self._requests.clear()
        self._checked_body_q = None
        self._offset_key.clear()
        self._mirror.clear()
        self._engine.release()
