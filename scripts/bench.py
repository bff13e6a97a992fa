"""Thin wrapper: ``python scripts/bench.py [args]`` is ``memgym bench [args]`` (see ``memgym bench --help``)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from agents.cli import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main(["bench", *sys.argv[1:]]))
