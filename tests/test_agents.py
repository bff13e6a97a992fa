"""Agents: registry, the rules of each baseline, the MemorySystem adapter, the oracle, SB3 models."""

from __future__ import annotations

import numpy as np
import pytest

from agents import base
from agents.base import FORGET, NOOP, QUERY, REFLECT, UPDATE, WRITE, Candidate, make_agent
from agents.bench import BASELINES, evaluate, make_env, run_episode

# ----------------------------------------------------------------------------------- registry


def test_every_baseline_is_registered_and_follows_the_protocol():
    for name in BASELINES:
        agent = make_agent(name)
        assert isinstance(agent, base.Agent)
        assert agent.name == name


def test_unknown_agent_names_the_valid_ones():
    with pytest.raises(ValueError) as err:
        make_agent("wirte_all")
    msg = str(err.value)
    assert "wirte_all" in msg
    for name in BASELINES:
        assert name in msg
    assert "sb3:PATH" in msg


def test_ablated_oracle_spec():
    agent = make_agent("oracle[-LINK,-REFLECT]")
    assert agent.disabled_ops == ("LINK", "REFLECT")
    assert agent.name == "oracle[-LINK,-REFLECT]"
    with pytest.raises(ValueError, match="allowed"):
        make_agent("oracle[-FLY]")
    with pytest.raises(ValueError, match="model path"):
        make_agent("sb3:")


# ------------------------------------------------------------------------- rules on a stub view


class StubView:
    """The part of agents.base.AgentView the heuristics use, with hand-made candidates."""

    def __init__(self, kind, text, cands, n_live=3, capacity=40, invalid=()):
        self.kind, self.text, self._cands = kind, text, cands
        self.n_live, self.capacity, self._invalid = n_live, capacity, set(invalid)

    def candidates(self, observation):
        return self._cands

    def valid(self, op, slot=0):
        return (op, slot) not in self._invalid and op not in self._invalid

    def slot_of(self, mid):
        return next((c.slot for c in self._cands if c.memory_id == mid), None)


def cand(slot, text, sim=0.0, act=0.9, age=5.0, semantic=False, superseded=False, cue=0.0):
    return Candidate(slot=slot, memory_id=f"ep_{slot:06d}", text=text, similarity=sim, activation=act,
                     importance=0.5, age=age, semantic=semantic, recent=False, superseded=superseded,
                     cue_overlap=cue, links=0.0)


def decide(name, view, **kw):
    agent = make_agent(name, **kw)
    agent.reset(0)
    agent.attach(view)
    return agent.decide({}, {})


def test_abstain_stores_nothing_and_answers_unknown():
    assert decide("abstain", StubView("statement", "Alice lives in Paris.", [])) == (NOOP, 0)
    assert decide("abstain", StubView("question", "Where does Alice live?", [])) == (QUERY, 0)
    assert decide("abstain", StubView("request", "Please forget where Alice lives.", [])) == (NOOP, 0)
    from agents.bench import evaluate

    for family in ("abstention", "life"):
        for row in evaluate("abstain", family, [10_000, 10_001]):
            v = row["verdicts"]
            assert row["live_memories_mean"] == 0 and row["ops"]["WRITE"] == 0
            # an empty store answers "unknown": right on an unknown gold, else no answer (0)
            assert v["correct"] + v["abstained"] == row["questions"] and v["correct"] > 0
            assert row["return"] == pytest.approx(v["correct"] - 0.01 * row["questions"], abs=1e-9)


def test_write_all_writes_statements_queries_questions_ignores_requests():
    assert decide("write_all", StubView("statement", "Alice lives in Paris.", [])) == (WRITE, 0)
    assert decide("write_all", StubView("question", "Where does Alice live?", [])) == (QUERY, 0)
    assert decide("write_all", StubView("request", "Please forget where Alice lives.", [])) == (NOOP, 0)


