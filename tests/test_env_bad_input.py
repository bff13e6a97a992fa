"""Bad input to the env and its wrappers: a clear error that names the problem, and nothing lost.

Each test plays a twin env alongside the one given the bad input: after the rejected call both must
go on identically, so a half-applied change (a reseeded RNG, a replaced world, a rolled-back clock)
fails the comparison.
"""

from __future__ import annotations

import copy
import json
import pickle
import re
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from test_env_determinism import canon

import envs  # noqa: F401  (registers the ids)
from envs import MemoryEnv
from envs.memory_env import InvalidAction
from envs.wrappers import FlattenAction, MaskInObservation, TextInterface
from world import World, WorldConfig
from world.config import ConfigError
from world.sim import NO_CLUSTER, Op

WRITE = np.array([1, 0])


def _digest(env, n: int, seed: int = 5) -> str:
    """n seeded random steps (resets at the horizon): every obs, reward, flag and info, in the canonical
    form of test_env_determinism (values only: pickle's bytes also record which equal strings are one
    object, which the process-wide script-text memos decide, so they differed when this test ran alone)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        obs, r, term, trunc, info = env.step(np.array([rng.integers(7), rng.integers(env.K)]))
        out.append((obs, r, term, trunc, info))
        if trunc:
            out.append(env.reset())
    return json.dumps(canon(out))


def _twins(config="life-easy", steps=5, **kw):
    a, b = MemoryEnv(config, **kw), MemoryEnv(config, **kw)
    a.reset(seed=1)
    b.reset(seed=1)
    _write_both(a, b, steps)
    return a, b


def _write_both(a, b, steps):
    for _ in range(steps):
        a.step(WRITE)
        b.step(WRITE)


# ---------------------------------------------------------------------- reset
def test_rejected_reset_options_change_nothing():
    a, b = _twins(WorldConfig.preset("life", "easy").replace(n_candidates=12))  # (not an override)
    with pytest.raises(ValueError, match="n_candidates 12 -> 8"):
        a.reset(seed=7, options={"difficulty": "medium"})  # the medium preset has K = 8: other spaces
    with pytest.raises(ValueError, match="unknown key.*'famly'.*allowed: 'family', 'difficulty'"):
        a.reset(seed=7, options={"famly": "recall"})
    with pytest.raises(ConfigError, match="family"):
        a.reset(seed=7, options={"family": "nope"})
    with pytest.raises(ValueError, match="must be a dict"):
        a.reset(seed=7, options=["family"])
    assert a.config == b.config and a.K == b.K == 12
    assert _digest(a, 150) == _digest(b, 150)  # same episode, same RNG (nothing was reseeded)



@pytest.mark.parametrize("options", [[], 0, "", False, ()])
def test_falsy_reset_options_that_are_not_a_dict_are_refused(options):
    """reset(options=...) took a falsy non-dict ([], 0, "") silently as no options, while a truthy
    non-dict was refused; None and {} are still no options."""
    a, b = _twins()
    with pytest.raises(ValueError, match=r"reset options must be a dict with keys 'family' and/or 'difficulty', "
                                         rf"got {type(options).__name__}"):
        a.reset(seed=7, options=options)
    assert _digest(a, 150) == _digest(b, 150)  # not even reseeded
    assert canon(a.reset(seed=7, options={})) == canon(b.reset(seed=7, options=None))


def test_reset_options_still_switch_the_preset():
    env = MemoryEnv("life-easy")
    env.reset(seed=0, options={"family": "recall"})
    assert (env.config.family, env.config.difficulty) == ("recall", "easy")
    fresh = MemoryEnv("recall-easy")
    fresh.reset(seed=0)
    assert _digest(env, 120) == _digest(fresh, 120)


# ---------------------------------------------------------------------- set_state
@pytest.mark.parametrize("breakage", ["no env steps", "no world", "bad rng", "not a dict", "world not a snapshot",
                                      "clock not an index", "no script", "no store", "ids not a list",
                                      "a world key missing", "a key no world has", "a cache not a tuple",
                                      "chunk counts not a list", "event of another time", "version not an int",
                                      "flag not a bool", "rng seed not an int"])
def test_malformed_snapshot_is_rejected_before_anything_changes(breakage):
    a, b = _twins()
    snap = a.get_state()
    _write_both(a, b, 5)
    bad = copy.deepcopy(snap)
    if breakage == "no env steps":
        del bad["env"]["steps"]
        match = r"state\['env'\] needs the keys .*'steps'"
    elif breakage == "no world":
        del bad["world"]
        match = "not a MemoryEnv snapshot"
    elif breakage == "bad rng":
        bad["np_random"] = {"state": "garbage"}
        match = "PCG64"
    elif breakage == "not a dict":
        bad = [1, 2]
        match = "not a MemoryEnv snapshot"
    elif breakage == "world not a snapshot":
        bad["world"] = {"store": None}
        match = "not a World snapshot"
    elif breakage == "clock not an index":
        bad["world"]["_i"] = "x"
        match = r"state\['_i'\] must be an event index"
    elif breakage == "no script":
        bad["world"]["_gen"] = None
        match = r"state\['_gen'\] must be a ScriptGenerator"
    elif breakage == "no store":
        bad["world"]["store"] = None
        match = r"state\['store'\] must be a MemoryStore"
    elif breakage == "ids not a list":
        bad["env"]["ids"] = 5
        match = r"'ids' must be a list of memory ids"
    elif breakage == "a world key missing":  # (it kept this world's value: a mix of two states)
        del bad["world"]["_se"]
        match = r"not a World snapshot .*it needs the keys .*'_se'"
    elif breakage == "a key no world has":
        bad["world"]["_sweep_every"] = 3
        match = r"key\(s\) \['_sweep_every'\] that no World snapshot has"
    elif breakage == "a cache not a tuple":  # (a bare TypeError named nothing)
        bad["world"]["_cand_cache"] = 5
        match = r"state\['_cand_cache'\] must be None or a tuple"
    elif breakage == "chunk counts not a list":  # (accepted, then a crash at the next step)
        bad["world"]["_chunk_q"] = None
        match = r"state\['_chunk_q'\] must be a list of 2 ints"
    elif breakage == "event of another time":
        bad["world"]["_se"] = bad["world"]["_gen"].events[bad["world"]["_i"] + 1]
        match = r"state\['_se'\] and state\['_event'\] must be the script's event"
    elif breakage == "version not an int":
        bad["world"]["_version"] = "3"
        match = r"state\['_version'\] must be an int >= 0"
    elif breakage == "flag not a bool":
        bad["world"]["_done"] = None
        match = r"state\['_done'\] must be a bool"
    else:
        bad["np_random_seed"] = "7"
        match = r"state\['np_random_seed'\] must be an int >= -1"
    with pytest.raises(ValueError, match=match):
        a.set_state(bad)
    assert a.world.event.index == b.world.event.index
    assert _digest(a, 150) == _digest(b, 150)


@pytest.mark.parametrize("breakage", ["env part of an earlier snapshot", "ids of another time", "steps",
                                      "last_outcome", "last_action out of range", "last_action not ints"])
def test_snapshot_whose_parts_disagree_is_rejected_before_anything_changes(breakage):
    """The env part and the world part of one snapshot must belong together; a mixed or corrupted one
    is a ValueError naming the part, and the env (world, counters) stays as it was. (The ids check
    ran after the world had been replaced, as a RuntimeError, leaving a half-restored env.)"""
    a, b = _twins()
    early = a.get_state()
    _write_both(a, b, 3)
    late = a.get_state()
    _write_both(a, b, 3)
    bad = copy.deepcopy(late)
    if breakage == "env part of an earlier snapshot":
        bad["env"] = copy.deepcopy(early["env"])
        match = r"state\['env'\]\['ids'\]|state\['env'\]\['steps'\]"
    elif breakage == "ids of another time":
        bad["env"]["ids"] = list(early["env"]["ids"]) + ["ep_999999"]
        match = r"state\['env'\]\['ids'\]"
    elif breakage == "steps":
        bad["env"]["steps"] = late["env"]["steps"] + 1
        match = r"state\['env'\]\['steps'\]"
    elif breakage == "last_outcome":
        bad["env"]["last_outcome"] = "oops"
        match = "'last_outcome' must be None or a world.sim.Outcome"
    elif breakage == "last_action out of range":
        bad["env"]["last_action"] = (9, 0)
        match = "'last_action' must be None or"
    else:
        bad["env"]["last_action"] = ("1", 0.5)
        match = "'last_action' must be None or"
    with pytest.raises(ValueError, match=match):
        a.set_state(bad)
    assert a._steps == b._steps and a.world.event.index == b.world.event.index
    assert _digest(a, 150) == _digest(b, 150)


def test_restored_generator_survives_a_read_of_np_random_seed():
    """set_state sets gymnasium's np_random_seed with the generator (left None on a fresh env, the
    first read of the property replaced the restored generator by a fresh one, so the next unseeded
    reset was not the snapshot's next episode)."""
    import gymnasium as gym

    a = gym.make("MemGym/Life-Easy-v0")
    a.reset(seed=7)
    snap = a.unwrapped.get_state()
    assert snap["np_random_seed"] == 7
    want = canon(a.reset()[0])
    for receiver in ("fresh", "used"):
        c = gym.make("MemGym/Life-Easy-v0")
        if receiver == "used":
            c.reset(seed=123)
        c.unwrapped.set_state(snap)
        assert c.np_random_seed == 7  # the snapshot's, not 123 nor a fresh entropy seed
        assert canon(c.reset()[0]) == want
    old = copy.deepcopy(snap)
    del old["np_random_seed"]  # a snapshot taken before the key existed: seed unknown
    c = gym.make("MemGym/Life-Easy-v0")
    c.unwrapped.set_state(old)
    assert c.np_random_seed == -1 and canon(c.reset()[0]) == want


