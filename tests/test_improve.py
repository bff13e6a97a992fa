"""agents.improve: branched demonstrations (exact counterfactual gains), the gain model, the relabelling,
and the `pretrain.improve` keys of the training recipe."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from agents.base import NOOP, UPDATE, WRITE, AgentView, make_agent  # noqa: E402
from agents.improve import (  # noqa: E402
    Demonstrations,
    GainModel,
    GatedAgent,
    branch_refusal,
    collect_demonstrations,
    fit_gain_model,
    improved_actions,
)
from agents.train import make_env  # noqa: E402
from agents.train_config import TrainConfig, TrainConfigError  # noqa: E402

ENV = "MemGym/Life-Easy-v0"
SMALL = {"horizon": 24}


def _replay_with(seed: int, step: int, alternative: int) -> float:
    """Return from ``step`` on when versioned plays, except that ``alternative`` replaces its op at
    ``step``: a fresh env replayed from the reset (no snapshot), the plain way to get what a branch computes."""
    return _replay_agent_with("versioned", seed, step, alternative)


def test_branch_gain_equals_a_replayed_counterfactual():
    demo = collect_demonstrations(ENV, SMALL, "versioned", [7], alternatives=("NOOP",))
    rewards = np.asarray(demo.rewards)
    branched = [i for i, d in enumerate(demo.deltas) if "NOOP" in d]
    assert len(branched) >= 5 and demo.branches == len(branched)
    for i in branched:
        assert int(demo.actions[i][0]) != NOOP  # the agent's own op is never branched on
    for i in branched[:4]:
        counterfactual = _replay_with(7, i, NOOP)
        assert demo.deltas[i]["NOOP"] == pytest.approx(counterfactual - rewards[i:].sum(), abs=1e-9)
        assert demo.alternatives[i]["NOOP"][0] == NOOP
    assert demo.returns == [pytest.approx(rewards.sum(), abs=1e-9)]
    # unbranched steps (questions, requests, the agent's own NOOPs) carry no gain
    assert all(not demo.deltas[i] for i in range(len(demo.deltas)) if i not in branched)


def test_workers_give_the_same_demonstrations_as_one_process():
    one = collect_demonstrations(ENV, SMALL, "versioned", [3, 4, 5], alternatives=("NOOP",), workers=1)
    two = collect_demonstrations(ENV, SMALL, "versioned", [3, 4, 5], alternatives=("NOOP",), workers=2)
    assert one.rewards == two.rewards and one.deltas == two.deltas and one.returns == two.returns
    for a, b in zip(one.obs, two.obs):
        assert all(np.array_equal(a[k], b[k]) for k in a)
    assert all(np.array_equal(a, b) for a, b in zip(one.actions, two.actions))


def _synthetic(n_episodes: int = 12, steps: int = 50, seed: int = 0) -> Demonstrations:
    """Events of two kinds (one-hot ``event``): kind A's NOOP gain is +0.06, kind B's is -1.25 with
    probability 0.3 and +0.05 otherwise (mean -0.34, yet positive 70% of the time)."""
    rng = np.random.default_rng(seed)
    demo = Demonstrations.empty()
    for _ in range(n_episodes):
        for t in range(steps):
            kind = int(rng.random() < 0.5)
            obs = {"event": np.eye(2, dtype=np.float32)[kind], "event_kind": np.array([1, 0, 0], dtype=np.float32)}
            gain = 0.06 if kind == 0 else (-1.25 if rng.random() < 0.3 else 0.05)
            demo.obs.append(obs)
            demo.masks.append(np.ones(9, dtype=bool))
            demo.actions.append(np.array([WRITE, 0]))
            demo.rewards.append(0.0)
            demo.ends.append(t == steps - 1)
            demo.deltas.append({"NOOP": gain})
            demo.alternatives.append({"NOOP": np.array([NOOP, 0])})
        demo.returns.append(0.0)
    return demo


def test_gain_model_estimates_the_mean_not_the_majority():
    demo = _synthetic()
    predict, stats = fit_gain_model(demo, "NOOP", ["event", "event_kind"], seed=0, epochs=60, ensemble=2)
    obs = {"event": np.eye(2, dtype=np.float32), "event_kind": np.tile(np.array([1, 0, 0], dtype=np.float32), (2, 1))}
    a, b = predict(obs)
    assert a == pytest.approx(0.06, abs=0.03)
    assert b < -0.15  # the mean (-0.34), although most single episodes say NOOP would gain
    assert stats["samples"] == 600 and stats["holdout_episodes"] == 2 and stats["ensemble"] == 2
    again, _ = fit_gain_model(demo, "NOOP", ["event", "event_kind"], seed=0, epochs=60, ensemble=2)
    assert fit_gain_model(demo, "WRITE", ["event"])[0] is None  # nothing branched on WRITE
    assert np.array_equal(again(obs), predict(obs))  # seeded: the same fit twice


class _Table(GainModel):
    """A gain model that looks its answer up by the event's first number."""

    def __init__(self, by_event: dict[int, float]):
        super().__init__(["event"], [])
        self.by_event = by_event

    def __call__(self, obs):
        return np.array([self.by_event[int(v[0])] for v in obs["event"]])


