"""Demonstrations for the warm start, optionally improved by branched rollouts (one policy-iteration step).

A baseline agent (e.g. ``versioned``) plays training-pool episodes; every step is recorded
(observation, action mask, action, reward, end). With ``alternatives``, each *statement* step is also
branched: the env's :meth:`~envs.MemoryEnv.get_state` snapshot is restored, an alternative operation
``b`` (e.g. NOOP instead of the agent's WRITE) is taken, and the agent plays on to the end of the
episode. The agent's own state (counters, RNG) is snapshotted with the env, right after it chose
``a``, and every branch starts from a copy of it. Because the world's script does not depend on the
agent, the branch differs from the recorded trajectory only through ``b``, and

    delta(s, b) = G(s, b then agent) - G(s, agent) = Q^agent(s, b) - Q^agent(s, a)

is that episode's exact counterfactual gain of ``b`` over the agent's own choice ``a``. The greedy
policy with respect to ``Q^agent`` is at least as good as the agent (policy improvement theorem;
Sutton & Barto 2018, sec. 4.2; Bertsekas's "rollout" algorithm; as classification: Lagoudakis & Parr
2003). One episode's gain is mostly noise (whether a later question happens to need the memory), so
:func:`fit_gain_model` regresses the *mean* gain on what the observation shows, and
:func:`improved_actions` replaces the agent's action where that mean exceeds a margin; the warm start
clones the result. :class:`GatedAgent` is that improved policy as an agent, so that a further round
plays it and branches again (also on undoing its own replacements).

Only public observations reach the learner: the branches run the same env and the same agent, and
nothing privileged is read (the oracle is refused as a teacher by the config).
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from agents.base import N_OPS, OP_NAMES

__all__ = ["Demonstrations", "GainModel", "GatedAgent", "branch_refusal", "collect_demonstrations", "fit_gain_model",
           "improved_actions"]


@dataclasses.dataclass
class Demonstrations:
    """Steps of the demonstration episodes, concatenated in seed order.

    For a branched (statement) step ``i``, ``alternatives[i]`` maps an alternative's name (``NOOP``,
    ``WRITE``, or ``AGENT``: the action a :class:`GatedAgent` replaced) to its action and ``deltas[i]``
    maps it to ``Q(s_i, alternative) - Q(s_i, a_i)``; both are empty elsewhere.
    """

    obs: list[dict[str, np.ndarray]]
    masks: list[np.ndarray]
    actions: list[np.ndarray]
    rewards: list[float]
    ends: list[bool]
    deltas: list[dict[str, float]]
    alternatives: list[dict[str, np.ndarray]]
    returns: list[float]  # one per episode
    branches: int = 0

    @classmethod
    def empty(cls) -> Demonstrations:
        return cls([], [], [], [], [], [], [], [])

    def extend(self, other: Demonstrations) -> None:
        for f in ("obs", "masks", "actions", "rewards", "ends", "deltas", "alternatives", "returns"):
            getattr(self, f).extend(getattr(other, f))
        self.branches += other.branches


# ------------------------------------------------------------------------------------------ gain model
class GainModel:
    """Predicted mean gain of an alternative: an ensemble of small tanh MLPs, numpy only (pickle-able,
    cheap to call once per step from an agent). ``inputs``: the observation keys it reads."""

    def __init__(self, inputs: Sequence[str], members: list[list[tuple[np.ndarray, np.ndarray]]]):
        self.inputs = tuple(inputs)
        self.members = members  # per member: [(W, b), ...] with y = x @ W.T + b, tanh between layers

    def features(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        n = len(obs[self.inputs[0]])
        return np.concatenate([np.asarray(obs[k], dtype=np.float32).reshape(n, -1) for k in self.inputs], 1)

    def __call__(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """Gains for a batch (every key stacked on a first axis)."""
        x = self.features(obs)
        total = np.zeros(len(x), dtype=np.float64)
        for layers in self.members:
            h = x
            for j, (w, b) in enumerate(layers):
                h = h @ w.T + b
                if j < len(layers) - 1:
                    h = np.tanh(h)
            total += h[:, 0]
        return total / len(self.members)

    def __deepcopy__(self, memo: dict) -> GainModel:
        return self  # never changed after fitting: copies of an agent (branch snapshots) share it

    def one(self, obs: dict[str, np.ndarray]) -> float:
        return float(self({k: np.asarray(obs[k])[None] for k in self.inputs})[0])


def _statement(obs: dict[str, np.ndarray]) -> bool:
    return bool(np.asarray(obs["event_kind"])[0] > 0.5)  # EVENT_KINDS[0] == "statement"


def choose(margin: float, gains: dict[str, float]) -> str | None:
    """The alternative with the highest predicted gain above ``margin`` (first listed on a tie), or None."""
    best, best_gain = None, margin
    for name, g in gains.items():
        if g > best_gain:
            best, best_gain = name, g
    return best


def _alternative(name: str, gated: np.ndarray | None, mask: np.ndarray) -> np.ndarray:
    """The action of an alternative: the replaced action for ``AGENT``, else the op with an allowed slot."""
    if name == "AGENT":
        return np.asarray(gated, dtype=np.int64)
    return np.array([OP_NAMES.index(name), _slot_for(mask)], dtype=np.int64)


def applicable(action: np.ndarray, gated: np.ndarray | None, names: Sequence[str], mask: np.ndarray) -> list[str]:
    """Alternatives that differ from ``action`` and are allowed here."""
    out = []
    for name in names:
        if name == "AGENT":
            if gated is not None:
                out.append(name)
        elif int(action[0]) != OP_NAMES.index(name) and mask[OP_NAMES.index(name)]:
            out.append(name)
    return out


class GatedAgent:
    """An agent improved by gain models: on a statement, the alternative with the highest predicted mean
    gain above ``margin`` replaces the inner agent's action (the policy of one policy-iteration step).
    ``last_gated`` is the action it replaced at the last step (None if it did not), so a further
    round can branch on undoing it (``AGENT``)."""

    name = "gated"

    def __init__(self, inner: Any, models: dict[str, GainModel], margin: float):
        self.inner = inner
        self.models = dict(models)
        self.margin = float(margin)
        self.last_gated: np.ndarray | None = None

    @property
    def copyable(self) -> bool:
        """As the inner agent: a copy of a gated agent copies its inner agent (the gain models are shared)."""
        return getattr(self.inner, "copyable", False) is True

    def reset(self, seed: int | None) -> None:
        self.last_gated = None
        self.inner.reset(seed)

    def attach(self, view) -> None:
        if hasattr(self.inner, "attach"):
            self.inner.attach(view)

    def act(self, observation: dict, info: dict) -> np.ndarray:
        from envs.memory_env import InvalidAction

        raw = self.inner.act(observation, info)
        self.last_gated = None
        if isinstance(raw, InvalidAction):  # (a flat model's masked alias: nothing to gate, played as is)
            return raw
        action = np.asarray(raw, dtype=np.int64).reshape(-1)
        if not _statement(observation):
            return action
        mask = np.asarray(info["action_mask"], dtype=bool)
        inner_gated = getattr(self.inner, "last_gated", None)
        names = applicable(action, inner_gated, list(self.models), mask)
        best = choose(self.margin, {n: self.models[n].one(observation) for n in names})
        if best is None:
            return action
        self.last_gated = action
        return _alternative(best, inner_gated, mask)


def _slot_for(mask: np.ndarray) -> int:
    slots = np.flatnonzero(mask[N_OPS:])
    return int(slots[0]) if len(slots) else 0


def _play_out(env, agent, view, obs, info) -> float:
    total = 0.0
    while True:
        view.refresh()
        obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
        total += float(reward)
        if terminated or truncated:
            return total


def _make(agent: Any):
    from agents.base import make_agent

    return make_agent(agent) if isinstance(agent, str) else copy.deepcopy(agent)


def branch_refusal(agent: Any) -> str | None:
    """Why ``agent`` (a spec or an agent object) cannot be branched faithfully, or None if it can.

    A branch replays from a ``copy.deepcopy`` of the agent, which is exact only for an agent whose state
    is all in this process, and only the agent can know that: it must declare ``copyable = True``
    (:class:`agents.base.BaseAgent`; memgym's baselines and ``tiny_memory`` do). A ``memsys:`` spec is
    refused without being built: a memory library's state may live in a server or a database that a
    copy does not duplicate (every branch would run on, and write into, the one library), or its client
    may not copy at all."""
    if isinstance(agent, str) and agent.strip().startswith("memsys:"):
        return (f"{agent.strip()!r} is a memsys: memory system, whose memories may live outside this process "
                "(a server, a database) where a copy does not reach them, and whose client may not copy at all")
    if isinstance(agent, str):
        from agents.base import make_agent

        agent, label = make_agent(agent), repr(agent)
    else:
        label = f"{getattr(agent, 'name', type(agent).__name__)!r} ({type(agent).__name__})"
    if getattr(agent, "copyable", False) is not True:
        return (f"agent {label} does not declare that it can be copied (a class attribute copyable = True, "
                "for an agent whose state is all in-process Python objects, so that copy.deepcopy plays on "
                "exactly as the original)")
    return None


def _copy_agent(agent: Any, view: Any) -> Any:
    """A deep copy of the agent's own state (counters, RNG, ...) that shares ``view``: a branch plays the
    same env, restored from its snapshot, so only the agent's state needs copying."""
    return copy.deepcopy(agent, {id(view): view})


def _episode(job: tuple) -> Demonstrations:
    """One demonstration episode (a module-level function so that a process pool can run it)."""
    env_id, overrides, agent_spec, seed, names = job
    from agents.base import AgentView
    from agents.train import make_env
    from envs.memory_env import InvalidAction

    env = make_env(env_id, overrides)
    base = env.unwrapped
    agent = _make(agent_spec)
    agent.reset(seed)
    obs, info = env.reset(seed=seed)
    view = AgentView(base)
    agent.attach(view)
    demo = Demonstrations.empty()
    # per branched step: (step, env snapshot, agent snapshot, alternatives). The agent is copied right
    # after it chose its action, as in a plain re-run in which that action is replaced: a branch then
    # starts from the agent state of that moment, not from where the recorded episode left the agent
    # (an agent that keeps state, e.g. generative_agents' importance sum, would play on differently).
    snaps: list[tuple[int, Any, Any, dict[str, np.ndarray]]] = []
    while True:
        view.refresh()
        chosen = agent.act(obs, info)
        invalid = isinstance(chosen, InvalidAction)
        # a flat model's masked alias is played as it is (a penalised no-op); the demonstration records
        # what took effect, NOOP, since the student's action space has no such alias
        action = np.zeros(2, dtype=np.int64) if invalid else np.asarray(chosen, dtype=np.int64).reshape(-1)
        mask = np.asarray(base.action_masks(), dtype=bool)
        if names and not invalid and base.world.event.kind == "statement":
            gated = getattr(agent, "last_gated", None)
            alts = {name: _alternative(name, gated, mask) for name in applicable(action, gated, names, mask)}
            if alts:
                snaps.append((len(demo.actions), base.get_state(), _copy_agent(agent, view), alts))
        demo.obs.append(obs)
        demo.masks.append(mask)
        demo.actions.append(action)
        obs, reward, terminated, truncated, info = env.step(chosen if invalid else action)
        demo.rewards.append(float(reward))
        demo.ends.append(bool(terminated or truncated))
        demo.deltas.append({})
        demo.alternatives.append({})
        if terminated or truncated:
            break
    rewards = np.asarray(demo.rewards)
    to_go = np.cumsum(rewards[::-1])[::-1]  # undiscounted return from each step (episodes are finite)
    demo.returns.append(float(to_go[0]))
    for i, snap, agent_snap, alts in snaps:
        for name, alt in alts.items():
            base.set_state(snap)
            branch_agent = _copy_agent(agent_snap, view)  # a fresh copy per branch: a play-out changes it
            obs, reward, terminated, truncated, info = env.step(alt)
            g = float(reward)
            if not (terminated or truncated):
                g += _play_out(env, branch_agent, view, obs, info)
            demo.deltas[i][name] = g - float(to_go[i])
            demo.alternatives[i][name] = alt
            demo.branches += 1
    env.close()
    return demo


def collect_demonstrations(env_id: str, overrides: dict, agent: Any, seeds: Sequence[int], *,
                           alternatives: Sequence[str] = (), workers: int = 1, progress: bool = False) -> Demonstrations:
    """Play ``agent`` (a registered name or an agent object such as :class:`GatedAgent`) on ``seeds`` (in
    order); branch every statement step on ``alternatives`` (``NOOP``, ``WRITE``, ``AGENT``; any other
    name, or a str instead of a list, is a ``ValueError`` naming the argument and the allowed names).

    ``workers > 1`` spreads the episodes over a process pool (``spawn``); the result is the same as
    with one worker, in seed order.

    Branching copies the agent (``copy.deepcopy``), so with ``alternatives`` an agent that cannot be
    copied faithfully (:func:`branch_refusal`: a ``memsys:`` spec, or an agent not declaring
    ``copyable = True``) is refused with a ``ValueError`` before any episode is played.
    """
    from agents.train_config import IMPROVE_OPS

    allowed = (*IMPROVE_OPS, "AGENT")
    # (a str was split into its letters; a lower-case or unknown name failed deep in the first episode)
    if isinstance(alternatives, str) or not isinstance(alternatives, Sequence):
        raise ValueError(f"argument 'alternatives' must be a list of names from {list(allowed)} (or empty), "
                         f"got {alternatives!r}")
    for name in alternatives:
        if name not in allowed:
            raise ValueError(f"argument 'alternatives': unknown name {name!r}; allowed: {', '.join(allowed)} "
                             "(upper-case)")
    if alternatives:
        why = branch_refusal(agent)
        if why is not None:
            raise ValueError(f"argument 'agent': branching on alternatives replays every branch from a copy of the "
                             f"agent, but {why}; collect plain demonstrations (alternatives=()) with it instead")
    jobs = [(env_id, dict(overrides), agent, int(s), tuple(alternatives)) for s in seeds]
    out = Demonstrations.empty()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        what = "branched demonstrations" if alternatives else "demonstrations"
        label = agent if isinstance(agent, str) else getattr(agent, "name", "agent")
        bar = tqdm(total=len(jobs), desc=f"{label} {what}", unit="ep", leave=False)
    try:
        if workers <= 1 or len(jobs) <= 1:
            for job in jobs:
                out.extend(_episode(job))
                if bar is not None:
                    bar.update(1)
        else:
            import multiprocessing as mp
            from concurrent.futures import ProcessPoolExecutor

            # keep the children from oversubscribing BLAS threads on a small machine
            os.environ.setdefault("OMP_NUM_THREADS", "1")
            with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=mp.get_context("spawn")) as pool:
                for demo in pool.map(_episode, jobs, chunksize=1):
                    out.extend(demo)
                    if bar is not None:
                        bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return out