def test_snapshot_taken_after_steps_past_the_end_restores():
    env = MemoryEnv("life-easy", horizon=10)
    env.reset(seed=0)
    for _ in range(10):
        env.step(WRITE)
    _, reward, _, truncated, info = env.step(np.array([0, 0]))  # past the end: a penalised no-op
    assert truncated and info["invalid_action"]
    snap = env.get_state()
    env.set_state(snap)
    assert env._steps == 11


def test_set_state_keeps_the_world_object_that_agents_hold():
    a, _ = _twins()
    world = a.world
    snap = a.get_state()
    a.step(WRITE)
    a.set_state(snap)
    assert a.world is world and world.event.index == snap["world"]["_i"]


def test_snapshot_of_another_config_switches_the_env_to_it():
    hard = MemoryEnv("life-hard")
    hard.reset(seed=0)
    for _ in range(95):
        hard.step(WRITE)
    snap = hard.get_state()
    easy = MemoryEnv("life-easy")
    easy.reset(seed=0)
    easy.set_state(snap)
    assert easy.config == hard.config and easy.config.capacity == 80
    assert _digest(easy, 600) == _digest(hard, 600)  # past the easy horizon of 100, as the hard env


def test_snapshot_that_would_change_the_spaces_is_refused():
    wide = MemoryEnv("life-easy", n_candidates=12)
    wide.reset(seed=0)
    a, b = _twins()
    with pytest.raises(ValueError, match="n_candidates 8 -> 12"):
        a.set_state(wide.get_state())
    assert a.K == 8 and a.config == b.config
    assert _digest(a, 150) == _digest(b, 150)


