"""Suite-wide settings."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="session")
def _sb3_logs_in_pytest_tmp(tmp_path_factory):
    # A Stable-Baselines3 model trained without a log folder makes an empty folder
    # $TMPDIR/SB3-<timestamp> per learn() (its logger's default when SB3_LOGDIR is unset); the suite's
    # few learn() calls left six of them in the machine's temp folder on every run.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SB3_LOGDIR", str(tmp_path_factory.mktemp("sb3_logs")))
        yield