def test_versioned_updates_same_key_skips_duplicates_and_forgets_on_request():
    cands = [cand(0, "Bob works at Acme.", sim=0.1), cand(1, "Alice lives in Paris.", sim=0.6)]
    assert decide("versioned", StubView("statement", "Alice lives in Lyon now.", cands)) == (UPDATE, 1)
    assert decide("versioned", StubView("statement", "Alice lives in Paris.", cands)) == (NOOP, 0)
    assert decide("versioned", StubView("statement", "Carol plays the cello.", cands)) == (WRITE, 0)
    # a superseded version is not the head of its chain
    old = [cand(1, "Alice lives in Paris.", sim=0.6, superseded=True)]
    assert decide("versioned", StubView("statement", "Alice lives in Lyon now.", old)) == (WRITE, 0)
    assert decide("versioned", StubView("request", "Please forget where Alice lives.", cands)) == (FORGET, 1)
    assert decide("versioned", StubView("request", "Forget it.", [])) == (NOOP, 0)


def test_mem0_thresholds_decide_add_update_noop_delete():
    view = lambda s: StubView("statement", "Dana now drives a red car.", [cand(2, "Dana drives a blue car.", sim=s)])  # noqa: E731
    assert decide("mem0", view(0.95)) == (NOOP, 0)
    assert decide("mem0", view(0.7)) == (UPDATE, 2)
    assert decide("mem0", view(0.2)) == (WRITE, 0)
    req = [cand(0, "x", sim=0.1), cand(3, "Dana's phone is 555-0101.", sim=0.5)]
    assert decide("mem0", StubView("request", "Forget Dana's phone number.", req)) == (FORGET, 3)
    assert decide("mem0", StubView("request", "Forget Dana's phone number.", [cand(0, "x", sim=0.1)])) == (NOOP, 0)


def test_fifo_folds_then_evicts_the_oldest_when_the_window_is_full():
    # the oldest (slot 1) shares a visible subject word and a topic word with slot 2: it looks consolidatable
    cands = [cand(0, "a b c", age=3), cand(1, "Ann swims on Monday.", age=30),
             cand(2, "Ann swims at noon.", age=10)]
    agent = make_agent("fifo")
    agent.reset(0)
    agent.attach(StubView("statement", "new fact here", cands, n_live=5, capacity=40))
    assert agent.decide({}, {}) == (WRITE, 0)
    agent.attach(StubView("statement", "new fact here", cands, n_live=39, capacity=40))
    assert agent.decide({}, {}) == (REFLECT, 1)
    assert agent.decide({}, {}) == (FORGET, 1)   # folded already: now evicted
    nofold = make_agent("fifo", fold=False)
    nofold.attach(StubView("statement", "x", cands, n_live=39, capacity=40))
    assert nofold.decide({}, {}) == (FORGET, 1)
    # nothing visible to consolidate it with (another subject; no shared topic word): evicted at once
    for other in ("Bob swims at noon.", "Ann sings at noon."):
        lone = make_agent("fifo")
        lone.attach(StubView("statement", "x", [cands[0], cands[1], cand(2, other, age=10)], n_live=39, capacity=40))
        assert lone.decide({}, {}) == (FORGET, 1), other


def test_fifo_evicts_a_folded_memory_when_it_is_visible_again_before_any_other():
    # the candidates follow the event: at the next statement the folded memory is often out of sight,
    # and fifo evicted whichever memory was then the oldest; the folded one stayed next to its summary
    import dataclasses

    def named(c, mid):
        return dataclasses.replace(c, memory_id=mid)

    cands = [named(cand(0, "a b c", age=3), "ep_a"), named(cand(1, "Ann swims on Monday.", age=30), "ep_ann"),
             named(cand(2, "Ann swims at noon.", age=10), "ep_noon")]
    agent = make_agent("fifo")
    agent.reset(0)
    agent.attach(StubView("statement", "new fact here", cands, n_live=39, capacity=40))
    assert agent.decide({}, {}) == (REFLECT, 1)
    elsewhere = [named(cand(0, "Bob rows.", age=2), "ep_bob"), named(cand(1, "Carl cooks stew daily.", age=50), "ep_carl")]
    agent.attach(StubView("statement", "other fact", elsewhere, n_live=39, capacity=40))
    assert agent.decide({}, {}) == (FORGET, 1)          # out of sight: the oldest visible one goes
    back = [named(cand(0, "Dan reads.", age=80), "ep_dan"), named(cand(1, "x y z", age=1), "ep_x"),
            named(cand(2, "Ann swims on Monday.", age=31), "ep_ann")]
    agent.attach(StubView("statement", "third fact", back, n_live=39, capacity=40))
    assert agent.decide({}, {}) == (FORGET, 2)          # visible again: evicted before the older Dan