def test_world_refuses_a_snapshot_of_another_config():
    hard = World(WorldConfig.preset("life", "hard"), seed=0)
    easy = World(WorldConfig.preset("life", "easy"), seed=0)
    before = pickle.dumps(easy.get_state())
    with pytest.raises(ValueError, match=r"another config \(differs in .*capacity"):
        easy.set_state(hard.get_state())
    assert pickle.dumps(easy.get_state()) == before



def test_snapshot_without_its_config_is_refused_before_anything_changes():
    """docs/env.md: the world part of a snapshot has every key a World snapshot has, and its config is
    not a cache. Without it the snapshot was restored under this env's config: a life-medium store of
    30 memories went into an env of capacity 10 (and its clock could run past this horizon), with
    nothing in the clipped observation to show it. Refused, naming the field, this env's own snapshot
    too (nothing shows which config a snapshot without one was taken under)."""
    medium = MemoryEnv("life-medium")
    medium.reset(seed=1)
    for _ in range(30):
        medium.step(WRITE)
    a, b = _twins(capacity=10)
    for snap in (medium.get_state(), a.get_state()):
        del snap["world"]["config"]
        with pytest.raises(ValueError, match=r"set_state: state\['world'\] has no 'config'"):
            a.set_state(snap)
    assert a.config == b.config and len(a.world.store) == len(b.world.store) == 5
    assert _digest(a, 150) == _digest(b, 150)


def test_world_refuses_a_snapshot_without_its_config():
    medium = World(WorldConfig.preset("life", "medium"), seed=0)
    for _ in range(30):
        medium.apply(Op.WRITE)
        medium.advance()
    easy = World(WorldConfig.preset("life", "easy").replace(capacity=10), seed=0)
    before = pickle.dumps(easy.get_state())
    for snap in (medium.get_state(), easy.get_state()):
        del snap["config"]
        with pytest.raises(ValueError, match=r"set_state: the snapshot has no 'config'"):
            easy.set_state(snap)
    assert pickle.dumps(easy.get_state()) == before


# ---------------------------------------------------------------------- actions
def test_non_finite_action_is_a_clear_error():
    a, b = _twins()
    for bad in (np.array([np.inf, 0]), np.array([0, -np.inf]), np.array([np.nan, 1])):
        with pytest.raises(ValueError, match=r"action must be \[op, slot\] with op in 0..6"):
            a.step(bad)
    assert _digest(a, 100) == _digest(b, 100)


