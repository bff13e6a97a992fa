#!/usr/bin/env python
"""Thin wrapper: `python scripts/train.py --config configs/train/life_easy.yaml` == `memgym train ...`."""

import os
import sys

# this checkout's packages, whatever is installed (as scripts/bench.py)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from agents.train import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