def test_improved_actions_relabel_only_above_the_margin():
    demo = Demonstrations.empty()
    steps = [(WRITE, {"NOOP": 0.5}), (UPDATE, {"NOOP": 0.1}), (WRITE, {"NOOP": -1.0}), (5, {}),
             (NOOP, {"AGENT": 0.3})]
    for t, (op, gains) in enumerate(steps):
        demo.obs.append({"event": np.array([t], dtype=np.float32)})
        demo.actions.append(np.array([op, 1]))
        demo.masks.append(np.ones(9, dtype=bool))
        demo.rewards.append(0.0)
        demo.ends.append(t == len(steps) - 1)
        demo.deltas.append(gains)
        demo.alternatives.append({k: (np.array([NOOP, 0]) if k == "NOOP" else np.array([UPDATE, 1])) for k in gains})
    demo.returns.append(0.0)
    models = {"NOOP": _Table({0: 0.2, 1: 0.04, 2: 0.9, 4: 9.0}), "AGENT": _Table({4: 0.5})}
    labels, stats = improved_actions(demo, models, 0.05)
    assert labels[:, 0].tolist() == [NOOP, UPDATE, NOOP, 5, UPDATE]
    assert labels[4].tolist() == [UPDATE, 1]  # undoing a gate restores the whole action, slot included
    assert stats["relabelled"] == 3 and stats["changed"] == {"NOOP->AGENT": 1, "WRITE->NOOP": 2}
    assert stats["gain_per_episode"] == pytest.approx(0.5 - 1.0 + 0.3)  # what the relabelled steps gained here


def test_gain_model_numpy_forward_matches_its_layers():
    rng = np.random.default_rng(1)
    layers = [(rng.normal(size=(4, 3)).astype(np.float32), rng.normal(size=4).astype(np.float32)),
              (rng.normal(size=(1, 4)).astype(np.float32), rng.normal(size=1).astype(np.float32))]
    model = GainModel(["event"], [layers, layers])
    x = rng.normal(size=(5, 3)).astype(np.float32)
    expected = np.tanh(x @ layers[0][0].T + layers[0][1]) @ layers[1][0].T + layers[1][1]
    assert np.allclose(model({"event": x}), expected[:, 0], atol=1e-6)
    assert model.one({"event": x[2]}) == pytest.approx(float(expected[2, 0]), abs=1e-6)


def test_gated_agent_replaces_statement_actions_where_the_gain_pays():
    """A gate that always predicts +1 for NOOP turns every non-NOOP statement action into NOOP, remembers
    what it replaced, and leaves questions and requests alone; a second gate can undo the first."""
    env = make_env(ENV, SMALL)

    class Const(GainModel):
        def __init__(self, value):
            super().__init__(["event_kind"], [])
            self.value = value

        def __call__(self, obs):
            return np.full(len(obs["event_kind"]), self.value)

    gated = GatedAgent(make_agent("versioned"), {"NOOP": Const(1.0)}, 0.05)
    undo = GatedAgent(GatedAgent(make_agent("versioned"), {"NOOP": Const(1.0)}, 0.05), {"AGENT": Const(1.0)}, 0.05)
    plain = make_agent("versioned")
    seen = {"gated": 0, "kept": 0}
    for agent in (plain, gated, undo):
        agent.reset(2)
    obs, info = env.reset(seed=2)
    view = AgentView(env.unwrapped)
    for agent in (plain, gated, undo):
        agent.attach(view)
    while True:
        view.refresh()
        a = np.asarray(plain.act(obs, info))
        g = gated.act(obs, info)
        u = undo.act(obs, info)
        statement = obs["event_kind"][0] > 0.5
        if statement and a[0] != NOOP:
            assert g[0] == NOOP and np.array_equal(gated.last_gated, a)
            assert np.array_equal(u, a) and undo.last_gated[0] == NOOP  # the outer gate undid the inner one
            seen["gated"] += 1
        else:
            assert np.array_equal(g, a) and gated.last_gated is None and np.array_equal(u, a)
            seen["kept"] += 1
        obs, _, term, trunc, info = env.step(a)
        if term or trunc:
            break
    assert seen["gated"] > 3 and seen["kept"] > 3