def test_invalid_action_record_is_a_penalised_noop_step():
    a, b = _twins()
    _, r_bad, _, _, info = a.step(InvalidAction("because"))
    _, r_noop, _, _, info_noop = b.step(np.array([0, 0]))
    assert info["invalid_action"] is True and info["invalid_reason"] == "because"
    assert info["outcome_op"] == "NOOP" and info_noop["invalid_action"] is False
    assert r_bad == pytest.approx(r_noop + a.config.rewards["invalid"])
    assert a.world.event.index == b.world.event.index



@pytest.mark.parametrize("reason", [None, "", 5, b"bad command"])
def test_invalid_action_needs_a_reason(reason):
    """InvalidAction(None) was applied as a valid NOOP (no penalty, invalid_action False): None is the
    "valid" sentinel of the step below it. A reason is a non-empty string, checked when it is built."""
    with pytest.raises(ValueError, match=r"InvalidAction: reason must be a non-empty string .*got " + re.escape(repr(reason))):
        InvalidAction(reason)


# ---------------------------------------------------------------------- FlattenAction
def test_flatten_action_rejects_what_is_not_one_integer():
    env = FlattenAction(MemoryEnv("life-easy"))
    twin = FlattenAction(MemoryEnv("life-easy"))
    env.reset(seed=0)
    twin.reset(seed=0)
    for bad in (9.9, "12", [1, 0], np.array([1, 0]), np.inf, True, None, -1, 56):
        with pytest.raises(ValueError, match=r"action must be (an integer )?in 0..55 \(op \* K \+ slot"):
            env.step(bad)
    for good in (8, np.int64(8), np.array(8), np.array([8]), 8.0, np.uint8(8)):
        assert pickle.dumps(env.step(good)) == pickle.dumps(twin.step(8))


def test_flatten_action_masked_out_means_invalid_when_taken():
    env = FlattenAction(MemoryEnv("life-easy"))
    env.reset(seed=2)
    rng = np.random.default_rng(0)
    mask = env.action_masks()
    seen = {True: 0, False: 0}
    for _ in range(400):
        a = int(rng.integers(env.action_space.n))
        _, _, _, trunc, info = env.step(a)
        if mask[a] and info["invalid_reason"] == NO_CLUSTER:  # hidden, so not masked: refused after the fact
            assert a // env.K == Op.REFLECT
        else:
            assert info["invalid_action"] == (not mask[a]), (a, info["invalid_reason"])
        seen[bool(mask[a])] += 1
        mask = info["action_mask"]
        if trunc:
            mask = env.reset()[1]["action_mask"]
    assert seen[True] > 20 and seen[False] > 20
    env.reset(seed=2)
    _, _, _, _, info = env.step(1 * env.K + 3)  # WRITE on slot 3: an alias of WRITE (slot 0)
    assert info["invalid_action"] and "WRITE takes no target: its flat action is 8" in info["invalid_reason"]



@pytest.mark.parametrize("wrapper", ["flatten", "text raise", "text noop"])
def test_action_wrappers_pass_an_invalid_action_through(wrapper):
    """InvalidAction is stepped through every wrapper in between (its docstring), with its own reason:
    FlattenAction refused it as a flat action that is not an integer; TextInterface parsed it as a command
    (on_error="raise" raised, else the reason became "malformed command: ...")."""
    from envs.wrappers import TextInterface

    if wrapper == "flatten":
        env = FlattenAction(gym.wrappers.RecordEpisodeStatistics(MemoryEnv("life-easy")))
    else:
        env = TextInterface(MemoryEnv("life-easy"), on_error=wrapper.split()[1])
    twin = MemoryEnv("life-easy")
    env.reset(seed=0)
    twin.reset(seed=0)
    _, reward, _, _, info = env.step(InvalidAction("from a wrapper above"))
    _, want, _, _, _ = twin.step(InvalidAction("from a wrapper above"))
    assert info["invalid_action"] is True and info["invalid_reason"] == "from a wrapper above"
    assert "parse_error" not in info and reward == want and env.unwrapped._steps == 1


@pytest.mark.parametrize("stack", ["text over flatten", "text over masked flatten", "text over text",
                                   "flatten over text", "flatten over flatten"])
