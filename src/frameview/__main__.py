# SPDX-License-Identifier: Apache-2.0
"""``python -m frameview``: what this machine can run.

Prints the version, the registered backends, the Fabric providers that can load here (and why the others cannot),
the engines of the typed physics views, the Warp devices and whether Warp's kernel cache holds frameview's kernels, so
that a user knows which ``FrameViewCfg`` and ``PhysicsViewCfg`` values will work before building a stage.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import tempfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

from . import __version__

# How to install an extra: from a clone of the repository (what works today), or from a package index.
_FROM_CLONE = "pip install -e '.[{0}]' from a clone (pip install 'frameview[{0}]' from a package index)"

# provider -> (what it is, the module it needs, how to get that module)
_PROVIDERS = {
    "memory": ("the embedded Fabric model, populated from a pxr Usd.Stage", "pxr", _FROM_CLONE.format("usd")),
    "ovstage": (
        "real Fabric without Kit, for an ovstage.Stage",
        "ovstage",
        _FROM_CLONE.format("ovstage") + "; its native runtime needs libGL.so.1 (Debian/Ubuntu package libgl1)",
    ),
    "usdrt": (
        "real Fabric inside Kit / Isaac Sim",
        "usdrt",
        "usdrt ships with Isaac Sim / Omniverse Kit and is not on PyPI: run inside Isaac Sim's Python",
    ),
}

# built-in backend -> (what it is, the modules it needs, how to get them)
_BACKENDS = {
    "usd": ("the pxr reference backend (reads and writes USD)", ("pxr",), _FROM_CLONE.format("usd")),
    "fabric": ("Fabric through one of the providers below", (), ""),
    "newton": (
        "frames riding on Newton bodies",
        ("newton", "pxr"),
        _FROM_CLONE.format("newton,usd"),
    ),
}

_PACKAGES = ("warp-lang", "numpy", "usd-core", "usd-exchange", "ovstage", "ovphysx", "newton", "torch", "isaaclab")

# physics engine -> (what its views read, frameview's module that loads it)
_PHYSICS = {
    "newton": (
        "rigid bodies and articulations of a newton.Model (model=, state=, control=)",
        "frameview.newton.bodies",
    ),
    "ovphysx": (
        "rigid bodies and articulations of an ovphysx.PhysX scene on an ovstage.Stage (physx=, stage=)",
        "frameview.ovphysx.bodies",
    ),
}

# distributions that install a pxr package, and what they are
_PXR_DISTRIBUTIONS = {
    "usd-core": "Pixar's USD wheel (frameview[usd])",
    "usd-exchange": "OpenUSD Exchange's pxr (Isaac Lab 3's)",
}


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _try_import(module: str) -> str | None:
    """``None`` when ``module`` imports, else why it does not (the exception, one line)."""
    try:
        importlib.import_module(module)
    except Exception as exc:  # an import can fail with any error (a native library missing: OSError, ...)
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")
    return None


def pxr_provider() -> tuple[str, str | None]:
    """Which installation provides ``pxr`` here, and what is wrong with it (``None`` when nothing is).

    Returns:
        ``(provider, problem)``: ``provider`` names the distribution(s) that install ``pxr`` (``usd-core``,
        ``usd-exchange``), or Kit / Isaac Sim when ``pxr`` comes from their extensions, with the USD version;
        ``problem`` says why this is not one working pxr (none importable, or two distributions installing one).
    """
    owners = sorted(metadata.packages_distributions().get("pxr", []))
    named = ", ".join(f"{d} {_version(d) or '?'}" for d in owners)
    why = _try_import("pxr.Usd")
    if len(owners) > 1:
        problem = (
            f"{len(owners)} distributions install pxr ({named}) into one folder: the last one installed overwrote the "
            f"other's files, and uninstalling either leaves pxr broken. Keep one: pip uninstall {' '.join(owners)}, "
            f"then reinstall the one you want with pip install --force-reinstall --no-deps (inside Isaac Lab: "
            f"usd-exchange)"
        )
        return named, problem
    if why is not None:
        return (named or "none"), f"pxr does not import ({why}); {_PROVIDERS['memory'][2]}"
    from pxr import Usd

    usd = ".".join(map(str, Usd.GetVersion()))
    if owners:
        return f"{named}: {_PXR_DISTRIBUTIONS.get(owners[0], 'a wheel')}, USD {usd}", None
    import pxr

    where = getattr(pxr, "__file__", None) or next(iter(getattr(pxr, "__path__", [])), "?")
    kit = any(m in sys.modules for m in ("carb", "omni.kit.app", "isaacsim")) or "kit" in str(where).lower()
    return (f"Kit / Isaac Sim, USD {usd} ({where})" if kit else f"not a pip distribution, USD {usd} ({where})"), None


def _ovstage_problem() -> str | None:
    """Why the ovstage provider refuses the installed ovstage (``None``: supported, or not installed)."""
    from .fabric.providers import ovstage_version_problem

    version = _version("ovstage")
    if version is None:
        return None
    try:
        parts = tuple(int(p) for p in version.split(".")[:3])
    except ValueError:
        return ovstage_version_problem(None)
    return ovstage_version_problem(parts)


def report(verbose: bool = False) -> str:
    """The text ``python -m frameview`` prints (``verbose``: leave Warp's own start-up messages on)."""
    lines = [f"frameview {__version__} ({Path(__file__).resolve().parent})"]
    versions = [f"python {sys.version.split()[0]}"]
    versions += [f"{d} {v}" if (v := _version(d)) else f"{d}: not installed" for d in _PACKAGES]
    lines.append(", ".join(versions))

    cannot: dict[str, str] = {}
    warp_error: Exception | None = None
    with _native_stderr(verbose) as said:  # Warp's missing-driver line, printed by whichever import starts Warp
        try:
            import warp as wp

            if not verbose:
                quiet_warp()
            wp.init()
        except Exception as exc:  # Warp itself failing to load is worth saying, not a traceback
            warp_error = exc
        for module in sorted({"pxr", "newton", *(m for _, m, _ in _PROVIDERS.values())}):
            why = _try_import(module)
            if why is not None:
                cannot[module] = why
        for _what, module in _PHYSICS.values():  # frameview's own modules: their errors say what to install
            why = _try_import(module)
            if why is not None:
                cannot[module] = why
    warp_said = said
    if "ovstage" not in cannot and (too_old := _ovstage_problem()) is not None:
        cannot["ovstage"] = too_old

    provider, problem = pxr_provider()
    lines += ["", f"pxr: {provider}"]
    if problem is not None:
        lines.append(f"  problem: {problem}")
    lines += _backend_lines(cannot) + _provider_lines(cannot) + _physics_lines(cannot)
    lines += _device_lines(warp_error, warp_said)
    if warp_said and verbose is False:
        others = [line for line in warp_said if "driver" not in line.lower()]
        if others:
            lines += ["", "printed while loading the packages above:", *(f"  {line}" for line in others)]
    if warp_error is None:
        lines += ["", kernel_cache_line()]
    return "\n".join(lines)


def kernel_cache_line() -> str:
    """Whether Warp's kernel cache holds frameview's compiled kernels (``wp_frameview.*`` entries), or the first use
    compiles them."""
    import warp as wp

    cache = Path(str(getattr(wp.config, "kernel_cache_dir", "") or ""))
    try:
        cached = cache.is_dir() and any(p.name.startswith("wp_frameview.") for p in cache.iterdir())
    except OSError:
        cached = False
    if cached:
        return (f"kernels: Warp's cache ({cache}) holds frameview's compiled kernels: a first use loads them (a "
                "kernel module changed since it was compiled compiles again)")  # fmt: skip
    return f"kernels: Warp compiles frameview's on first use (about 18 s on a CPU, once; then cached in {cache})"


def _backend_lines(cannot: dict[str, str]) -> list[str]:
    """The backends section: each usable or not, with the reason and how to get it (``cannot``: module -> why)."""
    from .config import available_backends

    providers_here = [name for name, (_, module, _) in _PROVIDERS.items() if module not in cannot]
    lines = ["", "backends (FrameViewCfg.backend):"]
    for name in available_backends():
        if name not in _BACKENDS:
            lines.append(f"  {name:<8} ok: registered by a plug-in (frameview.backends entry point)")
            continue
        what, needs, how = _BACKENDS[name]
        missing = [m for m in needs if m in cannot]
        if missing:
            why = "; ".join(f"{m}: {cannot[m]}" for m in missing)
            lines.append(f"  {name:<8} not usable here: needs {' and '.join(missing)} ({why}); to get it: {how}")
        elif name == "fabric" and not providers_here:
            lines.append(f"  {name:<8} not usable here: no Fabric provider can load (see below)")
        elif name == "fabric":
            lines.append(f"  {name:<8} usable: {what} (here: {', '.join(providers_here)})")
        else:
            lines.append(f"  {name:<8} usable: {what}")
    return lines


def _provider_lines(cannot: dict[str, str]) -> list[str]:
    """The Fabric providers section, and what ``"auto"`` picks here."""
    lines = ["", "fabric providers (FrameViewCfg.fabric_provider):"]
    for name, (what, module, how) in _PROVIDERS.items():
        if module in cannot:
            lines.append(f"  {name:<8} not usable here: {cannot[module]}")
            lines.append(f"  {'':<8} {what}; to get it: {how}")
        else:
            version = f" ({module} {_version(module)})" if name == "ovstage" else ""
            lines.append(f"  {name:<8} usable: {what}{version}")
    auto = "usdrt" if "usdrt" not in cannot else "memory"
    lines.append(f"  {'auto':<8} picks {auto} for a pxr stage here, ovstage for an ovstage.Stage (and logs its choice)")
    return lines


def _physics_lines(cannot: dict[str, str]) -> list[str]:
    """The typed physics views' section: each engine usable or not, with the reason and what to install."""
    from .physics.config import PHYSICS_BACKENDS

    lines = ["", "physics views (PhysicsViewCfg.backend):"]
    for name, (what, module) in _PHYSICS.items():
        install = PHYSICS_BACKENDS[name][3]
        if module in cannot:
            lines.append(f"  {name:<8} not usable here: {cannot[module]}")
            lines.append(f"  {'':<8} {what}; to get it: install {install}")
        elif name == "ovphysx" and (too_old := _ovstage_problem()) is not None:
            lines.append(f"  {name:<8} not usable here: {too_old}")
        else:
            version = f" ({name} {_version(name)})" if _version(name) else ""
            lines.append(f"  {name:<8} usable: {what}{version}")
    return lines


def _device_lines(warp_error: Exception | None, warp_said: list[str]) -> list[str]:
    """The devices section: the CPU and each CUDA device Warp sees (or why none)."""
    lines = ["", "devices (FrameViewCfg.device):"]
    if warp_error is not None:
        lines.append(f"  Warp did not initialise: {type(warp_error).__name__}: {warp_error}")
        return lines
    import warp as wp

    lines.append(f"  {'cpu':<8} ok")
    cuda = [d for d in wp.get_devices() if d.is_cuda]
    for d in cuda:
        mem = getattr(d, "total_memory", 0) / 2**30
        lines.append(f"  {d.alias:<8} ok: {d.name}, {mem:.1f} GiB")
    if not cuda:
        driver = " ".join(line for line in warp_said if "driver" in line.lower()).strip()
        lines.append(
            f"  {'cuda:N':<8} none: no CUDA device is visible to Warp; use device='cpu'"
            + (f" (Warp: {driver})" if driver else "")
        )
    return lines


def quiet_warp() -> None:
    """Turn off Warp's start-up banner and its per-module "took N ms (compiled)" lines (warnings stay)."""
    import warp as wp

    wp.config.log_level = wp.LOG_WARNING  # Warp logs them at INFO


@contextlib.contextmanager
def _native_stderr(verbose: bool) -> Iterator[list[str]]:
    """Collect what native code writes to stderr inside the block (Warp's missing-driver line) instead of printing it.

    Yields a list that holds the collected lines after the block. With ``verbose`` nothing is collected.
    """
    said: list[str] = []
    if verbose:
        yield said
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield said
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            text = sink.read().decode(errors="replace")
            said += [line.removeprefix("Warp CUDA warning: ") for line in text.splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m frameview", description=__doc__.split("\n\n")[1])
    parser.add_argument("--version", action="version", version=f"frameview {__version__}")
    parser.add_argument("--verbose", action="store_true", help="let Warp print its start-up banner and warnings")
    args = parser.parse_args(argv)
    print(report(verbose=args.verbose))
    return 0


if __name__ == "__main__":
    sys.exit(main())