def fit_gain_model(demo: Demonstrations, name: str, inputs: Sequence[str], *, hidden: int = 64, epochs: int = 150,
                   learning_rate: float = 3e-3, holdout: float = 1 / 6, seed: int = 0,
                   ensemble: int = 5) -> tuple[GainModel | None, dict]:
    """Regress the branched gain ``delta(s, name)`` on the observation keys ``inputs`` (MSE, so the model
    estimates the *mean* gain of the states the inputs cannot tell apart: the quantity the greedy choice
    needs, where one episode's gain is mostly noise: a fact skipped costs -1.25 if asked later, +0.05
    if not). An average of ``ensemble`` tanh MLPs (seeds ``seed ..``: the average keeps less of the noise
    each fit picks up); the last ``holdout`` of the episodes stops each at its best epoch.
    Returns (model, stats); the model is None when no step was branched on ``name``, or when every
    branched step is in the held-out episodes (nothing to train on). ``inputs`` must be a non-empty list
    of MemoryEnv observation keys (else a ``ValueError`` naming the argument and the keys)."""
    import torch as th

    from agents.train_config import OBSERVATION_KEYS

    # (a misspelled key was a bare KeyError, and a str was read as one key per letter)
    if isinstance(inputs, str) or not isinstance(inputs, Sequence) or not inputs:
        raise ValueError(f"argument 'inputs' must be a non-empty list of observation keys from "
                         f"{list(OBSERVATION_KEYS)}, got {inputs!r}")
    for key in inputs:
        if key not in OBSERVATION_KEYS:
            raise ValueError(f"argument 'inputs': unknown observation key {key!r}; allowed: {', '.join(OBSERVATION_KEYS)}")
    rows = [i for i, d in enumerate(demo.deltas) if name in d]
    if not rows:
        return None, {"samples": 0}
    inputs = tuple(inputs)
    x = th.as_tensor(GainModel(inputs, []).features({k: np.stack([demo.obs[i][k] for i in rows]) for k in inputs}))
    y = th.as_tensor(np.array([demo.deltas[i][name] for i in rows], dtype=np.float32))
    episode = np.cumsum(np.r_[0, np.asarray(demo.ends[:-1], dtype=int)])  # episode number of every step
    ep_of = episode[rows]
    n_ep = int(episode[-1]) + 1
    cut = n_ep - max(1, int(round(n_ep * holdout))) if n_ep > 1 else n_ep
    tr, va = np.flatnonzero(ep_of < cut), np.flatnonzero(ep_of >= cut)
    if len(tr) == 0:  # every branch in the held-out episodes: nothing to fit, so no model and no
        # relabelling (an untrained net's seeded outputs crossed the margin and relabelled steps)
        return None, {"samples": len(rows), "train_samples": 0, "train_episodes": cut, "holdout_episodes": n_ep - cut}
    if len(va) == 0:
        va = tr

    def train_one(member_seed: int):
        gen = th.Generator().manual_seed(member_seed)
        net = th.nn.Sequential(th.nn.Linear(x.shape[1], hidden), th.nn.Tanh(), th.nn.Linear(hidden, hidden),
                               th.nn.Tanh(), th.nn.Linear(hidden, 1))
        with th.no_grad():
            for p in net.parameters():  # seeded init, independent of the global torch RNG
                if p.dim() > 1:
                    bound = 1.0 / np.sqrt(p.shape[1])
                    p.uniform_(-bound, bound, generator=gen)
                else:
                    p.zero_()
        opt = th.optim.Adam(net.parameters(), lr=learning_rate)
        rng = np.random.default_rng(member_seed)
        best = (float("inf"), None, -1)
        for epoch in range(epochs):
            for idx in np.array_split(rng.permutation(tr), max(1, len(tr) // 256)):
                loss = ((net(x[idx]).squeeze(1) - y[idx]) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            with th.no_grad():
                val = float(((net(x[va]).squeeze(1) - y[va]) ** 2).mean())
            if val < best[0]:
                best = (val, {k: v.clone() for k, v in net.state_dict().items()}, epoch)
        net.load_state_dict(best[1])
        layers = [(m.weight.detach().numpy().copy(), m.bias.detach().numpy().copy())
                  for m in net if isinstance(m, th.nn.Linear)]
        return layers, best[0], best[2]

    members = [train_one(seed + j) for j in range(max(1, ensemble))]
    model = GainModel(inputs, [m[0] for m in members])
    pred = model({k: np.stack([demo.obs[rows[j]][k] for j in va]) for k in inputs})
    ens_mse = float(np.mean((pred - y[va].numpy()) ** 2))
    return model, {"samples": len(rows), "train_samples": len(tr), "train_episodes": cut, "holdout_episodes": n_ep - cut,
                   "ensemble": len(members), "holdout_mse": ens_mse, "holdout_mse_members": [m[1] for m in members],
                   # (the population variance, as holdout_mse is a mean: one held-out sample gives 0, not NaN)
                   "holdout_variance": float(y[va].var(correction=0)), "best_epochs": [m[2] for m in members]}


def improved_actions(demo: Demonstrations, models: dict[str, GainModel], margin: float) -> tuple[np.ndarray, dict]:
    """Every step's action under the improved policy: the recorded action, replaced on a branched step by
    the alternative with the highest predicted mean gain above ``margin`` (the same rule as
    :class:`GatedAgent`). Stats: relabelled steps, and what they gained in these very episodes, each
    change taken on its own (changes interact: a policy realises less than their sum). Empty
    demonstrations give empty labels (shape ``(0, 2)``) and nothing relabelled."""
    if not demo.actions:  # (np.stack of nothing raised "need at least one array to stack")
        return np.zeros((0, 2), dtype=np.int64), {"branched": 0, "relabelled": 0, "changed": {}, "gain_per_episode": 0.0}
    actions = np.stack([np.asarray(a, dtype=np.int64) for a in demo.actions])
    labels = actions.copy()
    rows = [i for i, d in enumerate(demo.deltas) if d]
    preds = {}
    for name, model in models.items():
        have = [i for i in rows if name in demo.alternatives[i]]
        if have:
            preds[name] = dict(zip(have, model({k: np.stack([demo.obs[i][k] for i in have]) for k in model.inputs})))
    changed: dict[str, int] = {}
    realised = 0.0
    for i in rows:
        gains = {name: p[i] for name, p in preds.items() if i in p}
        name = choose(margin, gains)
        if name is None:
            continue
        labels[i] = demo.alternatives[i][name]
        key = f"{OP_NAMES[actions[i][0]]}->{name}"
        changed[key] = changed.get(key, 0) + 1
        realised += demo.deltas[i][name]
    n_ep = max(len(demo.returns), 1)
    return labels, {"branched": len(rows), "relabelled": int(sum(changed.values())),
                    "changed": dict(sorted(changed.items())), "gain_per_episode": realised / n_ep}
