"""memgym train / the sb3: agent on bad input: every error names the field and the allowed values,
comes out as `memgym <cmd>: error: ...` with exit code 2 (no traceback), and loses nothing (no run
folder written for a bad recipe, checkpoints left as they were)."""

from __future__ import annotations

import pytest
import yaml

pytest.importorskip("sb3_contrib")

from test_train import LIFE_EASY, tiny  # noqa: E402

from agents import cli  # noqa: E402
from agents.train_config import TrainConfig, TrainConfigError  # noqa: E402


def _recipe(**patch) -> dict:
    data = yaml.safe_load(LIFE_EASY.read_text())
    data.update(patch)
    return data


# ------------------------------------------------------------------------------------ 1. the recipe
@pytest.mark.parametrize(
    "patch, needles",
    [
        ({"env": {"id": "MemGym/Life-Easy-v0", "overrides": {"horizn": 3}}},
         ["key 'env.overrides.horizn'", "horizon", "capacity", "n_candidates"]),
        ({"env": {"id": "MemGym/Life-Easy-v0", "overrides": {"horizon": -3}}},
         ["key 'env.overrides.horizon'", "[10, 1000000]", "-3"]),
        ({"env": {"id": "MemGym/Nope-v0"}}, ["key 'env.id'", "MemGym/Life-Easy-v0"]),
        ({"eval": {"baselines": ["random", "nope"]}},
         ["key 'eval.baselines'", "'nope'", "versioned", "write_all", "sb3:PATH"]),
        ({"pretrain": {"agent": "nope"}}, ["key 'pretrain.agent'", "'nope'", "versioned"]),
        # the quick section is checked without --quick too
        ({"quick": {"totl_steps": 3}}, ["unknown key 'quick.totl_steps'", "quick.total_steps"]),
        ({"quick": {"eval": {"every": 3}}}, ["unknown key 'quick.eval.every'", "quick.eval.freq"]),
        ({"quick": {"total_steps": 0}}, ["key 'quick.total_steps' must be an integer >= 1"]),
        ({"quick": {"env": {"overrides": {"horizn": 3}}}}, ["key 'quick.env.overrides.horizn'", "horizon"]),
    ],
)
def test_bad_recipe_names_the_key_and_the_allowed_values(patch, needles):
    with pytest.raises(TrainConfigError) as err:
        TrainConfig.from_dict(_recipe(**patch))
    for needle in needles:
        assert needle in str(err.value)


def test_overrides_valid_only_together_are_accepted():
    """delay_min 30 alone is above the preset's delay_max; with delay_max 40 it is a valid pair."""
    env = {"id": "MemGym/Life-Easy-v0", "overrides": {"delay_min": 30, "delay_max": 40}}
    assert TrainConfig.from_dict(_recipe(env=env)).env_overrides == {"delay_min": 30, "delay_max": 40}
    with pytest.raises(TrainConfigError, match="key 'env.overrides.delay_min'"):
        TrainConfig.from_dict(_recipe(env={"id": "MemGym/Life-Easy-v0", "overrides": {"delay_min": 30}}))


@pytest.mark.parametrize(
    "changes, needle",
    [
        ({"env": {"id": "MemGym/Life-Easy-v0", "overrides": {"horizn": 3}}}, "key 'env.overrides.horizn'"),
        ({"env": {"id": "MemGym/Life-Easy-v0", "overrides": {"horizon": -3}}}, "key 'env.overrides.horizon'"),
        ({"eval": {"freq": 128, "episodes": 1, "test_episodes": 1, "baselines": ["random", "nope"]}},
         "key 'eval.baselines'"),
    ],
)
def test_cli_bad_recipe_fails_before_writing_the_run_folder(tmp_path, capsys, changes, needle):
    out = tmp_path / "run"
    rc = cli.main(["train", "--config", str(tiny(tmp_path, **changes)), "--quick", "--out", str(out),
                   "--no-progress", "--no-test"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("memgym train: error: ") and needle in err and "Traceback" not in err
    assert not out.exists()  # no config.yaml / seeds.json left behind to block the corrected command
