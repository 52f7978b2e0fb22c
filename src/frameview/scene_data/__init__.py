# SPDX-License-Identifier: Apache-2.0
"""Scene data: a physics backend's transforms, reordered into a consumer's path order.

Public names are exported once, from :mod:`frameview`: ``fv.create_mapping`` and ``fv.SceneDataProvider``.
"""