def test_action_wrappers_refuse_an_env_whose_actions_are_not_the_memory_envs(stack):
    """TextInterface and FlattenAction map their action to the base env's [op, slot]: over a wrapper that
    changed the action space (each other), they were built, then every step failed, valid commands
    included, with an error about flat integers or command strings instead of the wrapper order."""
    env = gym.make("MemGym/Life-Easy-v0")
    inner, outer = stack.split(" over ")
    if inner == "flatten":
        env, got = FlattenAction(env), r"Discrete\(56\)"
    elif inner == "masked flatten":
        env, got = MaskInObservation(FlattenAction(env)), r"Discrete\(56\)"
    else:
        env, got = TextInterface(env), r"Text\("
    wrapper = TextInterface if outer == "text" else FlattenAction
    with pytest.raises(TypeError, match=rf"{wrapper.__name__} needs the MemoryEnv's \[op, slot\] actions "
                                        rf"\(MultiDiscrete\(\[7 8\]\)\) from the env it wraps, got {got}"):
        wrapper(env)


def test_action_wrappers_take_a_stack_that_keeps_the_memory_envs_actions():
    """(the refusal above reads the action space: an observation wrapper in between is no problem)"""
    text = TextInterface(MaskInObservation(gym.make("MemGym/Life-Easy-v0")), on_error="noop")
    text.reset(seed=0)
    assert text.step("WRITE")[4]["invalid_action"] is False
    flat = FlattenAction(MaskInObservation(gym.make("MemGym/Life-Easy-v0"), layout="flat"))
    flat.reset(seed=0)
    assert flat.step(flat.K)[4]["outcome_op"] == "WRITE"


# ---------------------------------------------------------------------- wrappers and the ecosystem
@pytest.mark.parametrize("wrap", [FlattenAction, MaskInObservation,
                                  lambda e: MaskInObservation(FlattenAction(e)),
                                  lambda e: MaskInObservation(e, layout="flat"),
                                  lambda e: MaskInObservation(FlattenAction(e), layout="flat"),
                                  lambda e: TextInterface(e, on_error="noop")])