def test_consolidatable_reads_visible_subject_and_topic_only():
    from agents.baselines import consolidatable

    a, b = cand(0, "Ann swims on Monday.", age=3), cand(1, "Ann swims on Friday.", age=3)
    assert consolidatable(a, [a, b]) and consolidatable(b, [a, b])
    assert not consolidatable(a, [a])                                          # no other episode
    assert not consolidatable(a, [a, cand(1, "Ann swims on Friday.", semantic=True)])  # a rule is no member
    assert not consolidatable(cand(0, "it swims.", age=3), [a, b])              # no visible subject
    assert not consolidatable(a, [a, cand(1, "Bob swims on Friday.")])         # no shared subject word
    assert not consolidatable(a, [a, cand(1, "Ann sang on Friday.")])          # no shared topic word
    assert not consolidatable(cand(0, "Ann swims.", semantic=True), [a, b])    # a rule is not a target


def test_importance_skips_low_scores_and_duplicates_and_evicts_lowest_score():
    long_fact = "Erin told me that her grandmother moved from Porto to Boston in the spring of 1998."
    cands = [cand(0, "Erin likes tea.", act=0.9, age=2), cand(1, "ok", act=0.1, age=80)]
    assert decide("importance", StubView("statement", long_fact, cands)) == (WRITE, 0)
    assert decide("importance", StubView("statement", "ok", cands)) == (NOOP, 0)  # below the threshold
    dup = [cand(0, long_fact, sim=1.0)]
    assert decide("importance", StubView("statement", long_fact, dup)) == (NOOP, 0)
    assert decide("importance", StubView("statement", long_fact, cands, n_live=40, capacity=40)) == (FORGET, 1)


def test_generative_agents_reflects_when_importance_accumulates():
    agent = make_agent("generative_agents", reflect_threshold=5.0)
    agent.reset(0)
    cands = [cand(0, "Fay ordered pizza on Friday.", sim=0.8, age=1), cand(1, "Gus sings.", sim=0.1, age=40),
             cand(2, "Fay ordered pasta on Friday.", sim=0.3, age=60)]
    ops = []
    for _ in range(6):
        agent.attach(StubView("statement", "Fay ordered pizza again on Friday.", cands))
        ops.append(agent.decide({}, {}))
    assert ops[0] == (WRITE, 0)
    assert (REFLECT, 0) in ops  # the most recent, relevant, important episode
    i = ops.index((REFLECT, 0))
    assert ops[i + 1] == (WRITE, 0)  # the sum restarts after a reflection


def test_actr_rehearsal_queries_when_a_repeated_memory_is_near_the_threshold():
    fading = [cand(0, "Hal lives in Oslo.", sim=0.95, act=0.55)]
    fresh = [cand(0, "Hal lives in Oslo.", sim=0.95, act=0.95)]
    paraphrase = [cand(0, "Hal lives in Oslo.", sim=0.7, act=0.55)]   # containment: a repeat
    other = [cand(0, "Ivy lives in Rome.", sim=0.6, act=0.52)]          # same template, new fact
    assert decide("actr_rehearsal", StubView("statement", "Hal lives in Oslo.", fading)) == (QUERY, 0)
    assert decide("actr_rehearsal", StubView("statement", "Hal lives in Oslo.", fresh)) == (WRITE, 0)
    assert decide("actr_rehearsal", StubView("statement", "Hal lives in Oslo, you know.", paraphrase)) == (QUERY, 0)
    assert decide("actr_rehearsal", StubView("statement", "Jon lives in Oslo.", other)) == (WRITE, 0)


def test_masked_choice_becomes_noop():
    agent = make_agent("write_all")
    agent.reset(0)
    agent.attach(StubView("statement", "Jo likes jazz.", [], invalid={WRITE}))
    mask = np.ones(7 + 8, dtype=bool)
    mask[WRITE] = False
    assert agent.act({"event_kind": np.array([1, 0, 0])}, {"action_mask": mask}).tolist() == [NOOP, 0]