@pytest.mark.parametrize(
    "patch,needle",
    [
        ({"improve": "best"}, "key 'pretrain.improve'"),
        ({"improve_ops": ["FORGET"]}, "key 'pretrain.improve_ops': unknown name 'FORGET'; allowed: NOOP, WRITE"),
        ({"improve_ops": "NOOP"}, "key 'pretrain.improve_ops' must be a non-empty list"),
        ({"improve_inputs": ["events"]}, "key 'pretrain.improve_inputs': unknown name 'events'"),
        ({"margin": "big"}, "key 'pretrain.margin' must be a finite number"),
        ({"workers": 0}, "key 'pretrain.workers' must be an integer >= 1"),
        ({"improve_rounds": 0}, "key 'pretrain.improve_rounds' must be an integer >= 1"),
    ],
)
def test_bad_improve_keys_name_the_key(patch, needle):
    data = {"env": {"id": ENV}, "pretrain": {"agent": "versioned", **patch}}
    with pytest.raises(TrainConfigError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        TrainConfig.from_dict(data)


def test_improve_keys_round_trip():
    cfg = TrainConfig.from_dict({"env": {"id": ENV}, "pretrain": {"agent": "versioned", "improve": "rollout",
                                                                  "improve_ops": ["noop"], "margin": 0.03}})
    assert cfg.pretrain.improve_ops == ("NOOP",) and cfg.pretrain.margin == 0.03
    again = TrainConfig.from_dict(cfg.to_dict())
    assert again.pretrain == cfg.pretrain


def test_second_round_is_played_by_the_gated_agent_and_branches_on_undoing():
    """Round 2 of the warm start: the round-1 gate (here: skip every statement write) plays, and each
    gated step is branched on AGENT (undo the skip), each other statement step on NOOP."""

    class Const(GainModel):
        def __init__(self):
            super().__init__(["event_kind"], [])

        def __call__(self, obs):
            return np.ones(len(obs["event_kind"]))

    gated = GatedAgent(make_agent("versioned"), {"NOOP": Const()}, 0.03)
    demo = collect_demonstrations(ENV, SMALL, gated, [11], alternatives=("NOOP", "AGENT"))
    undo = [i for i, d in enumerate(demo.deltas) if "AGENT" in d]
    assert undo and not any("NOOP" in demo.deltas[i] for i in undo)
    for i in undo:
        assert demo.actions[i][0] == NOOP and demo.alternatives[i]["AGENT"][0] in (WRITE, UPDATE)
    plain = collect_demonstrations(ENV, SMALL, "versioned", [11])
    assert sum(a[0] != NOOP for a in demo.actions) < sum(a[0] != NOOP for a in plain.actions)


def test_warm_start_with_rollout_improvement_records_what_it_changed(tmp_path):
    """`pretrain.improve: rollout` in a (tiny) training run: branched demonstrations, a gain model per
    alternative, relabelled steps, and a policy that follows the relabelled ops."""
    import json

    import yaml

    from agents import train as T

    pre = {"agent": "versioned", "episodes": 4, "epochs": 60, "batch_size": 16, "learning_rate": 0.003,
           "improve": "rollout", "margin": -10.0}  # a margin below every gain: every branched step relabelled
    recipe = {"env": {"id": ENV, "overrides": {"horizon": 30}}, "algo": "maskable_ppo",
              "hyperparams": {"n_steps": 64, "batch_size": 32, "n_epochs": 1}, "policy_kwargs": {"net_arch": [64]},
              "n_envs": 1, "total_steps": 64, "checkpoint_freq": 64, "progress_bar": False, "pretrain": pre,
              "eval": {"freq": 64, "episodes": 1, "baselines": [], "test_episodes": 1}}
    cfg = tmp_path / "improve.yaml"
    cfg.write_text(yaml.safe_dump(recipe))
    result = T.train(cfg, seed=0, out_dir=tmp_path / "run", test_eval=False)
    assert result.finished
    stats = json.loads((tmp_path / "run" / "pretrain.json").read_text())
    imp = stats["improve"]
    assert imp["method"] == "rollout" and imp["ops"] == ["NOOP"] and len(imp["rounds"]) == 1
    assert imp["rounds"][0]["gain_models"]["NOOP"]["samples"] > 0
    assert imp["relabelled"] == imp["branched"] > 0  # every step the agent did not NOOP on a statement
    assert set(imp["changed"]) <= {"WRITE->NOOP", "UPDATE->NOOP"}
    assert stats["op_agreement"] > 0.9 > stats["op_agreement_with_agent"]


def _replay_agent_with(agent_name: str, seed: int, step: int, alternative: int) -> float:
    """The return from ``step`` on when ``agent_name`` plays, except that ``alternative`` replaces its op
    at ``step`` (a fresh env and agent, replayed from the reset)."""
    env = make_env(ENV, SMALL)
    base = env.unwrapped
    agent = make_agent(agent_name)
    agent.reset(seed)
    obs, info = env.reset(seed=seed)
    view = AgentView(base)
    agent.attach(view)
    total, t = 0.0, 0
    while True:
        view.refresh()
        action = np.asarray(agent.act(obs, info)).copy()
        if t == step:
            slots = np.flatnonzero(np.asarray(info["action_mask"])[7:])
            action = np.array([alternative, int(slots[0]) if len(slots) else 0])
        obs, reward, terminated, truncated, info = env.step(action)
        if t >= step:
            total += float(reward)
        t += 1
        if terminated or truncated:
            return total


def test_branch_gain_of_a_teacher_with_state_equals_a_replay():
    # generative_agents keeps a running importance sum that decides when it REFLECTs: a branch must start
    # from the agent's state at the branch point, not from where the recorded episode left it
    demo = collect_demonstrations(ENV, SMALL, "generative_agents", [7], alternatives=("NOOP",))
    rewards = np.asarray(demo.rewards)
    branched = [i for i, d in enumerate(demo.deltas) if "NOOP" in d]
    assert len(branched) >= 10
    for i in branched:
        counterfactual = _replay_agent_with("generative_agents", 7, i, NOOP)
        assert demo.deltas[i]["NOOP"] == pytest.approx(counterfactual - rewards[i:].sum(), abs=1e-9), i


def test_demonstrations_record_a_flat_alias_as_the_noop_it_was():
    """A teacher that plays a flat model's masked alias (``InvalidAction``, as ``agents.sb3_agent`` returns
    for one): the env plays it as a penalised no-op and the demonstration records NOOP there."""
    from envs.memory_env import InvalidAction

    class Alias:
        name = "alias"
        copyable = True  # (its one counter copies exactly)

        def reset(self, seed):
            self.n = 0

        def attach(self, view):
            pass

        def act(self, observation, info):
            self.n += 1
            return InvalidAction("WRITE takes no target") if self.n % 2 else np.array([WRITE, 0])

    demo = collect_demonstrations("MemGym/Life-Easy-v0", {"horizon": 20}, Alias(), [3], alternatives=("NOOP",))
    acts = np.asarray(demo.actions)
    assert acts.shape == (20, 2)
    assert (acts[0::2] == [NOOP, 0]).all() and (acts[1::2, 0] == WRITE).all()
    assert all(r == pytest.approx(-0.05) or r < -0.05 for r in demo.rewards[0::2])  # penalised, never rewarded
    assert all(not demo.alternatives[i] for i in range(0, 20, 2))  # no branches on a step that did nothing


def test_no_gain_model_when_every_branch_is_held_out():
    """Two demonstration episodes, branches on NOOP only in the second (the held-out one): the training set
    was empty, the ensemble kept its seeded initial weights and its outputs (about +-0.06) crossed the
    margin and relabelled steps. No model then; and one held-out sample gives a variance of 0, not NaN
    with a torch warning."""
    import warnings

    demo = _synthetic(n_episodes=2, steps=10)
    for i in range(10):  # the first episode: branched on another alternative only
        demo.deltas[i] = {"QUERY": 0.0}
    model, stats = fit_gain_model(demo, "NOOP", ["event", "event_kind"], seed=0, epochs=5)
    assert model is None and stats["train_samples"] == 0 and stats["samples"] == 10
    demo.deltas[0] = {"NOOP": 0.06}  # one training sample, one held-out episode of 10
    demo.deltas[11:] = [{"QUERY": 0.0}] * 9  # ... of which one sample
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model, stats = fit_gain_model(demo, "NOOP", ["event", "event_kind"], seed=0, epochs=5)
    assert model is not None and stats["train_samples"] == 1 and stats["holdout_variance"] == 0.0


def test_branching_refuses_an_agent_that_cannot_be_copied_before_playing(tmp_path, monkeypatch):
    """A branch replays from copy.deepcopy of the agent: a memsys: system whose client held a lock crashed the
    run in the warm start with `TypeError: cannot pickle '_thread.lock' object`, and one whose memories live
    in a server had every branch run on (and write into) the one library, every gain silently wrong. Such an
    agent (a memsys: spec, or any agent not declaring copyable = True) is refused before any episode."""
    import textwrap

    from agents import improve

    (tmp_path / "locked_sys_for_improve.py").write_text(textwrap.dedent('''
        import threading
        from agents.memory_system import TinyMemorySystem

        class Locked(TinyMemorySystem):
            def __init__(self):
                self._lock = threading.Lock()  # as a client's socket or connection: it does not copy
                super().__init__()

        def make():
            return Locked()
        '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    played = []
    real_episode = improve._episode
    monkeypatch.setattr(improve, "_episode", lambda job: played.append(job) or real_episode(job))

    class Undeclared:  # an agent that does not say whether a copy of it is faithful
        name = "undeclared"

        def reset(self, seed):
            pass

        def act(self, observation, info):
            return np.array([NOOP, 0])

    for agent, needle in (("memsys:locked_sys_for_improve:make", "'memsys:locked_sys_for_improve:make' is a memsys:"),
                          (Undeclared(), "agent 'undeclared' (Undeclared) does not declare that it can be copied"),
                          (GatedAgent(make_agent("memsys:locked_sys_for_improve:make"), {}, 0.0),
                           "agent 'gated' (GatedAgent) does not declare")):
        with pytest.raises(ValueError, match="argument 'agent'") as err:
            collect_demonstrations(ENV, SMALL, agent, [3], alternatives=("NOOP",))
        assert needle in str(err.value), err.value
    assert played == []
    # without branching nothing is copied: plain demonstrations of the same system are played
    plain = collect_demonstrations(ENV, SMALL, "memsys:locked_sys_for_improve:make", [3])
    assert len(plain.actions) == 24 and plain.branches == 0 and len(played) == 1
    # memgym's own agents declare it (tiny_memory's memories are a dict in this process), and a gated agent
    # is as copyable as the agent it gates
    for ok in ("versioned", "random", "generative_agents", "tiny_memory", GatedAgent(make_agent("versioned"), {}, 0.0)):
        assert branch_refusal(ok) is None, ok


def test_bad_arguments_of_the_public_functions_name_the_argument_and_the_allowed_values(monkeypatch):
    """Called directly (not through the recipe's checks): an unknown or lower-case alternative, or a str for
    the list, was a bare `tuple.index` error after an env and agent were built; a misspelled observation key a
    bare KeyError; empty demonstrations a numpy stack error."""
    from agents import improve

    monkeypatch.setattr(improve, "_episode", lambda job: pytest.fail("an episode was played"))
    for alternatives, needle in ((("noop",), "unknown name 'noop'; allowed: NOOP, WRITE, AGENT"),
                                 (("SKIP",), "unknown name 'SKIP'; allowed: NOOP, WRITE, AGENT"),
                                 ("NOOP", "argument 'alternatives' must be a list of names from "
                                          "['NOOP', 'WRITE', 'AGENT'] (or empty), got 'NOOP'")):
        with pytest.raises(ValueError) as err:
            collect_demonstrations(ENV, SMALL, "versioned", [3], alternatives=alternatives)
        assert needle in str(err.value), err.value
    demo = _synthetic(n_episodes=2, steps=10)
    for inputs, needle in ((("evnt",), "argument 'inputs': unknown observation key 'evnt'; allowed: event, "
                                       "event_kind, candidates, candidate_mask, store"),
                           ("event", "argument 'inputs' must be a non-empty list of observation keys"),
                           ((), "argument 'inputs' must be a non-empty list of observation keys")):
        with pytest.raises(ValueError) as err:
            fit_gain_model(demo, "NOOP", inputs, epochs=1, ensemble=1)
        assert needle in str(err.value), err.value
    labels, stats = improved_actions(Demonstrations.empty(), {}, 0.02)
    assert labels.shape == (0, 2) and labels.dtype == np.int64
    assert stats == {"branched": 0, "relabelled": 0, "changed": {}, "gain_per_episode": 0.0}
