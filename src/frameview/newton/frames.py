# SPDX-License-Identifier: Apache-2.0
"""The frames of one Newton model: where each frame prim sits on its body, shared by every view of that model.

A *frame* is a non-physics prim (a camera, a sensor, an Xform) that rides on a Newton body. Each frame is a node of
a :class:`FrameStore` (one per model and stage), holding:

- ``local[n]``: its local matrix relative to its USD parent (``mat44d``, row-vector, scale included), initially
  the stage's, changed only by view writes (on the device; USD is never written);
- ``anchor[n]``: the nearest ancestor that is also a node and rides on the same body, or -1;
- ``chain[n]``: the constant product of the local matrices of the prims between its parent and that anchor (or, with
  no anchor, up to its body, ending with the body's own USD scale; or up to the root for a frame fixed in the world);
- ``body[n]``: the Newton body it rides on (the nearest ancestor in ``model.body_label``), -1 for none;
- its *source* prim on the stage: the prim itself, or, for a frame of a cloned env that exists only in Newton (see
  *Clones* below, :mod:`.clones`), the prim it was cloned from;
- ``offset[n]``, ``sheared[n]``: derived from the above, what world reads use: the translation and rotation of its
  matrix relative to its body (float32, unit rotation), and its flags: that matrix is sheared, its USD parent is its
  body (:func:`~frameview.newton.kernels.refresh_offsets`,
  updated on the device after each change of ``local``, and for added nodes before the next launch that reads them:
  :meth:`FrameStore.ensure_offsets`).

A frame's world matrix is then ``local[n] @ chain[n] @ world(anchor)`` and, at the top of the anchor chain,
``... @ chain @ T(body_q[body])`` with ``T`` the body's rigid transform. Because every view of a model shares its
store, a write through one view is seen by every other view, and frames below a written frame follow it.

Clones: a Newton model built by replicating one env has a body per env while the stage holds one env's prims;
:mod:`.clones` says how the frames of the other envs are found and placed (:class:`~.clones.CloneTree`).

Nodes are added when views are built and never removed. ``anchor``, ``chain`` and ``body`` are computed on the host
from the stage, once per node; ``local`` and the derived ``offset`` and ``sheared`` live on the model's device.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import warp as wp
from pxr import Tf, Usd, UsdGeom, UsdPhysics

from ..paths import resolve_prim_paths
from .clones import CloneTree, StageListing, rigid_placements
from .kernels import refresh_offsets

__all__ = ["FrameStore", "frame_store", "rigid_part"]

logger = logging.getLogger(__name__)

_IDENTITY = np.eye(4)
_IDENTITY.flags.writeable = False

_STORES: weakref.WeakKeyDictionary[Any, list[FrameStore]] = weakref.WeakKeyDictionary()
_STORES_LOCK = threading.Lock()

_POSE_TOLERANCE = 1.0e-3
"""Largest difference (stage units, or rotation-matrix entries) between a body's USD pose and the model's initial
pose before the view logs a warning: the model was built with another transform, or the stage was edited since."""


def frame_store(model: Any, stage: Usd.Stage) -> FrameStore:
    """The frame store of ``model`` over ``stage`` (made on first use; lives as long as the model)."""
    with _STORES_LOCK:
        stores = _STORES.get(model)
        if stores is None:
            stores = _STORES[model] = []
        for store in stores:
            if store.stage == stage:
                return store
        store = FrameStore(model, stage)
        stores.append(store)
        return store


def rigid_part(m: np.ndarray) -> np.ndarray:
    """The rigid transform (rotation and translation, no scale) of a row-vector matrix, float64 (4, 4).

    The rotation is the orthonormal factor of the upper 3x3 (its rows' directions, a mirror put on x), so that
    ``m = S @ rigid_part(m)`` with ``S`` the scale (and shear, if any) part.
    """
    upper = np.asarray(m, dtype=np.float64)[:3, :3].copy()
    out = np.eye(4)
    out[3, :3] = np.asarray(m, dtype=np.float64)[3, :3]
    if np.abs(upper @ upper.T - np.eye(3)).max() < 1e-12 and np.linalg.det(upper) > 0.0:  # already a rotation
        out[:3, :3] = upper
        return out
    if np.linalg.det(upper) < 0.0:
        upper[0] = -upper[0]
    u, _s, vt = np.linalg.svd(upper)
    out[:3, :3] = u @ vt  # the closest rotation (polar factor): the rows' directions when there is no shear
    return out


def _physics_role(prim: Usd.Prim, is_body: bool) -> str | None:
    """What makes ``prim`` a physics prim that a frame view must not own, or None for a frame."""
    if is_body or prim.HasAPI(UsdPhysics.RigidBodyAPI):
        return "a rigid body (a physics body: UsdPhysics.RigidBodyAPI), which the Newton solver moves"
    if prim.HasAPI(UsdPhysics.CollisionAPI):
        return "a collider (a collision shape: UsdPhysics.CollisionAPI), part of a Newton body's shape"
    if prim.IsA(UsdPhysics.Joint):
        return "a joint (UsdPhysics.Joint)"
    return None


class _SourceReads:
    """What building frames reads of the stage, read once per prim path for one build (the stage does not change
    meanwhile): the frames of cloned envs share their source's prims, parents and local matrices."""

    def __init__(self, stage: Usd.Stage, cache: UsdGeom.XformCache, listing: StageListing) -> None:
        self.stage = stage
        self.cache = cache
        self._prims: dict[str, Usd.Prim] = {}
        self._local: dict[str, tuple[np.ndarray, bool]] = {}
        self._roles: dict[str, str | None] = {}
        self._xformable: dict[str, bool] = {}
        self._rigid: dict[str, bool] = {}
        self._listing = listing

    def prim(self, path: str) -> Usd.Prim:
        prim = self._prims.get(path)
        if prim is None:
            prim = self._prims[path] = self.stage.GetPrimAtPath(path)
        return prim

    def exists(self, path: str) -> bool:
        """``GetPrimAtPath(path).IsValid()``, from the parent's listed children (a path string the stage never saw
        costs a parse: the frames of cloned envs ask about thousands of such paths, below a few parents each)."""
        return self._listing.valid(path)

    def empty(self, path: str) -> bool:
        """:meth:`StageListing.empty`: no prim lies below ``path`` on the stage."""
        return self._listing.empty(path)

    def below_bare(self, path: str, root: str) -> bool:
        """:meth:`StageListing.below_bare`: ``path`` is strictly below ``root``, which has nothing below it."""
        return self._listing.below_bare(path, root)

    def local(self, path: str) -> tuple[np.ndarray, bool]:
        """The prim's local matrix (float64, row-vector) and whether it resets the xform stack."""
        local = self._local.get(path)
        if local is None:
            matrix, resets = self.cache.GetLocalTransformation(self.prim(path))
            local = self._local[path] = (np.array(matrix, dtype=np.float64), bool(resets))
        return local

    def role(self, path: str, is_body: bool) -> str | None:
        """:func:`_physics_role` of the prim at ``path``."""
        if is_body:
            return _physics_role(self.prim(path), True)
        if path not in self._roles:
            self._roles[path] = _physics_role(self.prim(path), False)
        return self._roles[path]

    def xformable(self, path: str) -> bool:
        if path not in self._xformable:
            self._xformable[path] = self.prim(path).IsA(UsdGeom.Xformable)
        return self._xformable[path]

    def rigid_body(self, path: str) -> bool:
        """Whether the prim has ``UsdPhysics.RigidBodyAPI``."""
        if path not in self._rigid:
            self._rigid[path] = self.prim(path).HasAPI(UsdPhysics.RigidBodyAPI)
        return self._rigid[path]


class FrameStore:
    """The frames of one Newton model over one pxr stage (see the module docstring).

    Every view of the store shares :attr:`lock`; its device arrays are read at each call (they are replaced when a
    later view adds nodes beyond the capacity: a CUDA graph captured before that keeps the old ones).

    Args:
        model: The ``newton.Model`` (only ``body_label``, ``body_count``, ``body_q`` and ``device`` are read).
        stage: The pxr stage the model was built from.
    """

    def __init__(self, model: Any, stage: Usd.Stage) -> None:
        self.stage = stage
        self.device = wp.get_device(model.device)
        self.lock = threading.RLock()
        self.body_count = int(model.body_count)
        labels = [str(label) for label in model.body_label]
        self.bodies: dict[str, int] = {label: b for b, label in enumerate(labels)}
        self._labels = labels
        self._clones: dict[str, tuple[str, str]] = {}  # node path -> (clone prefix, source prefix): Newton-only
        self._clone_trees: dict[str, CloneTree] = {}  # clone root -> the tree that found it (its body pairs)
        self._placements: dict[str, np.ndarray | None] = {}  # clone root -> its placement (see _placement)
        self._scale_of_prim: dict[str, np.ndarray] = {}  # body prim path -> its USD scale (see _scale_of_body)
        self._ambiguous: set[str] = set()
        if len(self.bodies) < len(labels):  # a label given to several bodies cannot place a frame
            self._ambiguous = {label for label in self.bodies if labels.count(label) > 1}
        body_q = getattr(model, "body_q", None)
        self._initial_body_q = body_q.numpy() if body_q is not None and self.body_count else None
        self._body_scale: dict[int, np.ndarray] = {}
        self._body_rigid: dict[int, np.ndarray] = {}
        self.paths: list[str] = []
        self.sources: list[str] = []
        """Each node's stage prim (:meth:`source_path` of its path), in node order."""
        self.index: dict[str, int] = {}
        self._anchor = np.empty(0, dtype=np.int32)
        self._body = np.empty(0, dtype=np.int32)
        self._chain = np.empty((0, 4, 4), dtype=np.float64)
        self._capacity = 0
        self.anchored = False
        """Whether a node is anchored on another (then a write moves frames it did not write: see
        :meth:`refresh_step`)."""
        self.offsets_stale = False
        """Whether nodes were added since the cached offsets were computed (see :meth:`ensure_offsets`)."""
        self._retired: list[wp.array] = []  # arrays replaced on growth: a captured graph may still point at them
        self.local = self.chain = self.anchor = self.body = self.req_row = wp.empty(0, dtype=wp.int32)
        self.offset = self.sheared = self.local
        self._allocate(16)
        # the stage's listing and clone tree, kept for the next view while the stage does not change: any change
        # notice of the stage drops them (see listing())
        self._listed: tuple[StageListing, CloneTree | None] | None = None
        self._on_stage_change = _forget_listing(self)  # Tf holds its Python callbacks weakly: kept here
        self._stage_listener = Tf.Notice.Register(Usd.Notice.ObjectsChanged, self._on_stage_change, stage)

    def listing(self) -> StageListing:
        """The stage's prims as one view build reads them (:class:`~.clones.StageListing`): the same listing, and
        the clone tree made over it, for every build until the stage changes (``Usd.Notice.ObjectsChanged``; an
        attribute value change counts too), then a new one. Views of one model share what the first one listed, as
        Isaac Lab's views share its clone plan."""
        listed = self._listed
        if listed is None:
            listed = self._listed = (StageListing(self.stage), None)
        return listed[0]

    def _tree(self, listing: StageListing) -> CloneTree:
        """The clone tree over ``listing``, made once per listing."""
        listed = self._listed
        if listed is not None and listed[0] is listing and listed[1] is not None:
            return listed[1]
        tree = CloneTree(listing, self._labels)
        if listed is not None and listed[0] is listing and self._listed is listed:  # not dropped meanwhile
            self._listed = (listing, tree)
        return tree

    def forget_listing(self) -> None:
        """Drop the kept listing and clone tree (the stage changed)."""
        self._listed = None

    @property
    def count(self) -> int:
        """Number of frames (nodes)."""
        return len(self.paths)

    def body_of(self, nodes: np.ndarray) -> np.ndarray:
        """The body index of each node (-1: fixed in the world)."""
        return self._body[nodes]

    def resolve(self, prim_path: str | Sequence[str], listing: StageListing | None = None) -> list[str]:
        """The frame paths ``prim_path`` names (:func:`frameview.resolve_prim_paths`), over the stage and the
        subtrees of the envs cloned in Newton only (see the module docstring); remembers the source of each
        cloned one for :meth:`add`.

        Args:
            prim_path: As :func:`frameview.resolve_prim_paths`.
            listing: The stage's prims for this build, shared with :meth:`add` (:meth:`listing` when None).

        Raises:
            ValueError: As :func:`frameview.resolve_prim_paths`; or the pattern reaches a clone with several
                candidate sources on the stage.
        """
        listing = self.listing() if listing is None else listing
        tree = self._tree(listing)
        if not tree.prefixes and not tree.ambiguous:
            return resolve_prim_paths(prim_path, self.stage)
        paths = resolve_prim_paths(prim_path, tree)
        for path in paths:
            if path in self.index:
                continue
            root = tree.root_of(path)
            if root is None or (not listing.below_bare(path, root) and listing.valid(path)):
                continue  # below no clone root, or the stage's own prim
            clone = tree.clone_of(path)  # raises below an ambiguous clone root
            if clone is not None:
                self._clones[path] = clone
                self._clone_trees.setdefault(clone[0], tree)
        return paths

    def _place_clones(self) -> None:
        """Fill :attr:`_placements` for every clone root seen so far (:func:`.clones.rigid_placements`)."""
        roots = [root for root in self._clone_trees if root not in self._placements]
        pairs = {root: self._clone_trees[root].pairs_of(root) for root in roots}
        self._placements.update(rigid_placements(pairs, self.bodies, self._initial_body_q, _POSE_TOLERANCE))

    def source_path(self, path: str) -> str:
        """The stage prim that a frame's offset and properties are read from: ``path`` itself, or for a frame of an
        env cloned in Newton only, the prim it was cloned from."""
        clone = self._clones.get(path)
        return path if clone is None else clone[1] + path[len(clone[0]) :]

    def add(self, paths: Sequence[str], listing: StageListing | None = None) -> np.ndarray:
        """Make ``paths`` nodes (those not yet nodes are read from the stage); return their node indices (int32).

        Args:
            paths: Frame paths (from :meth:`resolve`).
            listing: The stage's prims, as :meth:`resolve` was given them (the stage unchanged since), or None.

        Raises:
            ValueError: A prim is missing or not Xformable, is a physics prim (body, collider, joint), or sits
                below a prim with ``UsdPhysics.RigidBodyAPI`` that the model has no body for.
        """
        new = [p for p in dict.fromkeys(paths) if p not in self.index]
        if new:
            self._insert(new, self.listing() if listing is None else listing)
        return np.array([self.index[p] for p in paths], dtype=np.int32)

    # ---------------------------------------------------------------- building nodes

    def _insert(self, new: list[str], listing: StageListing) -> None:
        stage = self.stage
        cache = UsdGeom.XformCache(Usd.TimeCode.Default())
        reads = _SourceReads(stage, cache, listing)  # frames of cloned envs share their source's prims: read once
        sources = list(map(self.source_path, new))
        checked: set[str] = set()  # sources found a frame (cloned envs' frames share theirs)
        body_labels = self.bodies
        for path, source in zip(new, sources, strict=True):
            if source not in checked or path in body_labels:
                self._check_frame(path, source, reads.prim(source), reads)
                checked.add(source)
        # resolve every new node against the nodes as they will be (new ancestors included), before changing state
        first = self.count
        index = dict(self.index)
        index.update(zip(new, range(first, first + len(new)), strict=True))
        resolved = self._resolve_clones(new, sources, reads, index)
        for k, path in enumerate(new):
            if resolved[k] is None:
                resolved[k] = self._resolve(path, sources[k], reads.prim(sources[k]), reads, index)
        # existing nodes below a new node now anchor on it
        new_set = set(new)
        moved = [n for n, path in enumerate(self.paths) if _has_ancestor_in(path, new_set)]
        for n in moved:
            path = self.paths[n]
            source = self.source_path(path)
            resolved.append(self._resolve(path, source, reads.prim(source), reads, index))
        local_of = {source: reads.local(source)[0] for source in dict.fromkeys(sources)}
        local = _stacked(list(map(local_of.__getitem__, sources)))
        # commit (host)
        self.paths.extend(new)
        self.sources.extend(sources)
        self.index = index
        total = self.count
        rows = np.array([*range(first, total), *moved], dtype=np.int64)
        self._anchor = np.concatenate([self._anchor, np.full(len(new), -1, dtype=np.int32)])
        self._body = np.concatenate([self._body, np.full(len(new), -1, dtype=np.int32)])
        self._chain = np.concatenate([self._chain, np.empty((len(new), 4, 4))])
        anchors, bodies, chains = zip(*resolved, strict=True)
        self._anchor[rows] = anchors
        self._body[rows] = bodies
        self._chain[rows] = _stacked(chains)
        # an anchored node rides on its anchor's body: resolve top-down (an anchor is always a shallower path)
        anchored = rows[self._anchor[rows] >= 0]
        for n in sorted(anchored.tolist(), key=lambda n: self.paths[n].count("/")):
            self._body[n] = self._body[self._anchor[n]]
        self.anchored = bool((self._anchor >= 0).any())
        self._check_body_poses(np.unique(self._body[first:total]))
        # commit (device)
        if total > self._capacity:
            self._allocate(max(total, 2 * self._capacity))
        if self.device.is_cpu:  # the store's own memory: written in place
            self.local.numpy()[first:total] = local
        else:
            wp.copy(self.local, wp.array(local, dtype=wp.mat44d, device="cpu"), dest_offset=first, count=len(new))
        self._upload()
        self.offsets_stale = True

    def _check_frame(self, path: str, source: str, prim: Usd.Prim, reads: _SourceReads) -> None:
        """Raise unless the frame at ``path`` (its stage prim ``prim`` at ``source``) is a valid, non-physics
        Xformable."""
        if not prim.IsValid():
            raise ValueError(f"prim_path: no prim at {path!r}")
        role = reads.role(source, path in self.bodies or source in self.bodies)
        if role is not None:
            raise ValueError(
                f"prim {path!r} is {role}: a NewtonFrameView reads frames that ride on bodies (cameras, sensors, "
                "Xforms) and never moves a body; view a non-physics prim instead (e.g. a camera under the body), "
                "and set body poses through the Newton State (state.body_q)"
            )
        if not reads.xformable(source):
            raise ValueError(
                f"prim_path: prim {path!r} is a {prim.GetTypeName() or 'typeless prim'}, expected an Xformable "
                "(Xform, Camera, Mesh, ...); select Xformable prims only"
            )

    def ensure_offsets(self) -> None:
        """Compute every node's cached ``offset`` and ``sheared`` when nodes were added since (one launch): adding
        nodes reads the stage only, and the views call this before their launches that read the offsets, so a view's
        kernels are first loaded by its first read or write, not by its construction."""
        if self.offsets_stale:
            kernel, dim, params = self.refresh_step()
            wp.launch(kernel, dim, inputs=params[:4], outputs=params[4:], device=self.device)
            self.offsets_stale = False

    def refresh_step(self) -> tuple[Any, int, list]:
        """The launch that recomputes every node's ``offset`` and ``sheared`` from ``local`` (after a write's commit,
        when a node is :attr:`anchored`): ``(kernel, dim, params)``."""
        return refresh_offsets, self.count, [self.local, self.chain, self.anchor, self.body, self.offset, self.sheared]

    def _resolve(
        self, frame: str, source: str, prim: Usd.Prim, reads: _SourceReads, index: dict[str, int]
    ) -> tuple[int, int, np.ndarray]:
        """``(anchor node, body, chain)`` of the frame at path ``frame`` whose stage prim is ``prim`` at ``source``
        (itself, or its source for a cloned frame); the body of an anchored node is its anchor's (set later)."""
        chain = _IDENTITY  # never changed in place: each step makes a new product
        clone = self._clones.get(frame)
        cache = reads.cache
        if reads.local(source)[1]:  # resets the xform stack: its parent frame is the world
            if clone is not None:
                return -1, -1, self._clone_placement(frame, prim, clone)
            return -1, -1, chain
        parent_path = source.rpartition("/")[0] or "/"
        parent = None
        while parent_path != "/":
            path = parent_path
            if clone is not None:  # the parent's path in the frame's own env
                if path != clone[1] and not path.startswith(clone[1] + "/"):  # above the clone root: on no body
                    world = np.array(cache.GetLocalToWorldTransform(reads.prim(parent_path)), dtype=np.float64)
                    return -1, -1, chain @ world @ self._clone_placement(frame, prim, clone)
                path = clone[0] + path[len(clone[1]) :]
                if not reads.below_bare(path, clone[0]) and reads.exists(path):
                    # the env's own prim is on the stage (an env Xform): the stage from here up
                    parent_path, clone = path, None
            node = index.get(path)
            if node is not None:
                return node, -1, chain
            body = self.bodies.get(path)
            parent = reads.prim(parent_path)
            if body is not None:
                if path in self._ambiguous:
                    raise ValueError(
                        f"prim {frame!r} sits on {path!r}, which names {self._labels.count(path)} "
                        "bodies of the Newton model (model.body_label): give each body its own prim path"
                    )
                scale = self._scale_of_body(body, parent, parent_path, cache, on_stage=clone is None)
                return -1, body, scale if chain is _IDENTITY else chain @ scale
            if reads.rigid_body(parent_path):
                raise ValueError(
                    f"prim {frame!r} sits on {path!r}, a prim with UsdPhysics.RigidBodyAPI that the "
                    "Newton model has no body for (no entry of model.body_label names it): build the model from "
                    "this stage (newton.ModelBuilder().add_usd(stage)) without ignoring that body"
                )
            local, resets = reads.local(parent_path)
            chain = chain @ local
            if resets:
                break
            parent_path = parent_path.rpartition("/")[0] or "/"
        if clone is not None:
            return -1, -1, chain @ self._clone_placement(frame, prim, clone)
        return -1, -1, chain

    def _resolve_clones(
        self, frames: list[str], sources: list[str], reads: _SourceReads, index: dict[str, int]
    ) -> list[tuple[int, int, np.ndarray] | None]:
        """:meth:`_resolve` of the cloned frames whose clone root has nothing on the stage, by family: the frames of
        one source share its parents, so each step of the walk up is looked up for the whole family at once (the
        same lookups, in the same order, as :meth:`_resolve`). A frame resolved here ends on a node or a body below
        its clone root; any other (its walk reaches the clone root, a physics prim with no body, an ambiguous body, a
        prim resetting the xform stack) is left None, for :meth:`_resolve`."""
        out: list[tuple[int, int, np.ndarray] | None] = [None] * len(frames)
        families: dict[tuple[str, str], list[tuple[int, str]]] = {}  # (source, source root) -> (row, clone root)
        clones = self._clones
        for k, frame in enumerate(frames):
            clone = clones.get(frame)
            if clone is not None and reads.empty(clone[0]):
                families.setdefault((sources[k], clone[1]), []).append((k, clone[0]))
        bodies, ambiguous = self.bodies, self._ambiguous
        for (source, source_root), members in families.items():
            if reads.local(source)[1]:  # resets the xform stack
                continue
            chain = _IDENTITY
            parent_path = source.rpartition("/")[0]
            below = source_root + "/"
            while members and parent_path.startswith(below):  # the steps strictly below the clone root
                rest = parent_path[len(source_root) :]
                left = []
                for k, root in members:
                    path = root + rest
                    node = index.get(path)
                    if node is not None:
                        out[k] = (node, -1, chain)
                        continue
                    body = bodies.get(path)
                    if body is None:
                        left.append((k, root))
                    elif path not in ambiguous:
                        scale = self._body_scale.get(body)
                        if scale is None:
                            scale = self._scale_of_body(body, reads.prim(parent_path), parent_path, reads.cache, False)
                        out[k] = (-1, body, scale if chain is _IDENTITY else chain @ scale)
                members = left
                if not members or reads.rigid_body(parent_path):  # a physics prim with no body: _resolve raises
                    break
                local, resets = reads.local(parent_path)
                if resets:
                    break
                chain = chain @ local
                parent_path = parent_path.rpartition("/")[0]
        return out

    def _clone_placement(self, frame: str, prim: Usd.Prim, clone: tuple[str, str]) -> np.ndarray:
        """The placement of a cloned frame's env relative to its source's, for a cloned frame on no body."""
        if clone[0] not in self._placements:
            self._place_clones()
        placement = self._placements[clone[0]]
        if placement is None:
            raise ValueError(
                f"prim_path: {frame!r} exists only in the Newton model (its env {clone[0]!r} is a clone of "
                f"{clone[1]!r}, which holds {str(prim.GetPath())!r}) and rides on no Newton body, and the model's "
                "initial body poses do not place that env as a rigid copy of its source, so its pose is unknown: view "
                "frames that ride on bodies, or author the other envs' prims on the stage"
            )
        return placement

    def _scale_of_body(
        self, body: int, prim: Usd.Prim, path: str, cache: UsdGeom.XformCache, on_stage: bool
    ) -> np.ndarray:
        """``S`` with ``world_usd(body) = S @ rigid_part(world_usd(body))``: the body's USD scale, which Newton's
        body pose does not carry, so that its frames keep the world scale the stage gives them. ``prim`` (at ``path``)
        is the body's prim, or for a body cloned in Newton only (``on_stage`` false), its source's."""
        scale = self._body_scale.get(body)
        if scale is None:
            scale = self._scale_of_prim.get(path)
            if scale is None or on_stage:
                world = np.array(cache.GetLocalToWorldTransform(prim), dtype=np.float64)
                rigid = rigid_part(world)
                inverse = np.eye(4)  # of a rigid transform: the rotation's transpose, the translation rotated back
                inverse[:3, :3] = rigid[:3, :3].T
                inverse[3, :3] = -rigid[3, :3] @ rigid[:3, :3].T
                scale = self._scale_of_prim[path] = world @ inverse
                if on_stage:
                    self._body_rigid[body] = rigid  # kept for the pose check (a clone's USD pose is its source's)
            self._body_scale[body] = scale
        return scale

    def _check_body_poses(self, bodies: np.ndarray) -> None:
        """Warn when a body's initial pose in the model is not its USD pose (frames are placed by the latter)."""
        if self._initial_body_q is None:
            return
        for b in sorted(self._body_rigid.keys() & set(bodies.tolist())):  # a clone's USD pose is its source's
            rigid = self._body_rigid[b]
            x = self._initial_body_q[b].astype(np.float64)
            rot = _quat_rows(x[3:7])
            err = max(np.abs(x[:3] - rigid[3, :3]).max(), np.abs(rot - rigid[:3, :3]).max())
            if err > _POSE_TOLERANCE:
                logger.warning(
                    "NewtonFrameView: body %r starts at a pose that differs from its USD pose by %.3g (model.body_q "
                    "vs the stage): frames ride on the body with the offsets the stage gives them, but frames fixed "
                    "in the world keep their USD poses; build the model from the stage as it is, with no xform and "
                    "the stage's up axis",
                    self._labels[b],
                    err,
                )

    # ---------------------------------------------------------------- device arrays

    def _allocate(self, capacity: int) -> None:
        """Grow the device arrays to ``capacity`` nodes, keeping the device-side local matrices."""
        dev = self.device
        old = self.local if self._capacity else None
        local = wp.empty(capacity, dtype=wp.mat44d, device=dev)
        if old is not None and self._capacity:
            wp.copy(local, old, count=self._capacity)
            self._retired.extend(
                [self.local, self.chain, self.anchor, self.body, self.req_row, self.offset, self.sheared]
            )
        self.local = local
        self.chain = wp.empty(capacity, dtype=wp.mat44d, device=dev)
        self.anchor = wp.empty(capacity, dtype=wp.int32, device=dev)
        self.body = wp.empty(capacity, dtype=wp.int32, device=dev)
        self.req_row = wp.full(capacity, -1, dtype=wp.int32, device=dev)
        self.offset = wp.empty(capacity, dtype=wp.transformf, device=dev)
        self.sheared = wp.empty(capacity, dtype=wp.int32, device=dev)
        self._capacity = capacity

    def _upload(self) -> None:
        """Copy the host-side node data (anchor, body, chain) to the device."""
        n = self.count
        if n == 0:
            return
        host = "cpu"
        wp.copy(self.anchor, wp.array(self._anchor, dtype=wp.int32, device=host), count=n)
        wp.copy(self.body, wp.array(self._body, dtype=wp.int32, device=host), count=n)
        wp.copy(self.chain, wp.array(self._chain, dtype=wp.mat44d, device=host), count=n)


def _forget_listing(store: FrameStore) -> Any:
    """The change-notice callback of ``store``'s stage: drops its kept listing (holds the store weakly, so that the
    stage's listener never keeps a store alive)."""
    ref = weakref.ref(store)

    def changed(_notice: Any, _stage: Any) -> None:
        live = ref()
        if live is not None:
            live.forget_listing()

    return changed


def _stacked(matrices: list[np.ndarray]) -> np.ndarray:
    """``np.array(matrices)``, each distinct array object converted once (the frames of cloned envs share their
    source's local matrix and their body's scale)."""
    ids = list(map(id, matrices))
    distinct = dict(zip(ids, matrices, strict=True))
    if len(distinct) == len(matrices):
        return np.array(matrices)
    row_of = {key: n for n, key in enumerate(distinct)}
    return np.array(list(distinct.values()))[np.fromiter(map(row_of.__getitem__, ids), np.intp, len(ids))]


def _has_ancestor_in(path: str, paths: set[str]) -> bool:
    parent = path.rsplit("/", 1)[0]
    while parent:
        if parent in paths:
            return True
        parent = parent.rsplit("/", 1)[0]
    return False


def _quat_rows(q: np.ndarray) -> np.ndarray:
    """Row-vector rotation (rows are the rotated axes) of an xyzw quaternion."""
    x, y, z, w = q / np.linalg.norm(q)
    col = np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )
    return col.T
