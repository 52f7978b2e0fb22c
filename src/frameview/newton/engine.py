# SPDX-License-Identifier: Apache-2.0
"""The Newton engine behind a view: its model, state and control (each the object or a callable returning the
current one), the kinematics hook every read runs first, and when the view is stale.

**Fresh after a reset.** A simulation that resets envs by writing joint coordinates (``state.joint_q`` /
``joint_qd``) leaves the body poses (``state.body_q`` / ``body_qd``) of those envs stale until forward kinematics
runs. Isaac Lab 3 does exactly this: its reset writes the joints of the reset envs and marks kinematics pending
(``NewtonManager.kinematics_dirty`` and its reset masks); its own body getters run ``NewtonManager.forward()``
first, which evaluates forward kinematics of the dirty articulations only and costs a flag test when nothing is
pending. Every Newton view runs the same hook before each read, so it reads what Isaac Lab's data reads:

- handed Isaac Lab's getters (``NewtonManager.get_model``, ``get_state_0``, ``get_control``), or the model object
  Isaac Lab's ``NewtonManager`` currently holds, the view recognises the manager and calls its ``forward`` (no
  argument needed);
- otherwise ``forward=`` takes any callable (e.g. one that runs ``newton.eval_fk`` over the envs a reset wrote),
  run before each read.

The hook is the engine's own forward kinematics, not the view's: Isaac Lab's is solver-specific (Kamino, MuJoCo Warp)
and tracks which articulations are dirty, so calling it gives Isaac Lab's numbers bit for bit and never runs twice.

**Stale.** A view is stale once the model it was built from is no longer the engine's: a model callable returns
another model (re-finalised), or Isaac Lab's manager, recognised behind the handles, holds another model (a hard
``sim.reset()``). A stale view raises :class:`~frameview.physics.StaleViewError` at its next call. Handed plain
objects of a simulation Isaac Lab does not manage, a view cannot tell that its model was replaced: it keeps reading
the arrays it was given.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from ..physics.base import StaleViewError

__all__ = ["NewtonEngine", "isaaclab_manager"]

_MANAGER_MODULE = "isaaclab_newton.physics.newton_manager"


def isaaclab_manager(*handles: Any, model: Any = None) -> Any:
    """Isaac Lab's ``NewtonManager`` (the class) behind a view's engine handles, or ``None``: a handle that is one of
    its bound getters (``NewtonManager.get_state_0``), or a ``model`` that is the model it holds now. Isaac Lab is
    never imported here: a manager exists only where Isaac Lab already imported it."""
    for handle in handles:
        owner = getattr(handle, "__self__", None)
        if (
            isinstance(owner, type)
            and owner.__module__.startswith("isaaclab")
            and callable(getattr(owner, "forward", None))
            and callable(getattr(owner, "get_model", None))
        ):
            return owner
    module = sys.modules.get(_MANAGER_MODULE)
    manager = getattr(module, "NewtonManager", None)
    if model is not None and manager is not None:
        try:
            if manager.get_model() is model:
                return manager
        except Exception:  # a manager that cannot answer is not one the view can follow
            return None
    return None


def _not_ready(owner: str, what: str) -> str:
    return (
        f"{owner}: the {what} callable returned None: the simulation has no Newton {what} yet, or was closed. Build "
        "the view once physics is ready (Isaac Lab: after sim.reset() / when the env is created; pass "
        "NewtonManager.get_model, get_state_0 and get_control, the getters, so that the view follows the simulation)"
    )


class NewtonEngine:
    """A view's Newton handles: the model it was built from, the current state and control, the hook.

    Args:
        owner: How errors name the view (its ``repr``, or its class and pattern while it is being built).
        model: The ``newton.Model``, or a callable returning the current one.
        state: The ``newton.State`` to read, or a callable returning the current one (solvers swap states).
        control: The ``newton.Control`` (or a callable), or ``None``.
        forward: A callable run before each read (forward kinematics of a reset's envs); ``None``: Isaac Lab's
            ``NewtonManager.forward`` where the handles are Isaac Lab's, else nothing.

    Raises:
        TypeError: A handle of the wrong type.
        RuntimeError: A callable returned ``None`` (physics not ready).
    """

    def __init__(self, owner: str, model: Any, state: Any, control: Any = None, forward: Any = None) -> None:
        import newton

        self._newton = newton
        self._owner = owner
        if not (isinstance(model, newton.Model) or callable(model)):
            raise TypeError(
                f"model: expected a newton.Model (ModelBuilder.finalize()) or a callable returning it, got "
                f"{type(model).__name__}"
            )
        if not (isinstance(state, newton.State) or callable(state)):
            raise TypeError(
                f"state: expected a newton.State or a callable returning the current one, got {type(state).__name__}"
            )
        if control is not None and not (isinstance(control, newton.Control) or callable(control)):
            raise TypeError(
                f"control: expected a newton.Control, a callable returning it, or None, got {type(control).__name__}"
            )
        if forward is not None and not callable(forward):
            raise TypeError(
                f"forward: expected a callable (run before each read) or None, got {type(forward).__name__}"
            )
        self._model_source = None if isinstance(model, newton.Model) else model
        current = model if self._model_source is None else model()
        if current is None:
            raise RuntimeError(_not_ready(owner, "model"))
        if not isinstance(current, newton.Model):
            raise TypeError(f"model: the callable returned a {type(current).__name__}, expected a newton.Model")
        self.model = current
        self._state_source = state
        self._control_source = control
        self.manager = isaaclab_manager(model, state, control, model=current)
        self._forward: Callable[[], Any] | None = forward or (self.manager.forward if self.manager else None)
        self.body_count = int(current.body_count)

    def name(self, owner: str) -> None:
        """Name errors after the finished view."""
        self._owner = owner

    @property
    def has_forward(self) -> bool:
        """Whether reads run a kinematics hook first."""
        return self._forward is not None

    def fresh(self) -> None:
        """Run the kinematics hook (a read's first step): pending forward kinematics of reset envs."""
        if self._forward is not None:
            self._forward()

    def check_current(self) -> None:
        """Raise :class:`StaleViewError` when the model the view was built from is no longer the engine's."""
        if self._model_source is not None:
            current = self._model_source()
            if current is self.model:
                return
            if current is None:
                raise StaleViewError(
                    f"{self._owner}: the model callable returned None: the simulation was closed or is being rebuilt "
                    "(a hard reset); create the view again once it runs"
                )
            raise StaleViewError(
                f"{self._owner}: the Newton model was rebuilt (the model callable returns another newton.Model than "
                "the one the view was made from, e.g. after finalize() again or a hard sim.reset()); create the view "
                "again"
            )
        if self.manager is not None:
            current = self.manager.get_model()
            if current is not self.model:
                raise StaleViewError(
                    f"{self._owner}: Isaac Lab's NewtonManager holds "
                    + ("no model (the simulation was closed)" if current is None else "another newton.Model (a hard "
                       "sim.reset() re-finalised it)")
                    + " than the one the view was built from; create the view again after the simulation starts "
                    "(frameview.isaaclab's views rebuild themselves)"
                )

    def state(self) -> Any:
        """The current state, checked to belong to the model."""
        state = self._state_source() if callable(self._state_source) else self._state_source
        if state is None:
            raise StaleViewError(_not_ready(self._owner, "state"))
        if not isinstance(state, self._newton.State):
            raise TypeError(
                f"state: the callable returned a {type(state).__name__}, expected a newton.State (the current one)"
            )
        body_q = state.body_q
        if body_q is not None and body_q.shape[0] != self.body_count:
            raise StaleViewError(
                f"{self._owner}: the Newton state has {body_q.shape[0]} bodies, the model the view was made from "
                f"{self.body_count}: the state belongs to another (rebuilt) model; create the view again"
            )
        return state

    def control(self) -> Any:
        """The current control, or ``None`` (none given, or the callable returned none)."""
        source = self._control_source
        return source() if callable(source) else source

    def release(self) -> None:
        self.model = self._state_source = self._control_source = self._model_source = None
        self._forward = None
        self.manager = None
