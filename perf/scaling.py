# SPDX-License-Identifier: Apache-2.0
"""Scaling harness: FabricFrameView's scoped selections against the stage-wide baseline, and against UsdFrameView.

The entry point of ``./scripts/bench``; the harness itself is the package ``perf/harness/`` (options and metrics:
``python perf/scaling.py --help`` or ``perf/harness/cli.py``; the sweep: ``perf/harness/run.py``).
"""

import sys

from harness.run import main

if __name__ == "__main__":
    sys.exit(main())