# ------------------------------------------------------------------------------ on the real env


@pytest.mark.parametrize("name", BASELINES)
def test_each_baseline_plays_life_without_invalid_actions(name):
    env = make_env("life", "easy", {"horizon": 60})
    row, timing = run_episode(make_agent(name), env, 10_000)
    assert row["events"] == 60
    assert sum(row["ops"].values()) == 60
    if name != "random":
        assert row["invalid_actions"] == 0, row
    if name == "write_all":
        assert row["ops"]["FORGET"] == 0 and row["ops"]["WRITE"] > 0 and row["ops"]["QUERY"] == row["questions"]


def test_random_agent_samples_only_masked_entries_and_is_seeded():
    env = make_env("life", "easy", {"horizon": 40})
    agent = make_agent("random")
    agent.reset(1)
    obs, info = env.reset(seed=10_000)
    for _ in range(40):
        a = agent.act(obs, info)
        mask = np.asarray(info["action_mask"], dtype=bool)
        assert mask[a[0]]
        if a[0] in base.TARGETED:
            assert mask[7 + a[1]]
        obs, _, _, trunc, info = env.step(a)
        if trunc:
            break
    r1 = evaluate("random", "MemGym/Life-Easy-v0", [10_000, 10_001], overrides={"horizon": 40})
    r2 = evaluate("random", "MemGym/Life-Easy-v0", [10_000, 10_001], overrides={"horizon": 40})
    strip = lambda rows: [{k: v for k, v in r.items() if k != "timing"} for r in rows]  # noqa: E731
    assert strip(r1) == strip(r2)


def test_ablated_oracle_never_uses_the_removed_operation():
    rows = evaluate("oracle[-WRITE]", "life", [10_000], overrides={"horizon": 60})
    assert rows[0]["ops"]["WRITE"] == 0
    full = evaluate("oracle", "life", [10_000], overrides={"horizon": 60})
    assert full[0]["ops"]["WRITE"] > 0
    assert full[0]["return"] > rows[0]["return"]


# ---------------------------------------------------------------------------- memory systems


def test_tiny_memory_system_decisions():
    from agents.memory_system import TinyMemorySystem

    m = TinyMemorySystem()
    assert m.add("Kim lives in Rome.", {}) == [{"id": "m1", "event": "ADD"}]
    assert m.add("Kim lives in Rome.", {}) == [{"id": "m1", "event": "NONE"}]
    assert m.add("Kim lives in Milan.", {}) == [{"id": "m1", "event": "UPDATE"}]
    assert m.memories["m1"] == "Kim lives in Milan."
    assert m.add("Lee owns a boat.", {})[0]["event"] == "ADD"
    assert [h["id"] for h in m.search("Where does Kim live?", 5)] == ["m1"]
    assert m.delete("m1") and not m.delete("m1")


def test_memory_system_agent_mirrors_the_systems_decisions():
    from agents.memory_system import MemorySystemAgent, TinyMemorySystem

    class Counting(TinyMemorySystem):
        def reset(self):
            super().reset()
            self.events = []

        def add(self, text, metadata):
            out = super().add(text, metadata)
            self.events.append(out[0]["event"])
            return out

    system = Counting()
    agent = MemorySystemAgent(system)
    env = make_env("life", "easy", {"horizon": 60, "capacity": 100})  # room for every ADD
    row, _ = run_episode(agent, env, 10_002)
    assert row["invalid_actions"] == 0
    assert row["ops"]["WRITE"] + row["ops"]["UPDATE"] == sum(e in ("ADD", "UPDATE") for e in system.events)
    assert row["ops"]["QUERY"] == row["questions"]
    # every mirrored system memory maps to a live world memory or was erased with it
    assert set(agent._to_world) <= set(system.memories) | set(agent._deletes)
    with pytest.raises(TypeError, match="missing method"):
        MemorySystemAgent(object())


def test_memsys_spec_imports_a_factory():
    agent = make_agent("memsys:agents.memory_system:TinyMemorySystem")
    assert agent.name == "memsys:agents.memory_system:TinyMemorySystem"
    with pytest.raises(ValueError, match="cannot import"):
        make_agent("memsys:nope.nothing:X")


