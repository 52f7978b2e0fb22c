# SPDX-License-Identifier: Apache-2.0
"""Internal: the parts of the view contract that every backend composes.

Nothing here is public API (the public names are re-exported from :mod:`frameview`): the row resolver
(:mod:`.arguments`, :mod:`.rows`, :mod:`.values`, the kernels of its checks :mod:`.argument_kernels`), the device
status word (:mod:`.device_errors`), the launch layer (:mod:`.launch`, the Newton view's :mod:`.launch_caches`), how
the contract class reaches the backend hooks (:mod:`.dispatch`), a held write's staging (:mod:`.write_stager`), host
inputs on their way to the device (:mod:`.host_staging`), host copies (:mod:`.host`), torch interop
(:mod:`.interop`, :mod:`.torch_collectives`) and what the config classes share (:mod:`.config_checks`).

The lowest layer: nothing here imports a module of frameview outside ``_core`` (the ``layers`` contract of
``[tool.importlinter]`` in ``pyproject.toml``; ``docs/architecture.md``).
"""