def test_wrapped_made_envs_pass_the_checker_and_remake_from_their_spec(wrap):
    env = wrap(gym.make("MemGym/Recall-Easy-v0"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # (the checker's own note that a wrapped env is not the raw one, and nothing else)
        warnings.filterwarnings("ignore", message=".*is different from the unwrapped version")
        check_env(env, skip_render_check=True)
        remade = gym.make(env.spec)
    assert type(remade) is type(env) and remade.spec == env.spec
    assert remade.observation_space == env.observation_space  # e.g. MaskInObservation's layout too
    o1, _ = env.reset(seed=4)
    o2, _ = remade.reset(seed=4)
    assert pickle.dumps(o1) == pickle.dumps(o2)


def test_text_interface_default_raise_fails_the_checker_with_the_allowed_commands():
    """docs/env.md: the checker passes with on_error="noop" (the test above); with the default "raise" the
    checker's sampled Text action is a malformed command, and the ValueError names the allowed commands."""
    env = TextInterface(gym.make("MemGym/Recall-Easy-v0"))
    assert env.on_error == "raise"
    env.action_space.seed(0)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is different from the unwrapped version")
        with pytest.raises(ValueError, match=r"allowed: NOOP, WRITE, QUERY, UPDATE <slot\|id>"):
            check_env(env, skip_render_check=True)
    doc = " ".join((Path(__file__).resolve().parents[1] / "docs" / "env.md").read_text().split())
    assert '`TextInterface(env, on_error="noop")`)' in doc and 'default `on_error="raise"` does not' in doc


def test_text_interface_bad_commands_pass_through_inner_wrappers():
    env = TextInterface(gym.wrappers.RecordEpisodeStatistics(gym.make("MemGym/Life-Easy-v0", max_episode_steps=10)),
                        on_error="noop")
    with pytest.warns(UserWarning, match=r"horizon=10\)"):  # (a limit below the horizon: FinalMetrics says so)
        env.reset(seed=0)
    for _ in range(10):
        _, _, _, trunc, info = env.step("bogus")
        assert info["invalid_action"] and "malformed command" in info["invalid_reason"]
        assert "parse_error" in info
    assert trunc and info["episode"]["l"] == 10  # the time limit and the statistics counted them


def test_text_interface_rejects_non_ascii_digits_with_the_command_list():
    env = TextInterface(MemoryEnv("recall-easy"))
    env.reset(seed=0)
    with pytest.raises(ValueError, match="neither a slot number"):
        env.parse("LINK ²")


# ---------------------------------------------------------------------- config
def test_dict_config_reads_like_a_yaml_file():
    from envs.memory_env import resolve_config

    assert resolve_config({"family": "life"}) == WorldConfig.preset("life", "easy") == resolve_config({})
    assert resolve_config({"capacity": 64}) == WorldConfig.preset("life", "easy").replace(capacity=64)
    assert resolve_config({"family": "recall", "difficulty": "hard"}) == WorldConfig.preset("recall", "hard")
    MemoryEnv(config={"family": "life"}).reset(seed=0)
    with pytest.raises(ConfigError, match="mix: the life family draws its threads from mix"):
        WorldConfig(family="life", mix={})


def test_a_config_switch_keeps_the_seeded_spaces():
    """reset(options=...) and a config-switching set_state built new space objects, losing the seed a
    user gave action_space (a space carries its own RNG): samples afterwards came from OS entropy."""
    def samples(switch):
        env = gym.make("MemGym/Life-Easy-v0")
        env.action_space.seed(0)
        space = env.unwrapped.action_space
        first = [env.action_space.sample().tolist() for _ in range(3)]
        switch(env.unwrapped)
        assert env.unwrapped.action_space is space
        return first + [env.action_space.sample().tolist() for _ in range(5)]

    def by_options(env):
        env.reset(seed=0, options={"family": "recall"})

    def by_snapshot(env):
        env.set_state(MemoryEnv(config="recall-easy").get_state())

    expected = gym.spaces.MultiDiscrete([7, 8], seed=0)
    plain = [expected.sample().tolist() for _ in range(8)]
    assert samples(by_options) == plain
    assert samples(by_snapshot) == plain


def test_state_pickled_before_new_counters_plays_to_the_end():
    """Snapshots and pickles taken before a field existed: the world's stats without `request_leaks`
    (added with the end-of-episode check of erasure requests) crashed at the last event with an
    AttributeError; a MaskInObservation without `layout` crashed at its first step."""
    from envs.wrappers import MaskInObservation

    env = MemoryEnv(config="erasure-easy")
    env.reset(seed=0)
    for _ in range(50):
        env.step(np.array([1, 0]))
    state = env.get_state()
    del state["world"]["_stats"].__dict__["request_leaks"]  # (what an older snapshot holds)
    env2 = MemoryEnv(config="erasure-easy")
    env2.reset(seed=5)
    env2.set_state(state)
    truncated = False
    while not truncated:
        _, _, _, truncated, info = env2.step(np.array([1, 0]))
    assert info["metrics"]["request_leaks"] >= 0

    wrapped = MaskInObservation(gym.make("MemGym/Recall-Easy-v0"), layout="flat")
    wrapped.reset(seed=0)
    del wrapped.__dict__["layout"]  # (pickled before layouts existed: the flat form)
    old = pickle.loads(pickle.dumps(wrapped))
    obs, *_ = old.step(np.array([0, 0]))
    assert "action_mask" in obs and "event" in obs


@pytest.mark.parametrize("kwargs", [{"family": "erasure"}, {"difficulty": "hard"}, {"difficulty": "endless"}])
def test_family_and_difficulty_are_not_overrides(kwargs):
    """gym.make("MemGym/Update-Easy-v0", family="erasure") ran update episodes reported as erasure (the
    preset's horizon, capacity and mix stayed): refused, naming the field and how to get that world."""
    key, value = next(iter(kwargs.items()))
    with pytest.raises(ConfigError, match=rf"{key}={value!r}: {key} names the world's preset.*WorldConfig.preset"):
        gym.make("MemGym/Update-Easy-v0", **kwargs)
    with pytest.raises(ConfigError, match=f"{key}="):
        MemoryEnv("update-easy", **kwargs)
    with pytest.raises(ConfigError, match=f"{key}="):
        WorldConfig.preset("update", "easy").replace(**kwargs)
    # the same value is no change; the other world comes from its own preset
    assert WorldConfig.preset("update", "easy").replace(family="update", difficulty="easy") == \
        WorldConfig.preset("update", "easy")
    env = MemoryEnv("update-easy")
    env.reset(seed=0, options=kwargs)
    assert env.config == WorldConfig.preset(kwargs.get("family", "update"), kwargs.get("difficulty", "easy"))


def test_train_recipe_refuses_family_override():
    from agents.train_config import TrainConfig, TrainConfigError

    data = {"env": {"id": "MemGym/Life-Easy-v0", "overrides": {"horizon": 50, "family": "erasure"}}}
    with pytest.raises(TrainConfigError, match="family"):
        TrainConfig.from_dict(data)


def test_a_redundant_family_keyword_does_not_block_a_reset_switch():
    env = gym.make("MemGym/Life-Easy-v0", difficulty="easy")  # equal to the id's: accepted
    env.reset(seed=0, options={"difficulty": "medium"})
    assert env.unwrapped.config == WorldConfig.preset("life", "medium")


def test_config_kwarg_on_a_registered_id_goes_over_that_ids_preset(tmp_path):
    """gym.make("MemGym/Recall-Hard-v0", config={"capacity": 10}) ran a life-easy world under the
    recall-hard id (the registered config was replaced, and a dict without a family means life)."""
    env = gym.make("MemGym/Recall-Hard-v0", config={"capacity": 10})
    assert env.unwrapped.config == WorldConfig.preset("recall", "hard").replace(capacity=10)
    assert gym.make("MemGym/Recall-Hard-v0", config="recall-hard").unwrapped.config == \
        WorldConfig.preset("recall", "hard")
    assert gym.make(env.spec).unwrapped.config == env.unwrapped.config  # (the spec keeps both)
    for other, world in [("configs/world/erasure-easy.yaml", "erasure-easy"), ({"family": "erasure"}, "erasure-hard"),
                         ("life-easy", "life-easy"), (WorldConfig.preset("recall", "easy"), "recall-easy")]:
        with pytest.raises(ConfigError, match=rf"gives the {world} world, but this env id stands for 'recall-hard'"):
            gym.make("MemGym/Recall-Hard-v0", config=other)
    with pytest.raises(ConfigError, match="preset must be"):
        MemoryEnv(preset="recall")
    # a YAML file of fields goes over the id's preset too (it was read as recall-easy and refused)
    fields = tmp_path / "cap10.yaml"
    fields.write_text("capacity: 10\n")
    assert gym.make("MemGym/Life-Easy-v0", config=str(fields)).unwrapped.config == \
        WorldConfig.preset("life", "easy").replace(capacity=10)
    assert gym.make("MemGym/Recall-Hard-v0", config=str(fields)).unwrapped.config == \
        WorldConfig.preset("recall", "hard").replace(capacity=10)
    # a world without an id: the same refusal (building its hint raised "no env for 'recall' at 'endless'")
    for endless in ("recall-endless", {"difficulty": "endless"}):
        with pytest.raises(ConfigError, match="gives the recall-endless world.*build envs.MemoryEnv"):
            gym.make("MemGym/Recall-Hard-v0", config=endless)
    assert MemoryEnv().config == WorldConfig.preset("life", "easy")  # no preset: as before


@pytest.mark.parametrize("overrides, expected", [
    ({"capacity": np.int64(10)}, {"capacity": 10}),
    ({"forget_threshold": np.float32(-1.0)}, {"forget_threshold": -1.0}),
    ({"n_candidates": np.int32(12), "decay": np.float64(0.4)}, {"n_candidates": 12, "decay": 0.4}),
])
def test_numpy_numbers_are_accepted_as_plain_numbers(overrides, expected):
    # a sweep over np.arange / np.linspace hit "must be an integer ..., got int64 10"
    env = gym.make("MemGym/Life-Easy-v0", **overrides)
    cfg = env.unwrapped.config
    for key, value in expected.items():
        assert getattr(cfg, key) == value and type(getattr(cfg, key)) is type(value)
    assert cfg == WorldConfig.preset("life", "easy").replace(**expected)
    with pytest.raises(ConfigError, match="capacity: must be an integer"):
        gym.make("MemGym/Life-Easy-v0", capacity=np.bool_(True))


@pytest.mark.parametrize("bad", ["abc", None, 2.5, 0, -1, True])
def test_text_interface_max_length_is_checked_by_name(bad):
    with pytest.raises(ValueError, match=r"max_length must be an integer >= 1"):
        TextInterface(gym.make("MemGym/Life-Easy-v0"), max_length=bad)


def test_a_yaml_of_fields_without_a_family_is_the_envs_default_world_as_a_dict_is(tmp_path):
    from envs.memory_env import resolve_config

    path = tmp_path / "h.yaml"
    path.write_text("horizon: 80\n")
    assert resolve_config(str(path)) == resolve_config({"horizon": 80}) == \
        WorldConfig.preset("life", "easy").replace(horizon=80)


def test_a_preset_kwarg_of_another_world_is_refused_under_a_registered_id():
    # gym.make("MemGym/Life-Easy-v0", preset="recall-hard") ran recall-hard under the life-easy id
    with pytest.raises(ConfigError, match=r"preset='recall-hard': this env id stands for 'life-easy'"):
        gym.make("MemGym/Life-Easy-v0", preset="recall-hard")
    env = gym.make("MemGym/Life-Easy-v0", preset="life-easy")  # its own preset: fine
    assert env.unwrapped.config == WorldConfig.preset("life", "easy")
    assert gym.make(env.spec).unwrapped.config == env.unwrapped.config
    assert MemoryEnv(preset="recall-hard").config == WorldConfig.preset("recall", "hard")  # no id: fine


def test_event_vector_stays_read_only_after_a_pickle_of_a_world_mid_event():
    import pickle

    w = World(WorldConfig.preset("life", "easy"), seed=0)
    for _ in range(5):
        w.apply(Op.WRITE if w.event.kind == "statement" else Op.NOOP)
        w.advance()
    assert not w.event_vector().flags.writeable
    for copy_ in (pickle.loads(pickle.dumps(w)),):
        vec = copy_.event_vector()
        with pytest.raises(ValueError):
            vec[:] = 0.0
        assert np.array_equal(copy_.event_vector(), w.event_vector())


@pytest.mark.parametrize(("a", "k"), [(57, 8), (56, 8), (-1, 8), (True, 8), (1.0, 8), (0, 0), (0, True)])
def test_unflatten_action_refuses_a_flat_action_out_of_range_by_name(a, k):
    """``unflatten_action(57, 8)`` raised a bare IndexError, ``(-1, 8)`` returned [-1, 7] and ``(56, 8)``
    [7, 0] (no op 7): out-of-range input is a ValueError naming the range, as FlattenAction gives."""
    from envs.wrappers import unflatten_action

    with pytest.raises(ValueError, match=r"must be an integer"):
        unflatten_action(a, k)


def test_unflatten_action_maps_every_flat_action_in_range():
    from envs.wrappers import InvalidAction, unflatten_action

    k = 3
    seen = set()
    for a in range(7 * k):
        out = unflatten_action(np.int64(a), k)
        if isinstance(out, InvalidAction):
            assert a % k and a // k in (0, 1, 5)  # NOOP, WRITE, QUERY aliases on a slot other than 0
        else:
            assert out.tolist() == [a // k, a % k]
            seen.add(a)
    assert len(seen) == 7 * k - 3 * (k - 1)


def test_a_mix_is_refused_on_a_non_life_env_and_on_a_reset_switch_away_from_life():
    """gym.make("MemGym/Recall-Easy-v0", mix={"erasure": 1.0}) ran erasure threads under the name
    recall-easy. Refused; and a life env's mix override refuses a reset switch to another family
    (it would mix families there) before anything changes, naming mix."""
    with pytest.raises(ConfigError, match="mix: only the life family mixes families; recall allows"):
        gym.make("MemGym/Recall-Easy-v0", mix={"erasure": 1.0})
    a, b = (MemoryEnv("life-easy", mix={"recall": 1.0, "erasure": 1.0}) for _ in range(2))
    a.reset(seed=3)
    b.reset(seed=3)
    with pytest.raises(ConfigError, match="reset options family='recall'.*mix: only the life family mixes families"):
        a.reset(seed=5, options={"family": "recall"})
    assert a.config == b.config and a.config.family == "life"
    assert _digest(a, 60) == _digest(b, 60)  # same episode, same RNG (nothing was reseeded)
    a.reset(seed=0, options={"difficulty": "medium"})  # life to life keeps the mix
    assert a.config == WorldConfig.preset("life", "medium").replace(mix={"recall": 1.0, "erasure": 1.0})


def test_builder_pickled_with_rows_of_another_shape_resumes_mid_episode(monkeypatch):
    """A FeatureBuilder pickled by an earlier release kept its per-memory row cache, whose rows had
    another shape (12 fields before the packed tier / confidence bytes): loaded mid-episode, the first
    step raised ValueError (not enough values to unpack). Loading rebuilds the rows from the store, so
    the loaded env continues exactly as the original."""
    from envs.features import FeatureBuilder

    env = MemoryEnv(config="life-easy")
    env.reset(seed=3)
    for _ in range(10):
        env.step(np.array([1, 0]))
    rows = env.unwrapped._features._static
    assert rows
    for mid in list(rows):
        rows[mid] = rows[mid][:12]  # (the older release's shape)
    with monkeypatch.context() as m:
        m.delattr(FeatureBuilder, "__getstate__")  # (the older class pickled its whole __dict__)
        blob = pickle.dumps(env)
    loaded = pickle.loads(blob)
    env.unwrapped._features._static.clear()  # (the original, repaired by hand, is the reference)
    rng = np.random.default_rng(0)
    for _ in range(60):
        action = np.array([rng.integers(0, 7), rng.integers(0, env.K)])
        a, b = env.step(action), loaded.step(action)
        for key in a[0]:
            np.testing.assert_array_equal(a[0][key], b[0][key])
        assert a[1:4] == b[1:4]
        assert a[4]["candidate_ids"] == b[4]["candidate_ids"]
    assert "_static" not in pickle.loads(pickle.dumps(env))._features.__dict__ or \
        not pickle.loads(pickle.dumps(env))._features._static  # (no cache of records in a pickle)