# -------------------------------------------------------------------------------------- SB3


@pytest.mark.slow
def test_sb3_models_are_detected_and_evaluated(tmp_path):
    pytest.importorskip("sb3_contrib")
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import A2C, DQN, PPO

    from agents.sb3_agent import SB3ModelError, detect_algorithm
    from envs.wrappers import FlattenAction

    env = make_env("recall", "easy", {"horizon": 30})
    small = {"n_steps": 32, "batch_size": 32, "n_epochs": 1}
    for cls, algo, kw, e in ((PPO, "ppo", small, env), (MaskablePPO, "maskable_ppo", small, env),
                             (A2C, "a2c", {"n_steps": 8}, env),
                             (DQN, "dqn", {"learning_starts": 0, "buffer_size": 64}, FlattenAction(env))):
        model = cls("MultiInputPolicy", e, seed=0, device="cpu", **kw)
        model.learn(32)
        path = tmp_path / algo / "model.zip"
        path.parent.mkdir()
        model.save(path)
        assert detect_algorithm(path) == algo
        rows = evaluate(f"sb3:{path}", "MemGym/Recall-Easy-v0", [10_000], overrides={"horizon": 30})
        assert rows[0]["events"] == 30 and rows[0]["agent"] == f"sb3:{path}"
        assert sum(rows[0]["ops"].values()) == 30
    # the model.json that `memgym train` writes next to the model wins over detection
    (tmp_path / "ppo" / "model.json").write_text('{"algo": "a2c"}')
    assert detect_algorithm(tmp_path / "ppo" / "model.zip") == "a2c"
    bad = tmp_path / "bad.zip"
    bad.write_text("not a zip")
    with pytest.raises(SB3ModelError, match="not a Stable-Baselines3"):
        detect_algorithm(bad)
    with pytest.raises(SB3ModelError, match="not found"):
        detect_algorithm(tmp_path / "missing.zip")


NO_RESET_MODULE = '''
from agents.memory_system import TinyMemorySystem

BUILT = []


class NoReset:
    """TinyMemorySystem's decisions without the optional reset()."""

    def __init__(self):
        self._inner = TinyMemorySystem()
        BUILT.append(self)

    def add(self, text, metadata):
        return self._inner.add(text, metadata)

    def search(self, query, k):
        return self._inner.search(query, k)

    def delete(self, id):
        return self._inner.delete(id)
'''


