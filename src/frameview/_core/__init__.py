# SPDX-License-Identifier: Apache-2.0
"""Internal: the parts of the view contract that every backend composes.

Nothing here is public API (the public names are re-exported from :mod:`frameview`): the row resolver
(:mod:`.arguments`, :mod:`.rows`), the device status word (:mod:`.device_errors`), the launch layer
(:mod:`.launch`), how the contract class reaches the backend hooks (:mod:`.dispatch`), a held write's staging
(:mod:`.write_stager`), host inputs on their way to the device (:mod:`.host_staging`), host copies (:mod:`.host`)
and torch interop (:mod:`.interop`).
"""
