# SPDX-License-Identifier: Apache-2.0
"""The scaling harness behind ``perf/scaling.py`` (``./scripts/bench``), and what the other perf scripts share.

- :mod:`.cli`: the options (``--help``); :mod:`.run`: the sweep (``main``); :mod:`.measure`: the rows of one scene.
- :mod:`.timing`: the device-synchronised clock; :mod:`.machine`: machine description and host load.
- :mod:`.scenes`: the scene (arrays, the embedded model, the pxr stage) and the pose checks against float64 truth.
- :mod:`.baselines`: the scoped slot-table seam and the stage-wide ("develop") baseline.
- :mod:`.profiling`: ``--profile`` with py-spy; :mod:`.report`, :mod:`.targets`, :mod:`.plots`, :mod:`.fmt`: output.
- :mod:`.console`: log lines, notes and progress bars.

The perf scripts put ``perf/`` on ``sys.path`` (Python does it for a script) and ``import harness.<module>``.
"""