def test_memory_system_without_reset_starts_every_episode_empty(tmp_path, monkeypatch):
    (tmp_path / "no_reset_memsys.py").write_text(NO_RESET_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import no_reset_memsys

    spec = "memsys:no_reset_memsys:NoReset"
    env = {"id": "MemGym/Life-Easy-v0", "overrides": {"horizon": 60}}
    a, b = 10_003, 10_001

    def strip(row):
        return {k: v for k, v in row.items() if k != "timing"}

    both = evaluate(spec, env, [a, b])
    alone = evaluate(spec, env, [b])
    assert strip(both[1]) == strip(alone[0])       # b's episode does not depend on what ran before it
    assert strip(both[0]) == strip(evaluate(spec, env, [a])[0])
    assert both[1]["ops"]["WRITE"] > 0
    # a system object without reset and without a factory is copied: same result
    from agents.memory_system import MemorySystemAgent

    agent = MemorySystemAgent(no_reset_memsys.NoReset())
    rows = evaluate(agent, env, [a, b])
    assert [r["return"] for r in rows] == [both[0]["return"], both[1]["return"]]


def test_a_flat_model_plays_in_the_bench_as_it_trained_through_flatten_action(tmp_path):
    """A DQN (flat ``Discrete(7 * K)``) model's masked aliases (an untargeted op on a slot > 0) are
    penalised no-ops under FlattenAction, where it trained; the bench used to play WRITE on slot 3 as
    a WRITE. The bench's episode must be FlattenAction's, step for step."""
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import DQN

    from envs.wrappers import FlattenAction

    env = make_env("life", "easy", {"horizon": 40})
    flat_env = FlattenAction(make_env("life", "easy", {"horizon": 40}))
    k = flat_env.K
    model = DQN("MultiInputPolicy", flat_env, seed=0, device="cpu", learning_starts=0, buffer_size=64)
    path = tmp_path / "dqn.zip"
    model.save(path)
    agent = make_agent(f"sb3:{path}")
    # a fixed flat action sequence with aliases of every untargeted op, through the model's predict
    seq = [1 * k + 3, 0 * k + 2, 5 * k + 1, 1 * k, 3 * k + 1, 5 * k, 0]
    calls = [0]

    def predict(obs, deterministic=True, **_):
        a = seq[calls[0] % len(seq)]
        calls[0] += 1
        return np.array(a), None

    agent.model.predict = predict
    row, _ = run_episode(agent, env, seed=7)

    flat_env.reset(seed=7)
    total, invalid = 0.0, 0
    for i in range(40):
        _, r, _, truncated, info = flat_env.step(seq[i % len(seq)])
        total += r
        invalid += bool(info["invalid_action"])
        if truncated:
            break
    assert invalid >= 15  # the aliases (4 of every 7 actions), besides any masked targeted ones
    assert row["invalid_actions"] == invalid
    assert row["return"] == pytest.approx(total, abs=0)


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_a_stochastic_sb3_policy_plays_an_episode_as_a_function_of_its_seed(tmp_path, algo):
    """SB3Agent(deterministic=False) sampled from torch's global generator and never seeded it: the same
    seeds gave other returns on a second evaluate() in the same process. (DQN explores with NumPy's global
    generator and its action space, which seeding torch alone left unseeded.)"""
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import DQN, PPO

    from agents.sb3_agent import SB3Agent
    from envs.wrappers import FlattenAction

    env = make_env("life", "easy", {"horizon": 40})
    if algo == "ppo":
        model = PPO("MultiInputPolicy", env, seed=0, device="cpu", n_steps=32, batch_size=32, n_epochs=1)
    else:
        model = DQN("MultiInputPolicy", FlattenAction(env), seed=0, device="cpu", learning_starts=10,
                    buffer_size=64, exploration_final_eps=0.5)
        model.learn(60)
        assert model.exploration_rate >= 0.5  # (predict explores: the test is about its generators)
    path = tmp_path / f"{algo}.zip"
    model.save(path)
    agent = SB3Agent(path, deterministic=False)
    first = [r["return"] for r in evaluate(agent, "MemGym/Life-Easy-v0", [10_000, 10_001], overrides={"horizon": 40})]
    again = [r["return"] for r in evaluate(agent, "MemGym/Life-Easy-v0", [10_000, 10_001], overrides={"horizon": 40})]
    alone = [r["return"] for r in evaluate(agent, "MemGym/Life-Easy-v0", [10_001], overrides={"horizon": 40})]
    assert first == again and alone == first[1:]


def test_ablated_oracle_agent_converts_ops_as_the_world_does():
    """OracleAgent(disabled_ops=...) read a number with OP_NAMES[int(o)]: 1.9 and True disabled WRITE,
    -1 disabled FORGET, and a bare "FORGET" was refused letter by letter. It now takes what the world
    oracle takes (names in any case, Op members, ints, decimal strings) and refuses the rest by name."""
    from agents.oracle import OracleAgent
    from world import Op

    assert OracleAgent(disabled_ops=["forget", Op.LINK, 1, np.int64(5), "4"]).disabled_ops == (
        "WRITE", "LINK", "REFLECT", "QUERY", "FORGET")
    # canonical, as make_agent's spec: each op once, in the operations' order
    agent = OracleAgent(disabled_ops=["FORGET", "LINK", "LINK"])
    assert agent.disabled_ops == ("LINK", "FORGET") and agent.name == "oracle[-LINK,-FORGET]"
    assert agent.name == make_agent("oracle[-FORGET,-LINK,-LINK]").name
    for bad in (1.9, True, -1, 0, "NOOP", "FLY", 7, None):
        with pytest.raises(ValueError, match=r"disabled_ops: unknown operation .*allowed"):
            OracleAgent(disabled_ops=[bad])
    with pytest.raises(TypeError, match=r"disabled_ops must be a list of ops.*\(one op: \['FORGET'\]\)"):
        OracleAgent(disabled_ops="FORGET")
