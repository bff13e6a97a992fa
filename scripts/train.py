#!/usr/bin/env python
"""Thin wrapper: `python scripts/train.py --config configs/train/life_easy.yaml` == `memgym train ...`."""

import sys

from agents.train import main

if __name__ == "__main__":
    sys.exit(main())
