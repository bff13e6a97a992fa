"""`memgym train`: learn a memory-management policy with Stable-Baselines3 / sb3-contrib.

One YAML recipe (agents/train_config.py, configs/train/*.yaml) fixes the env, the algorithm and its
hyper-parameters, the number of parallel envs, the step budget and the evaluation schedule. A run
folder then holds everything needed to inspect, resume and reproduce the run:

| file | what |
| --- | --- |
| `config.yaml` | the resolved recipe (after `--quick` and command-line overrides) plus seed and versions |
| `seeds.json` | training seed rule, validation seeds, test seeds (three disjoint sets) |
| `evaluations.csv` | one row per evaluation on the validation seeds: steps, return, accuracy, ... |
| `evaluations.npz` | SB3's own record of the same evaluations |
| `tb/` | TensorBoard logs (`tensorboard --logdir runs/`) |
| `checkpoints/` | `model_<steps>_steps.zip` + `state_<steps>.json` (+ `session_<steps>.pkl` at a rollout's end; DQN: + `replay_buffer_<steps>_steps.pkl`, the newest two checkpoints' only, their filled rows), what `--resume` continues from |
| `baselines.json` | every baseline agent on the validation seeds (the reference lines of the curve) |
| `model.zip`, `model.json` | the final policy, and what is needed to load it (algorithm, action wrapper) |
| `learning_curve.png` | validation return and accuracy against steps, with the best heuristic's level |
| `test_eval.json`, `summary.md` | the final test of `model.zip` through `agents.bench.evaluate` on the benchmark's seeds (an older model's: `*_<steps>_steps.*`) |

Determinism: the seed fixes Python, NumPy and torch (`set_random_seed`, one torch thread), the
policy initialisation and every world the envs generate (each training episode resets the world
with an explicit seed from a fixed schedule), so the same seed gives the same evaluation numbers.
"""

from __future__ import annotations

import argparse
import copy
import csv
import dataclasses
import functools
import json
import math
import os
import pickle
import random
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import yaml

from agents.train_config import (
    TEST_SEED_START,
    TRAIN_SEED_LIMIT,
    TrainConfig,
    TrainConfigError,
    algorithm_class,
    check_agent_names,
    check_env,
    load_yaml,
    rollout_refusal,
)

__all__ = ["train", "add_arguments", "run", "TrainResult", "train_seed", "schedule_seed", "SeedSchedule", "load_model"]

CHECKPOINT_DIR = "checkpoints"
EVAL_CSV_FIELDS = ("timesteps", "wall_time_s", "mean_return", "std_return", "mean_accuracy", "mean_length",
                   "episodes", "seeds")
_STOP_REASON_INTERRUPT = "interrupted"
_STOP_REASON_LIMIT = "stop_after"
#: training seeds are in [0, RUN_SEED_LIMIT): NumPy's legacy seeding (SB3's set_random_seed) takes no more
RUN_SEED_LIMIT = 2**32


# ----------------------------------------------------------------------------------------- seeds
#: run seeds 0 .. ROTATION_SEEDS - 1 keep the rotation schedule they were trained with (the README's runs:
#: seeds 0-2); there are only TRAIN_SEED_LIMIT / 1000 such rotations, so every other seed gets a permutation
ROTATION_SEEDS = TRAIN_SEED_LIMIT // 1_000
#: seeds.json's `train.schedule`: 2 is `schedule_seed`; a run folder without it was started when every seed
#: rotated (seed s + 9 walked seed s's worlds), and a resume of such a run keeps that schedule
SCHEDULE_VERSION = 2
_PREFIX_RADIX = 54  # 2**32 <= 9_000 * 8_998 * 54: three leading worlds can spell every run seed


def _mix32(x: int) -> int:
    """MurmurHash3's 32-bit finaliser: a bijection of [0, 2**32) (each xor-shift and each multiplication by an
    odd constant is invertible), so distinct seeds stay distinct while neighbouring seeds land far apart."""
    x ^= x >> 16
    x = (x * 0x85EBCA6B) & 0xFFFFFFFF
    x ^= x >> 13
    x = (x * 0xC2B2AE35) & 0xFFFFFFFF
    return x ^ (x >> 16)


@functools.lru_cache(maxsize=8)
def _permutation(run_seed: int) -> tuple[int, ...]:
    """The training pool [0, 9_000) in run `run_seed`'s order (seeds >= ROTATION_SEEDS).

    The first three worlds spell `_mix32(run_seed)` in the mixed radix (9_000, 8_998, 54), so two run
    seeds never share their first three episodes, and the second world is never the first plus one, so no
    permutation is one of the rotations of seeds 0..8. The rest is shuffled by NumPy's legacy `RandomState`,
    whose stream NumPy keeps stable across versions (a run must replay the same worlds on a resume)."""
    n = TRAIN_SEED_LIMIT
    h = _mix32(run_seed)
    d0, d1, d2 = h % n, (h // n) % (n - 2), h // (n * (n - 2))
    rng = np.random.RandomState(run_seed)
    first = d0
    second = [x for x in range(n) if x not in (first, (first + 1) % n)][d1]
    rest = [x for x in range(n) if x not in (first, second)]
    # (d2 < 54 picks the third world among all the others: index d2 + 54 * u, read back as index mod 54)
    third = rest[d2 + _PREFIX_RADIX * int(rng.randint(0, (n - 2) // _PREFIX_RADIX))]
    tail = [x for x in rest if x != third]
    return (first, second, third, *(tail[i] for i in rng.permutation(len(tail))))


def schedule_seed(run_seed: int, position: int, legacy: bool = False) -> int:
    """World seed at `position` (0, 1, ...) of run `run_seed`'s training schedule, in [0, 9_000).

    Every run walks the whole pool before it repeats a world (position mod 9_000), never touching the
    validation seeds [9_000, 10_000) or the benchmark's test seeds (>= 10_000). Seeds 0..8 rotate the pool
    from `1_000 * run_seed`, as they always did; every other seed has its own permutation (`_permutation`),
    different from every other seed's within its first three episodes. `legacy`: the rotation for every
    seed (seed s + 9 then walks seed s's worlds), for resuming a run started before the permutations."""
    if isinstance(run_seed, bool) or not isinstance(run_seed, int | np.integer) or not 0 <= run_seed < RUN_SEED_LIMIT:
        raise ValueError(f"run_seed must be an integer in [0, {RUN_SEED_LIMIT - 1}], got {run_seed!r}")
    if legacy or run_seed < ROTATION_SEEDS:
        return (1_000 * int(run_seed) + position) % TRAIN_SEED_LIMIT
    return _permutation(int(run_seed))[position % TRAIN_SEED_LIMIT]


def train_seed(run_seed: int, worker: int, episode: int, n_envs: int, legacy: bool = False) -> int:
    """World seed of training episode `episode` in worker `worker` of `n_envs`: position `worker + episode *
    n_envs` of the run's schedule (`schedule_seed`), so the workers interleave and no world repeats within
    9,000 episodes of the run."""
    return schedule_seed(run_seed, worker + episode * n_envs, legacy)


class SeedSchedule(gym.Wrapper):
    """Every `reset` seeds the world from a fixed schedule, whatever seed the caller passes.

    SB3 re-seeds vector envs on its own (`VecEnv.seed`) and resets them without a seed after each
    episode; this wrapper makes the sequence of worlds a function of the schedule alone:
    `seed_for(episode_index)` gives the seed of each episode. `restart_seeds()` rewinds to the first
    one (the evaluation callback calls it before each evaluation, so that every evaluation sees the
    same worlds).
    """

    def __init__(self, env: gym.Env, seed_for: Callable[[int], int], start_episode: int = 0):
        super().__init__(env)
        self._seed_for = seed_for
        self._start = int(start_episode)
        self.episode = int(start_episode)
        self.last_seed: int | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        self.last_seed = int(self._seed_for(self.episode))
        self.episode += 1
        return self.env.reset(seed=self.last_seed, options=options)

    def restart_seeds(self) -> None:
        self.episode = self._start

    def episodes_started(self) -> int:
        return self.episode

    def session_state(self) -> dict:
        """What this worker needs to go on exactly where it is (mid-episode): the schedule's position,
        the env's whole state (`MemoryEnv.get_state`) and the shaping's last potential. Read-only."""
        shaping = _find_wrapper(self.env, StorageShaping)
        return {"episode": self.episode, "last_seed": self.last_seed, "env": self.env.unwrapped.get_state(),
                "shaping_phi": None if shaping is None else shaping._phi}

    def restore_session(self, state: dict) -> None:
        """Put this worker back into a :meth:`session_state` (after a `reset`, which the wrappers need)."""
        self.episode = int(state["episode"])
        self.last_seed = state["last_seed"]
        self.env.unwrapped.set_state(state["env"])
        shaping = _find_wrapper(self.env, StorageShaping)
        if shaping is not None and state["shaping_phi"] is not None:
            shaping._phi = float(state["shaping_phi"])


def _find_wrapper(env: gym.Env, cls: type) -> gym.Wrapper | None:
    """The first wrapper of type `cls` in `env`'s wrapper chain, or None."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, cls):
            return env
        env = env.env
    return None


class StorageShaping(gym.Wrapper):
    """Shaping from a storage potential that charges the storage cost up front.

    The world charges `rewards["storage"]` per live memory at every event, so the cost of a WRITE is
    a drip over every later event of the episode, tangled with the answers' rewards; credit for it
    reaches the decision only through many noisy steps. With the potential
    `Phi(s) = w_storage * live(s) * (horizon - index(s))` (the storage bill of the current store to
    the end of the episode, 0 at the end) the shaped reward `r + Phi(s') - Phi(s)` bills a new memory
    its whole future storage at the step that writes it and refunds a memory at the step that
    forgets (or sweeps) it; the per-event drip cancels. The episode's *undiscounted* shaped return
    equals its true return (the terms telescope to Phi(s_T) - Phi(s_0)), so for the undiscounted
    objective the optimal policy is unchanged.

    With ``gamma=1`` (``shaping: storage_potential``) it is not the policy-invariant form of Ng,
    Harada & Russell 1999 ("Policy invariance under reward transformations", ICML) for the discounted
    return PPO optimises (gamma = 0.99): that form adds `gamma * Phi(s') - Phi(s)`. With
    `Phi(s') - Phi(s)` and gamma < 1 the shaped discounted return is the true one plus
    `sum_t gamma^t (1 - gamma) Phi(s_{t+1})` minus `Phi(s_0)`, i.e. an extra, mildly discounted
    penalty on keeping memories (Phi <= 0 when storage costs), which can change the optimal policy.
    ``gamma`` set to the algorithm's discount (``shaping: storage_potential_discounted``) gives Ng et
    al.'s form: the shaped discounted return of every episode is the true one minus `Phi(s_0)`, a
    constant of the start state, so the optimal policy is the same (the drip then cancels only up to
    the factor gamma). Only training envs are shaped; evaluation always uses the env's own reward.
    `info["shaping"]` holds the added term. Endless worlds (no horizon) are left unshaped.
    """

    def __init__(self, env: gym.Env, gamma: float = 1.0):
        super().__init__(env)
        if not 0.0 < float(gamma) <= 1.0:
            raise ValueError(f"StorageShaping: gamma must be in (0, 1], got {gamma!r}")
        self.gamma = float(gamma)
        self._phi = 0.0

    def _potential(self) -> float:
        world = self.env.unwrapped.world
        horizon = world.config.horizon
        if horizon is None or world.done:
            return 0.0
        return float(world.config.rewards["storage"]) * len(world.store) * (horizon - world.event.index)

    def reset(self, **kwargs):
        out = self.env.reset(**kwargs)
        self._phi = self._potential()
        return out

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        phi = 0.0 if (terminated or truncated) else self._potential()
        extra = self.gamma * phi - self._phi
        self._phi = phi
        info = {**info, "shaping": extra}
        return obs, float(reward) + extra, terminated, truncated, info


class _SeedList:
    """Picklable `seed_for` over a list (cycled)."""

    def __init__(self, seeds: Sequence[int]):
        self.seeds = [int(s) for s in seeds]

    def __call__(self, episode: int) -> int:
        return self.seeds[episode % len(self.seeds)]


class _TrainSeeds:
    """Picklable `seed_for` of worker `worker` following `train_seed` (`legacy`: the rotation of a run started
    before the permutations, see `schedule_seed`)."""

    def __init__(self, run_seed: int, worker: int, n_envs: int, legacy: bool = False):
        self.run_seed, self.worker, self.n_envs, self.legacy = run_seed, worker, n_envs, legacy

    def __call__(self, episode: int) -> int:
        return train_seed(self.run_seed, self.worker, episode, self.n_envs, self.legacy)


# ----------------------------------------------------------------------------------------- envs
class _EnvFactory:
    """Picklable env constructor for DummyVecEnv / SubprocVecEnv workers."""

    def __init__(self, cfg: TrainConfig, seed_for: Callable[[int], int], start_episode: int = 0,
                 ignore_sigint: bool = False, shaping: bool = False, shaping_gamma: float = 1.0):
        self.shaping = shaping
        self.shaping_gamma = shaping_gamma
        self.env_id = cfg.env_id
        self.overrides = dict(cfg.env_overrides)
        self.flatten = cfg.algo == "dqn"
        self.seed_for = seed_for
        self.start_episode = start_episode
        self.ignore_sigint = ignore_sigint

    def __call__(self):
        if self.ignore_sigint:
            # Ctrl-C goes to the whole process group; the main process handles it (saves, then closes
            # the workers), so the workers must not die first.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        from stable_baselines3.common.monitor import Monitor

        env = make_env(self.env_id, self.overrides, flatten=self.flatten)
        if self.shaping:
            env = StorageShaping(env, self.shaping_gamma)
        env = SeedSchedule(env, self.seed_for, self.start_episode)
        return Monitor(env)


def shaping_gamma(cfg: TrainConfig) -> float:
    """The gamma of the recipe's storage shaping: 1 for ``storage_potential``, the algorithm's discount
    (``hyperparams.gamma``, else SB3's default 0.99) for ``storage_potential_discounted``."""
    if cfg.shaping != "storage_potential_discounted":
        return 1.0
    return float(cfg.hyperparams.get("gamma", 0.99))


def make_env(env_id: str, overrides: dict[str, Any] | None = None, *, flatten: bool = False):
    """`gym.make(env_id, **overrides)` after registering memgym's ids, with `FlattenAction` for DQN."""
    if env_id.startswith("MemGym/"):
        import envs  # noqa: F401  (registers the MemGym ids)

    try:
        env = gym.make(env_id, **(overrides or {}))
    except gym.error.Error as err:
        known = sorted(k for k in gym.registry if k.startswith("MemGym/"))
        raise TrainConfigError(f"key 'env.id': cannot make {env_id!r} ({err}); registered ids: {', '.join(known)}") \
            from err
    if flatten:
        from envs.wrappers import FlattenAction

        env = FlattenAction(env)
    return env


def _vec_env(factories: list, subprocess: bool):
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    if subprocess:
        return SubprocVecEnv(factories)
    return DummyVecEnv(factories)


# ----------------------------------------------------------------------------------------- callbacks
def _callbacks(cfg: TrainConfig, run_dir: Path, eval_env, start_steps: int, run_seed: int, t0: float):
    from stable_baselines3.common.callbacks import BaseCallback, CheckpointCallback, EvalCallback

    if cfg.algo == "maskable_ppo":
        from sb3_contrib.common.maskable.callbacks import MaskableEvalCallback as _EvalBase
    else:
        _EvalBase = EvalCallback

    n_envs = cfg.n_envs

    class EpisodeCounter(BaseCallback):
        """Counts finished training episodes per worker (the seed schedule's position, for resuming)."""

        def __init__(self, start: list[int]):
            super().__init__()
            self.started = list(start)  # episodes started per worker, as the workers count them

        def _on_step(self) -> bool:
            for i, done in enumerate(self.locals["dones"]):
                if done:
                    self.started[i] += 1
            return True

    class AfterUpdate:
        """Mixin for the step-count callbacks below: their action (`_act`) runs at once, or, when the step
        ends a rollout (`_update_follows`), after that rollout's update, at the same step count."""

        pending = False

        def _act_or_defer(self) -> bool:
            if _update_follows(self.locals):
                self.pending = True
                return True
            return self._act(after_update=False)

        def _flush(self) -> None:
            if self.pending:
                self.pending = False
                self._act(after_update=True)

        def _on_rollout_start(self) -> None:
            self._flush()

        def _on_training_end(self) -> None:
            self._flush()

    class HeldOutEval(AfterUpdate, _EvalBase):
        """(Maskable)EvalCallback on the validation seeds, triggered by the step count (so a resumed run
        keeps the schedule; one that lands on a rollout's end runs after that rollout's update, at the same
        step count, so it scores the policy trained on those steps: the last one scores model.zip),
        recording accuracy from the episode's final `info["metrics"]` and one CSV row per evaluation."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, eval_freq=1, verbose=0, **kwargs)
            self.next_eval = (start_steps // cfg.eval.freq + 1) * cfg.eval.freq
            self.rows: list[dict] = []
            self._episode_infos: list[dict] = []

        def _mean_accuracy(self) -> float:
            accs = [_accuracy_from_info(info) for info in self._episode_infos]
            accs = [a for a in accs if a is not None]
            return float(np.mean(accs)) if accs else float("nan")

        def _log_success_callback(self, locals_, globals_) -> None:
            super()._log_success_callback(locals_, globals_)
            if locals_["done"]:
                self._episode_infos.append(dict(locals_["info"]))
                if len(self._episode_infos) == self.n_eval_episodes:
                    # recorded before the parent's logger.dump(num_timesteps), so TensorBoard has it at the
                    # step of eval/mean_reward (recorded after, it went out with the next dump, or never)
                    self.logger.record("eval/mean_accuracy", self._mean_accuracy())

        def evaluate_now(self) -> bool:
            self.eval_env.env_method("restart_seeds")
            self._episode_infos = []
            self.n_calls = 0  # the parent evaluates when n_calls % eval_freq == 0 (eval_freq = 1)
            keep_going = super()._on_step()
            rewards = np.asarray(self.evaluations_results[-1], dtype=float)
            lengths = np.asarray(self.evaluations_length[-1], dtype=float)
            row = {
                "timesteps": int(self.num_timesteps),
                "wall_time_s": round(time.perf_counter() - t0, 2),
                "mean_return": float(rewards.mean()),
                "std_return": float(rewards.std()),
                "mean_accuracy": self._mean_accuracy(),
                "mean_length": float(lengths.mean()),
                "episodes": int(len(rewards)),
                "seeds": " ".join(str(s) for s in cfg.eval.seeds),
            }
            self.rows.append(row)
            _append_eval_row(run_dir / "evaluations.csv", row)
            _say(f"eval @ {row['timesteps']:>8d} steps: return {row['mean_return']:8.3f} "
                 f"+/- {row['std_return']:.3f}, accuracy {_acc(row['mean_accuracy'])}")
            return keep_going

        def _on_step(self) -> bool:
            if self.num_timesteps >= self.next_eval:
                while self.next_eval <= self.num_timesteps:
                    self.next_eval += cfg.eval.freq
                return self._act_or_defer()
            return True

        def _act(self, after_update: bool) -> bool:
            return self.evaluate_now()

    class Checkpoint(AfterUpdate, CheckpointCallback):
        """CheckpointCallback triggered by the step count, saving the seed schedule's position too. A
        checkpoint that lands on a rollout's end is saved after that rollout's update (`_update_follows`):
        it holds the policy trained on its steps (the last one is model.zip), and with it the session
        (`session_<steps>.pkl`: the training envs mid-episode, the last observation, the RNG states), so
        that a resume from it continues exactly as the uninterrupted run does."""

        def __init__(self, counter: EpisodeCounter):
            super().__init__(save_freq=1, save_path=str(run_dir / CHECKPOINT_DIR), name_prefix="model")
            self.counter = counter
            self.next_save = (start_steps // cfg.checkpoint_freq + 1) * cfg.checkpoint_freq

        def save_now(self, reason: str = "schedule", *, session: bool = False) -> Path:
            """Save the model and the seed schedule's position; with `session` (only at a rollout's end,
            after its update: nothing of a rollout is in flight) also the session, for an exact resume.
            The state file is written last: a checkpoint counts only once it is there."""
            path = Path(self._checkpoint_path(extension="zip"))
            path.parent.mkdir(parents=True, exist_ok=True)
            self.model.save(path)
            replay = getattr(self.model, "replay_buffer", None) if cfg.algo == "dqn" else None
            if replay is not None:
                save_replay_buffer(replay, path.with_name(f"replay_buffer_{self.num_timesteps}_steps.pkl"))
            if session:
                with (path.parent / f"session_{self.num_timesteps}.pkl").open("wb") as fh:
                    pickle.dump(_session_state(self.model), fh)
            state = {
                "timesteps": int(self.num_timesteps),
                "episodes_started": list(self.counter.started),
                "reason": reason,
                "run_seed": run_seed,
                "wall_time_s": round(time.perf_counter() - t0, 2),
                "session": bool(session),
            }
            (path.parent / f"state_{self.num_timesteps}.json").write_text(json.dumps(state, indent=2))
            if replay is not None:
                # only now that this checkpoint is complete (its state file, written last, is there): a save that
                # dies halfway leaves the two checkpoints before it with their buffers, one to fall back to
                _drop_older_replay_buffers(path.parent, int(self.num_timesteps))
            return path

        def _on_step(self) -> bool:
            if self.num_timesteps >= self.next_save:
                while self.next_save <= self.num_timesteps:
                    self.next_save += cfg.checkpoint_freq
                self._act_or_defer()
            return True

        def _act(self, after_update: bool) -> bool:
            self.save_now(session=after_update)
            return True

    class RunHorizon(BaseCallback):
        """A session that stops early (`--stop-after`) calls `learn()` for fewer steps than the run has
        left; SB3 then takes the session's end for the run's (`_total_timesteps`), which moves schedules
        read from it (DQN's exploration rate). This puts the run's end back, so that a stopped and
        resumed run follows the same schedules as an uninterrupted one."""

        def __init__(self, run_total: int):
            super().__init__()
            self.run_total = int(run_total)

        def _on_training_start(self) -> None:
            self.model._total_timesteps = self.run_total

        def _on_step(self) -> bool:
            return True

    return EpisodeCounter, HeldOutEval, Checkpoint, RunHorizon, n_envs


def _update_follows(locals_: dict) -> bool:
    """Whether the step the callbacks are seeing is the last of a rollout, i.e. the algorithm updates the
    policy before the next step (read from SB3's `collect_rollouts` locals, on- and off-policy)."""
    if "n_rollout_steps" in locals_ and "n_steps" in locals_:  # on-policy: n_steps is counted after on_step
        return int(locals_["n_steps"]) + 1 >= int(locals_["n_rollout_steps"])
    if "train_freq" in locals_ and "num_collected_steps" in locals_:  # off-policy: steps counted before on_step
        from stable_baselines3.common.utils import should_collect_more_steps

        episodes = int(locals_.get("num_collected_episodes", 0)) + int(np.sum(locals_.get("dones", 0)))
        return not should_collect_more_steps(locals_["train_freq"], int(locals_["num_collected_steps"]), episodes)
    return False


REPLAY_BUFFER_ARRAYS = ("observations", "next_observations", "actions", "rewards", "dones", "timeouts")


def _replay_rows(buffer) -> int:
    """Rows of a replay buffer that hold data: all once it is full, else the first `pos` (and row `pos` too
    with `optimize_memory_usage`, where it holds the last transition's next observation)."""
    if buffer.full:
        return int(buffer.buffer_size)
    return min(int(buffer.pos) + int(bool(getattr(buffer, "optimize_memory_usage", False))), int(buffer.buffer_size))


def _filled_replay_buffer(cls: type, state: dict, rows: int, buffer_size: int):
    """Unpickle a buffer saved by :func:`save_replay_buffer`: its arrays get back their `buffer_size` rows,
    zeros after the first `rows` (as SB3 allocates them), so the result equals the buffer that was saved."""
    state = dict(state)
    for name in REPLAY_BUFFER_ARRAYS:
        value = state.get(name)
        if isinstance(value, dict):
            state[name] = {key: _padded(arr, buffer_size) for key, arr in value.items()}
        elif isinstance(value, np.ndarray):
            state[name] = _padded(value, buffer_size)
    buffer = cls.__new__(cls)
    buffer.__dict__.update(state)
    return buffer


def _padded(arr: np.ndarray, size: int) -> np.ndarray:
    out = np.zeros((size, *arr.shape[1:]), dtype=arr.dtype)
    out[:len(arr)] = arr
    return out


def save_replay_buffer(buffer, path: Path) -> None:
    """Pickle a DQN replay buffer with only its filled rows. SB3's `save_replay_buffer` writes every row it
    preallocated (1.85 GB with its default `buffer_size` of 1,000,000 on a MemGym env, however few steps were
    taken); this pickle holds the rows with data and restores the empty ones on load, so the loaded object
    equals the saved one (SB3's `load_replay_buffer` reads it too, where `agents.train` can be imported: the
    pickle calls :func:`_filled_replay_buffer`). Buffer classes other than SB3's `ReplayBuffer` /
    `DictReplayBuffer` are pickled whole."""
    import copyreg

    from stable_baselines3.common.buffers import DictReplayBuffer, ReplayBuffer

    def reduce(buf):
        rows = _replay_rows(buf)
        state = dict(buf.__dict__)
        for name in REPLAY_BUFFER_ARRAYS:
            value = state.get(name)
            if isinstance(value, dict):
                state[name] = {key: arr[:rows] for key, arr in value.items()}
            elif isinstance(value, np.ndarray):
                state[name] = value[:rows]
        return _filled_replay_buffer, (type(buf), state, rows, int(buf.buffer_size))

    with path.open("wb") as fh:
        pickler = pickle.Pickler(fh, protocol=pickle.HIGHEST_PROTOCOL)
        if type(buffer) in (ReplayBuffer, DictReplayBuffer):
            pickler.dispatch_table = {**copyreg.dispatch_table, type(buffer): reduce}
        pickler.dump(buffer)


def _drop_older_replay_buffers(ckpt_dir: Path, steps: int) -> None:
    """Delete the replay buffers of the checkpoints older than the two newest, `steps` (just completed) and
    the complete one before it. A resume reads the newest checkpoint's only, but when that checkpoint is
    broken the user falls back to the previous one (docs/train.md), which DQN can resume only with its
    buffer; keeping every one filled the disk (up to 1.85 GB each)."""
    earlier = [n for n in _checkpoint_steps(ckpt_dir.parent) if n < steps]
    keep_from = earlier[-1] if earlier else steps
    for path in ckpt_dir.glob("replay_buffer_*_steps.pkl"):
        n = _steps_in_name(path)
        if n is not None and n < keep_from:
            path.unlink(missing_ok=True)


def _steps_in_name(path: Path) -> int | None:
    """The step count of a `<prefix>_<steps>_steps.<ext>` checkpoint file name, or None."""
    try:
        return int(path.stem.split("_")[-2])
    except (IndexError, ValueError):
        return None


def _accuracy_from_info(info: dict) -> float | None:
    metrics = info.get("metrics")
    if isinstance(metrics, dict) and metrics.get("accuracy") is not None:
        value = float(metrics["accuracy"])
        return value if math.isfinite(value) else None
    return None


def _append_eval_row(path: Path, row: dict) -> None:
    new = not path.exists()
    with path.open("a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=EVAL_CSV_FIELDS)
        if new:
            writer.writeheader()
        writer.writerow(row)


def read_evaluations(path: str | Path) -> list[dict]:
    """Rows of `evaluations.csv` with numeric fields parsed. A torn last line (no line end: the process was
    killed while appending it) is left out; any other line that is not an evaluation row is a
    TrainConfigError naming the file and the line."""
    path = Path(path)
    if not path.exists():
        return []
    return _parse_evaluations(path)[0]


def _parse_evaluations(path: Path) -> tuple[list[dict], str | None]:
    """(rows, the torn last line or None). Every row is written with its line end, so a last line without
    one is an unfinished write (a kill mid-append), whatever it holds: it is not a row."""
    def bad(where: str, problem: str) -> TrainConfigError:
        return TrainConfigError(f"{path}: {where} is not what memgym train writes ({problem}); it is the run's "
                                "record of its evaluations: restore the file or repair that line (nothing was "
                                "changed)")

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise TrainConfigError(f"{path}: cannot be read ({err}); it is the run's record of its evaluations: "
                               "restore it (nothing was changed)") from None
    lines = text.splitlines(keepends=True)
    torn = lines.pop() if lines and not lines[-1].endswith(("\n", "\r")) else None
    if not lines:
        return [], torn
    reader = csv.DictReader(lines)
    if tuple(reader.fieldnames or ()) != EVAL_CSV_FIELDS:
        raise bad("line 1", f"the header must be {','.join(EVAL_CSV_FIELDS)}")
    rows = []
    for lineno, row in enumerate(reader, start=2):
        if None in row or any(row[key] is None for key in EVAL_CSV_FIELDS):
            raise bad(f"line {lineno}", f"expected the {len(EVAL_CSV_FIELDS)} fields {','.join(EVAL_CSV_FIELDS)}")
        out: dict[str, Any] = dict(row)
        try:
            for key in ("timesteps", "episodes"):
                out[key] = int(row[key])
            for key in ("wall_time_s", "mean_return", "std_return", "mean_accuracy", "mean_length"):
                out[key] = float(row[key])
        except ValueError as err:
            raise bad(f"line {lineno}", str(err)) from None
        rows.append(out)
    return rows, torn


def _check_evaluation_files(run_dir: Path) -> None:
    """Before a resume changes anything: evaluations.csv parses (a torn last row is said and dropped by the
    resume's rewrite) and SB3's evaluations.npz loads with its three arrays of one length."""
    csv_path, npz_path = run_dir / "evaluations.csv", run_dir / "evaluations.npz"
    if csv_path.exists():
        _, torn = _parse_evaluations(csv_path)
        if torn is not None:
            _say(f"{csv_path}: the last line was cut off ({torn.strip()[:60]!r}, the run was killed while writing "
                 "it): the resume drops it")
    if npz_path.exists():
        try:
            with np.load(npz_path) as npz:
                lengths = {len(npz[key]) for key in ("timesteps", "results", "ep_lengths")}
            if len(lengths) != 1:
                raise ValueError(f"arrays of different lengths {sorted(lengths)}")
        except Exception as err:  # noqa: BLE001 - a truncated zip raises BadZipFile, EOFError, KeyError, ...
            raise TrainConfigError(f"{npz_path}: cannot be read as SB3's record of the evaluations "
                                   f"({type(err).__name__}: {err}); restore it, or move it away to resume without "
                                   "it (it then holds only the evaluations from here on; evaluations.csv keeps "
                                   "them all). Nothing was changed") from None


def _truncate_evaluations(path: Path, max_steps: int) -> None:
    rows = [r for r in read_evaluations(path) if r["timesteps"] <= max_steps]
    if path.exists():
        path.unlink()
    for row in rows:
        _append_eval_row(path, {k: row[k] for k in EVAL_CSV_FIELDS})


def _say(msg: str) -> None:
    try:
        from tqdm import tqdm

        tqdm.write(msg, file=sys.stderr)
    except ImportError:  # pragma: no cover - tqdm is in the train extra
        print(msg, file=sys.stderr)


# ----------------------------------------------------------------------------------------- results
@dataclasses.dataclass
class TrainResult:
    run_dir: Path
    model_path: Path | None  # None when the session stopped early (resume to finish)
    timesteps: int
    finished: bool
    stop_reason: str | None  # None, "interrupted" or "stop_after"
    wall_time_s: float
    evaluations: list[dict]
    summary: dict | None


def _checkpoint_steps(run_dir: str | Path) -> list[int]:
    """Step counts of the checkpoints in `run_dir/checkpoints` that have both files (model zip and state)."""
    ckpt_dir = Path(run_dir) / CHECKPOINT_DIR
    steps = []
    for path in ckpt_dir.glob("model_*_steps.zip"):
        n = _steps_in_name(path)
        if n is not None and (ckpt_dir / f"state_{n}.json").exists():
            steps.append(n)
    return sorted(steps)


def _bad_checkpoint(run_dir: Path, steps: int, path: Path, problem: str, how: str | None = None) -> TrainConfigError:
    """The error for an unreadable checkpoint: names the file, leaves it alone, says how to go on (``how``:
    instead of the advice to fall back to the previous checkpoint)."""
    if how is not None:
        return TrainConfigError(f"cannot resume: checkpoint file {path} {problem}. Nothing was changed in {run_dir}; "
                                f"{how}")
    ckpt_dir = run_dir / CHECKPOINT_DIR
    earlier = [n for n in _checkpoint_steps(run_dir) if n < steps]
    dqn = path.name.startswith("replay_buffer_") or any(ckpt_dir.glob("replay_buffer_*_steps.pkl"))
    names = [f"model_{steps}_steps.zip", f"state_{steps}.json", f"session_{steps}.pkl",
             f"replay_buffer_{steps}_steps.pkl"]
    files = [str(ckpt_dir / name) for name in names[:2]] + \
        [str(ckpt_dir / name) for name in names[2:] if (ckpt_dir / name).exists()]
    pair = f"{', '.join(files[:-1])} and {files[-1]}"
    previous = earlier[-1] if earlier else None
    if previous is not None and dqn and not (ckpt_dir / f"replay_buffer_{previous}_steps.pkl").exists():
        # the one a resume would take once this one is moved away: DQN resumes only with its replay buffer,
        # which a checkpoint older than the newest two (or one of a run saved before they kept two) lacks
        how = (f"the previous checkpoint (model_{previous}_steps.zip, {previous} steps) has no replay buffer to "
               "resume from (a DQN run keeps the newest two checkpoints' only): restore the file, or train again "
               "into another --out")
    elif previous is not None:
        how = (f"to resume from the previous checkpoint (model_{previous}_steps.zip, {previous} steps), "
               f"move or delete {pair} and run the same command again")
    else:
        how = "there is no earlier checkpoint: restore the file, or train again into another --out"
    return TrainConfigError(f"cannot resume: checkpoint file {path} {problem}. Nothing was changed in {run_dir}; "
                            f"{how}")


def latest_checkpoint(run_dir: str | Path) -> tuple[Path, dict] | None:
    """The checkpoint with the most steps in `run_dir/checkpoints`, with its state (or None).

    A corrupt or incomplete `state_<steps>.json` of that checkpoint is an error naming the file (never a
    silent fall-back to an older checkpoint: the user decides, see docs/train.md)."""
    run_dir = Path(run_dir)
    steps = _checkpoint_steps(run_dir)
    if not steps:
        return None
    best = steps[-1]
    state_path = run_dir / CHECKPOINT_DIR / f"state_{best}.json"
    try:
        state = json.loads(state_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise _bad_checkpoint(run_dir, best, state_path, f"is not readable JSON ({err})") from None
    ok = (isinstance(state, dict) and isinstance(state.get("timesteps"), int) and state["timesteps"] == best
          and isinstance(state.get("episodes_started"), list)
          and all(isinstance(x, int) and x >= 0 for x in state["episodes_started"]))
    if not ok:
        raise _bad_checkpoint(run_dir, best, state_path, f"does not hold this checkpoint's state (expected "
                              f"timesteps {best} and episodes_started, a list of counts per env)")
    return run_dir / CHECKPOINT_DIR / f"model_{best}_steps.zip", state


SESSION_FORMAT = 1


def _session_state(model) -> dict:
    """The session of a model at a rollout's end (after its update), besides what `model.save` keeps:
    every training env mid-episode (`SeedSchedule.session_state`, with Monitor's running episode), the
    observation and episode starts the next rollout begins from, and the RNG states (Python, NumPy,
    torch, the action space's). Restored by :func:`_restore_session`, training goes on bit-identically."""
    import torch

    env = model.get_env()
    space_rng = getattr(model.action_space, "_np_random", None)
    return {
        "format": SESSION_FORMAT,
        "timesteps": int(model.num_timesteps),
        "envs": env.env_method("session_state"),
        "monitor": {"rewards": [list(r) for r in env.get_attr("rewards")],
                    "total_steps": [int(n) for n in env.get_attr("total_steps")]},
        "last_obs": copy.deepcopy(model._last_obs),
        "last_episode_starts": copy.deepcopy(model._last_episode_starts),
        "rng": {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state(),
                "action_space": None if space_rng is None else copy.deepcopy(space_rng.bit_generator.state)},
    }


def _restore_session(model, env, session: dict) -> None:
    """Put the model's training envs, last observation and the RNGs back into a :func:`_session_state`.
    The envs are reset first (Monitor and Gymnasium's order check need one before a step); the states
    then replace what the reset did. Call it last before `learn` (nothing may draw from the RNGs after)."""
    import torch

    env.reset()
    for w, state in enumerate(session["envs"]):
        env.env_method("restore_session", state, indices=[w])
        env.set_attr("rewards", list(session["monitor"]["rewards"][w]), indices=[w])
        env.set_attr("total_steps", int(session["monitor"]["total_steps"][w]), indices=[w])
    model._last_obs = copy.deepcopy(session["last_obs"])
    model._last_episode_starts = copy.deepcopy(session["last_episode_starts"])
    rng = session["rng"]
    random.setstate(rng["python"])
    np.random.set_state(rng["numpy"])
    torch.set_rng_state(rng["torch"])
    if rng["action_space"] is not None:
        model.action_space.seed(0)  # (creates the generator if there is none) then its saved state
        model.action_space.np_random.bit_generator.state = copy.deepcopy(rng["action_space"])


def _read_session(run_dir: Path, ckpt: tuple[Path, dict], n_envs: int) -> dict | None:
    """The session saved with a checkpoint (`session_<steps>.pkl`, when its state says so), checked before
    a resume changes anything: a missing or unreadable one is an error naming it, as for the state file.
    None for a checkpoint without one (taken inside a rollout: an interrupt, a scheduled one there)."""
    path, state = ckpt
    if not state.get("session") or state.get("from_model_zip"):
        return None
    steps = int(state["timesteps"])
    session_path = run_dir / CHECKPOINT_DIR / f"session_{steps}.pkl"
    try:
        with session_path.open("rb") as fh:
            session = pickle.load(fh)
    except FileNotFoundError:
        raise _bad_checkpoint(run_dir, steps, session_path, "is missing (state_"
                              f"{steps}.json says the checkpoint has one)") from None
    except Exception as err:  # noqa: BLE001 - a truncated pickle raises EOFError, UnpicklingError, ...
        raise _bad_checkpoint(run_dir, steps, session_path, f"cannot be read ({type(err).__name__}: {err})") \
            from None
    ok = (isinstance(session, dict) and session.get("format") == SESSION_FORMAT and session.get("timesteps") == steps
          and isinstance(session.get("envs"), list) and len(session["envs"]) == n_envs
          and {"monitor", "last_obs", "last_episode_starts", "rng"} <= session.keys())
    if not ok:
        raise _bad_checkpoint(run_dir, steps, session_path, f"does not hold this checkpoint's session (format "
                              f"{SESSION_FORMAT}, timesteps {steps}, one env state per env of {n_envs})")
    return session


def _read_replay_buffer(run_dir: Path, ckpt: tuple[Path, dict], cfg: TrainConfig, *, trains: bool):
    """The replay buffer a DQN resume that `trains` loads (`replay_buffer_<steps>_steps.pkl` of the
    checkpoint), read and checked before the resume changes anything: missing (DQN would go on learning from
    an empty buffer, not as the run did), unreadable, not a replay buffer, or for another number of envs is
    an error naming it. None for other algorithms and for a resume that trains nothing (finishing a run)."""
    state = ckpt[1]
    if cfg.algo != "dqn" or state.get("from_model_zip") or not trains:
        return None
    steps = int(state["timesteps"])
    replay_path = run_dir / CHECKPOINT_DIR / f"replay_buffer_{steps}_steps.pkl"
    if not replay_path.exists():
        raise _bad_checkpoint(run_dir, steps, replay_path, "is missing (DQN goes on learning from the replay buffer "
                              "of the checkpoint it resumes from; memgym train keeps the newest two checkpoints' only)")
    from stable_baselines3.common.buffers import ReplayBuffer

    try:
        with replay_path.open("rb") as fh:
            buffer = pickle.load(fh)
    except Exception as err:  # noqa: BLE001 - a truncated pickle raises EOFError, UnpicklingError, ...
        raise _bad_checkpoint(run_dir, steps, replay_path, f"cannot be read ({type(err).__name__}: {err})") \
            from None
    if not isinstance(buffer, ReplayBuffer) or buffer.n_envs != cfg.n_envs:
        raise _bad_checkpoint(run_dir, steps, replay_path, f"does not hold this run's replay buffer (an SB3 "
                              f"ReplayBuffer of {cfg.n_envs} env{'s' if cfg.n_envs > 1 else ''})")
    return buffer


def _newer_final_model(run_dir: Path, ckpt: tuple[Path, dict], total_steps: int) -> tuple[Path, dict]:
    """What ``--resume`` starts from: the last checkpoint, unless the run's ``model.zip`` is newer. Runs
    trained before every run ended on a checkpoint of its final policy (and any run whose last checkpoint
    was lost) can have their last checkpoint inside the last rollouts, older than ``model.zip``: resuming
    from it retrained nothing but replaced ``model.zip`` by that older policy and dropped the evaluation
    rows after it. A finished ``model.zip`` (at or past ``total_steps``) is the run's end: the resume
    starts there (training nothing, rewriting only what is missing); one short of a larger
    ``--total-steps`` cannot be continued (the seed schedule's position is only in checkpoints), which
    is an error rather than a silent loss of steps."""
    model_zip, meta_path = run_dir / "model.zip", run_dir / "model.json"
    if not model_zip.is_file() or not meta_path.is_file():
        return ckpt
    try:
        meta = json.loads(meta_path.read_text())
        final = int(meta["timesteps"])
    except (OSError, ValueError, KeyError, TypeError):
        return ckpt  # (a model.json without its step count: the checkpoint is all there is to go by)
    steps = int(ckpt[1]["timesteps"])
    if final <= steps:
        return ckpt
    if final < total_steps:
        raise TrainConfigError(
            f"cannot resume {run_dir}: model.zip holds {final} steps but the last checkpoint only {steps}; "
            f"continuing from the checkpoint would discard {final - steps} trained steps. Train a new run "
            f"(another --out), or resume with --total-steps {final} or less to only finish this one")
    state = {**ckpt[1], "timesteps": final, "wall_time_s": float(meta.get("train_wall_time_s", 0.0)),
             "from_model_zip": True}
    return model_zip, state


def _check_checkpoint_model(run_dir: Path, ckpt: tuple[Path, dict], cfg: TrainConfig) -> None:
    """Before a resume changes anything: the checkpoint's model loads and fits the run's env."""
    from agents.sb3_agent import space_mismatch

    model = _load_checkpoint(run_dir, ckpt, cfg)
    env = make_env(cfg.env_id, cfg.env_overrides, flatten=cfg.algo == "dqn")
    try:
        problem = space_mismatch(model.observation_space, env.observation_space, "observation") or \
            space_mismatch(model.action_space, env.action_space, "action")
    finally:
        env.close()
    if problem:
        # (every checkpoint of the run has that layout: falling back to an earlier one cannot help)
        raise _bad_checkpoint(run_dir, int(ckpt[1]["timesteps"]), ckpt[0],
                              f"was trained for another env layout than {cfg.env_id} has now ({problem})",
                              how="the run's checkpoints all share that layout: evaluate its model.zip on the env "
                                  "it was trained on (with the code of then), or train again into another --out")


def _load_checkpoint(run_dir: Path, ckpt: tuple[Path, dict], cfg: TrainConfig, **kwargs):
    """Load a checkpoint's model (`algorithm_class(cfg.algo).load`); an unreadable zip or a model of another
    env layout is an error naming the file (SB3's own errors say neither)."""
    path, state = ckpt
    steps = int(state["timesteps"])
    try:
        return algorithm_class(cfg.algo).load(path, device=cfg.device, **kwargs)
    except Exception as err:  # noqa: BLE001 - SB3 raises ValueError, KeyError, zipfile/torch errors on a bad archive
        raise _bad_checkpoint(run_dir, steps, path, f"cannot be loaded as a {cfg.algo} model "
                              f"({type(err).__name__}: {err})") from err


def load_model(path: str | Path, *, device: str = "cpu"):
    """Load a trained model; its algorithm comes from the `model.json` written next to it (or the run's
    `config.yaml`), falling back to MaskablePPO. An unreadable `model.json` or `config.yaml` is a
    TrainConfigError naming it (see :func:`model_meta`)."""
    path = Path(path)
    meta = model_meta(path)
    cls = algorithm_class(meta.get("algo", "maskable_ppo"))
    return cls.load(path, device=device)


def model_meta(path: str | Path) -> dict:
    """What a loader needs to know about a saved model: algorithm, action wrapper, env. Read from the first
    `model.json` found (beside the model, or in the run folder above a checkpoint), else the run's
    `config.yaml`; one that cannot be read, or that names no algorithm memgym trains, is a TrainConfigError
    naming the file."""
    from agents.train_config import ALGORITHMS

    path = Path(path)

    def bad(candidate: Path, problem: str) -> TrainConfigError:
        return TrainConfigError(f"{candidate}: cannot tell how to load {path} ({problem}); memgym train writes it "
                                "with the model: restore it, or move it away (the algorithm is then read from the "
                                "run folder's other files, else taken to be maskable_ppo)")

    for candidate in (path.with_suffix(".json"), path.parent / "model.json", path.parent.parent / "model.json"):
        if candidate.exists() and candidate != path:
            try:
                meta = json.loads(candidate.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
                raise bad(candidate, f"not readable JSON: {err}") from None
            if not isinstance(meta, dict) or meta.get("algo", "maskable_ppo") not in ALGORITHMS:
                raise bad(candidate, f"expected a mapping whose 'algo' is one of {', '.join(ALGORITHMS)}")
            return meta
    for candidate in (path.parent / "config.yaml", path.parent.parent / "config.yaml"):
        if candidate.exists():
            try:
                data = load_yaml(candidate.read_text(encoding="utf-8"), candidate) or {}
            except (OSError, UnicodeDecodeError) as err:
                raise bad(candidate, f"not readable: {err}") from None
            except TrainConfigError as err:
                raise bad(candidate, str(err)) from None
            algo = data.get("algo", "maskable_ppo") if isinstance(data, dict) else None
            if algo not in ALGORITHMS:
                raise bad(candidate, f"expected a recipe whose 'algo' is one of {', '.join(ALGORITHMS)}")
            return {"algo": algo, "flatten_action": algo == "dqn", "env": data.get("env", {})}
    return {"algo": "maskable_ppo", "flatten_action": False}


def _versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0]}
    for mod in ("numpy", "torch", "gymnasium", "stable_baselines3", "sb3_contrib"):
        try:
            out[mod] = str(__import__(mod).__version__)
        except Exception:  # pragma: no cover - informational only
            out[mod] = "n/a"
    return out


def _policy_kwargs(policy_kwargs: dict) -> dict:
    """The recipe's policy_kwargs as SB3 takes them (activation_fn: the torch class for its name)."""
    import torch

    out = dict(policy_kwargs)
    if "activation_fn" in out:
        out["activation_fn"] = {
            "tanh": torch.nn.Tanh, "relu": torch.nn.ReLU, "elu": torch.nn.ELU,
            "leaky_relu": torch.nn.LeakyReLU, "gelu": torch.nn.GELU,
        }[out["activation_fn"]]
    return out


def _hyperparams(hyper: dict) -> dict:
    """The recipe's hyperparams as SB3 takes them: YAML has no tuples, and SB3 reads a 2-item
    ``train_freq`` ([4, episode]) only as a tuple."""
    out = dict(hyper)
    if isinstance(out.get("train_freq"), list):
        out["train_freq"] = tuple(out["train_freq"])
    return out


def _build_model(cfg: TrainConfig, env, seed: int, run_dir: Path):
    cls = algorithm_class(cfg.algo)
    policy_kwargs = _policy_kwargs(cfg.policy_kwargs)
    try:
        return cls(cfg.policy, env, seed=seed, tensorboard_log=str(run_dir / "tb"), verbose=0,
                   device=cfg.device, policy_kwargs=policy_kwargs or None, **_hyperparams(cfg.hyperparams))
    except TypeError as err:
        raise TrainConfigError(f"key 'hyperparams' of {cfg.algo}: {err}") from err


def check_recipe(cfg: TrainConfig) -> None:
    """What the recipe's values only show when used, checked before a run folder is written (else the run
    crashed after writing config.yaml and seeds.json, and that folder then refused the corrected command):
    the env is a MemGym env (a `MemoryEnv`: the baselines, the masks and the metrics need one), the policy
    fits its observation, and the model builds, once, on `n_envs` throwaway envs, with the recipe's
    hyperparams and policy_kwargs; an error names the key (each value is tried on its own to find it).
    The baselines and the warm start's agent are checked by :func:`check_agents`. Call it before seeding
    the run: building a model draws from the global RNGs."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    from envs import MemoryEnv

    if cfg.algo in ("ppo", "maskable_ppo") and cfg.hyperparams.get("normalize_advantage", True):
        # PPO normalises each minibatch's advantages by their std: NaN for a single sample (SB3's PPO
        # asserts it; sb3-contrib's MaskablePPO trained on into NaN logits and crashed mid-run)
        batch = cfg.hyperparams.get("batch_size", 64)
        rollout = cfg.hyperparams.get("n_steps", 2048) * cfg.n_envs
        if batch < 2:
            raise TrainConfigError(f"key 'hyperparams.batch_size' must be >= 2 for {cfg.algo} (advantages are "
                                   f"normalised per minibatch); got {batch}")
        if rollout < 2:
            raise TrainConfigError(f"key 'hyperparams.n_steps' times n_envs must be >= 2 for {cfg.algo} (a "
                                   f"rollout of one step has no advantage spread); got {rollout}")
        if cfg.algo == "maskable_ppo" and rollout % batch == 1:  # (SB3's PPO skips such a minibatch's
            # normalisation; MaskablePPO does not: the rollout's last minibatch of one sample is NaN)
            raise TrainConfigError(f"key 'hyperparams.batch_size' ({batch}) leaves a last minibatch of one sample "
                                   f"of the {rollout}-step rollout (n_steps {rollout // cfg.n_envs} x n_envs "
                                   f"{cfg.n_envs}), which MaskablePPO normalises to NaN; choose a batch_size "
                                   f"that divides {rollout} or leaves >= 2")
    if cfg.algo == "a2c" and cfg.hyperparams.get("normalize_advantage", False):
        # A2C normalises the rollout's advantages by their std: NaN for a rollout of one step, the logits
        # then too, and the run crashed at its second rollout (SB3 checks it for PPO only)
        rollout = cfg.hyperparams.get("n_steps", 5) * cfg.n_envs
        if rollout < 2:
            raise TrainConfigError(f"key 'hyperparams.n_steps' times n_envs must be >= 2 for a2c with "
                                   f"normalize_advantage: true (a rollout of one step has no advantage spread); "
                                   f"got {rollout}")
    train_freq = cfg.hyperparams.get("train_freq")
    if cfg.algo == "dqn" and isinstance(train_freq, list | tuple) and train_freq[1] == "episode" and cfg.n_envs > 1:
        # SB3 asserts this only when it collects the first rollout, after the run folder was written
        raise TrainConfigError(f"key 'hyperparams.train_freq' {list(train_freq)} trains after whole episodes, which "
                               f"SB3's DQN does with one env only; got n_envs {cfg.n_envs}: use n_envs: 1, or a "
                               f"train_freq in steps (an integer, or [{train_freq[0]}, step])")
    flatten = cfg.algo == "dqn"
    envs = [make_env(cfg.env_id, cfg.env_overrides, flatten=flatten) for _ in range(cfg.n_envs)]
    try:
        if not isinstance(envs[0].unwrapped, MemoryEnv):
            known = sorted(k for k in gym.registry if k.startswith("MemGym/"))
            raise TrainConfigError(f"key 'env.id': {cfg.env_id} is not a MemGym env (memgym train trains memory "
                                   f"policies on a MemoryEnv: its masks, metrics and baselines); registered ids: "
                                   f"{', '.join(known)}")
        if envs[0].unwrapped.config.horizon is None:  # (its validation episodes never ended: the run hung there)
            raise TrainConfigError(f"key 'env.overrides.horizon': {cfg.env_id} never ends (horizon: null), so its "
                                   f"validation and test episodes would not either; give a horizon, e.g. "
                                   f"env: {{id: {cfg.env_id}, overrides: {{horizon: 800}}}} (the endless world runs "
                                   f"unchanged up to it)")
        dict_obs = isinstance(envs[0].observation_space, gym.spaces.Dict)
        want = "MultiInputPolicy" if dict_obs else "MlpPolicy"
        if cfg.policy != want:
            raise TrainConfigError(f"key 'policy' must be {want} for {cfg.env_id} (its observation is "
                                   f"{'a Dict' if dict_obs else 'an array'}); got {cfg.policy!r}")
        vec = DummyVecEnv([lambda env=env: env for env in envs])
        cls = algorithm_class(cfg.algo)

        def build(hyper: dict, policy_kwargs: dict) -> None:
            cls(cfg.policy, vec, seed=0, verbose=0, device=cfg.device,
                policy_kwargs=_policy_kwargs(policy_kwargs) or None, **_hyperparams(hyper))

        try:
            build(cfg.hyperparams, cfg.policy_kwargs)
        except Exception as err:  # noqa: BLE001 - SB3 / torch raise Assertion, Type, Value, Runtime errors
            try:  # the algorithm's defaults alone: what fails there is the device (or the env), not a key
                build({}, {})
            except Exception as base:  # noqa: BLE001
                raise TrainConfigError(f"key 'device': {cfg.algo} cannot be built on device {cfg.device!r} for "
                                       f"{cfg.env_id} even with its default hyperparams ({type(base).__name__}: "
                                       f"{base})") from None
            for section, values in (("hyperparams", cfg.hyperparams), ("policy_kwargs", cfg.policy_kwargs)):
                for key, value in values.items():
                    try:
                        build({key: value}, {}) if section == "hyperparams" else build({}, {key: value})
                    except Exception as one:  # noqa: BLE001
                        raise TrainConfigError(f"key '{section}.{key}' is rejected by {cfg.algo} ({value!r}: "
                                               f"{type(one).__name__}: {one})") from None
            raise TrainConfigError(f"keys 'hyperparams' and 'policy_kwargs' are rejected together by {cfg.algo} "
                                   f"with n_envs {cfg.n_envs} ({type(err).__name__}: {err})") from None
    finally:
        for env in envs:
            env.close()


def check_agents(cfg: TrainConfig, *, baselines: bool = True, pretrain: bool = True) -> None:
    """The agents a run plays are usable before the run starts (they were first used after the run folder
    was written): every `eval.baselines` entry builds (an `sb3:` model file loads and fits the env, a
    `memsys:` module imports and its factory makes a memory system) and so does `pretrain.agent`; with
    `pretrain.improve: rollout` that agent must also declare that it can be copied (`rollout_refusal`).
    Errors name the key (agents.base.validate_agent_specs does the checking, as for `memgym bench`)."""
    from agents.base import validate_agent_specs

    probe = _bench().make_env(_bench_env(cfg))
    try:
        for wanted, key, names in ((baselines, "eval.baselines", list(cfg.eval.baselines)),
                                   (pretrain, "pretrain.agent", [cfg.pretrain.agent] if cfg.pretrain.agent else [])):
            if wanted and names:
                try:
                    validate_agent_specs(names, [probe.unwrapped])
                except ValueError as err:
                    raise TrainConfigError(f"key '{key}': {err}") from None
        if pretrain and cfg.pretrain.agent and cfg.pretrain.improve == "rollout":
            # (branching copies the agent: one that is not declared copyable would branch wrongly or crash)
            why = rollout_refusal(cfg.pretrain.agent)
            if why is not None:
                raise TrainConfigError(why)
    finally:
        probe.close()


# ----------------------------------------------------------------------------------------- warm start
def demo_seeds(run_seed: int, episodes: int, round_: int = 0) -> list[int]:
    """Training-pool seeds of the warm start's demonstrations (`pretrain:`; one block per improvement round):
    from the middle of the run's own schedule (`schedule_seed`), the part its workers reach last."""
    start = TRAIN_SEED_LIMIT // 2 + round_ * episodes
    return [schedule_seed(run_seed, start + j) for j in range(episodes)]


def pretrain_by_imitation(model, cfg: TrainConfig, run_seed: int) -> dict:
    """Behaviour cloning of `cfg.pretrain.agent` into the policy (and its returns into the value head).

    Demonstrations come from training-pool seeds (`demo_seeds`). An action the masks forbid (a
    heuristic's slot for an untargeted op) is mapped to the first allowed slot; a forbidden op is
    dropped. With `pretrain.improve: rollout` every statement step is branched on the alternatives, gain
    models are fitted and the demonstrations relabelled where an alternative pays on average
    (`agents.improve`): `improve_rounds` steps of policy iteration, each round's demonstrations played
    by the previous round's improved agent. Returns statistics (samples, final loss, agreement of the
    greedy policy with the labels and with the agent, each round's gain models, what was relabelled).
    """
    import torch as th
    from torch.nn import functional as F

    from agents.base import TARGETED, make_agent
    from agents.improve import GatedAgent, collect_demonstrations, fit_gain_model, improved_actions

    pre = cfg.pretrain
    gamma = float(cfg.hyperparams.get("gamma", 0.99))
    n_ops = 7
    improving = pre.improve == "rollout"
    agent: Any = pre.agent
    rounds: list[dict] = []
    models: dict = {}
    for r in range(pre.improve_rounds if improving else 1):
        names = (tuple(pre.improve_ops) + (("AGENT",) if r > 0 else ())) if improving else ()
        rec = collect_demonstrations(cfg.env_id, cfg.env_overrides, agent, demo_seeds(run_seed, pre.episodes, r),
                                     alternatives=names, workers=pre.workers, progress=cfg.progress_bar)
        if not improving:
            break
        th.manual_seed(run_seed)  # the torch RNG state after the warm start (PPO samples from it) is fixed by the seed
        models, fits = {}, {}
        for name in names:
            gain_model, fits[name] = fit_gain_model(rec, name, pre.improve_inputs, seed=run_seed + 100 * r)
            if gain_model is not None:
                models[name] = gain_model
        rounds.append({"round": r + 1, "agent": agent if isinstance(agent, str) else f"gated (round {r})",
                       "seeds": demo_seeds(run_seed, pre.episodes, r), "demo_mean_return": float(np.mean(rec.returns)),
                       "branches": int(rec.branches), "gain_models": fits})
        if r + 1 < pre.improve_rounds:
            agent = GatedAgent(make_agent(agent) if isinstance(agent, str) else agent, models, pre.margin)
    demo_returns = rec.returns
    targeted = TARGETED  # UPDATE, LINK, REFLECT, FORGET

    returns = np.zeros(len(rec.rewards))
    acc = 0.0
    for i in range(len(rec.rewards) - 1, -1, -1):
        acc = rec.rewards[i] + (0.0 if rec.ends[i] else gamma * acc)
        returns[i] = acc
    keys = list(rec.obs[0].keys())
    all_obs = {k: np.stack([o[k] for o in rec.obs]) for k in keys}
    all_masks = np.stack(rec.masks)

    def dataset(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(step indices, (op, slot) targets); a forbidden op is dropped, an untargeted op gets an allowed slot."""
        keep, actions = [], []
        for i, m in enumerate(rec.masks):
            op, slot = int(labels[i][0]), int(labels[i][1])
            if not m[op]:
                continue
            if not m[n_ops + slot]:
                if op in targeted:
                    continue
                slot = int(np.flatnonzero(m[n_ops:])[0])
            keep.append(i)
            actions.append((op, slot))
        return np.asarray(keep, dtype=np.int64), np.asarray(actions, dtype=np.int64).reshape(-1, 2)

    policy = model.policy
    critic_ids = {id(p) for m in (policy.value_net, getattr(policy.mlp_extractor, "value_net", None)) if m is not None
                  for p in m.parameters()}
    param_groups = [[p for p in policy.parameters() if id(p) not in critic_ids],
                    [p for p in policy.parameters() if id(p) in critic_ids]]
    rng = np.random.default_rng(run_seed)
    maskable = cfg.algo == "maskable_ppo"

    def heads(o, masks):
        dist = policy.get_distribution(o, action_masks=masks) if maskable else policy.get_distribution(o)
        return dist.distributions if maskable else dist.distribution

    def fit(keep: np.ndarray, act: np.ndarray) -> float:
        """Cross-entropy of the op head (and of the slot head on targeted ops), MSE of the value head."""
        policy.set_training_mode(True)
        opt = th.optim.Adam(policy.parameters(), lr=pre.learning_rate)
        is_targeted = np.isin(act[:, 0], sorted(targeted)).astype(np.float32)
        ret = returns[keep].astype(np.float32)
        loss_v = float("nan")
        for _ in range(pre.epochs):
            order = rng.permutation(len(keep))
            for start in range(0, len(keep), pre.batch_size):
                idx = order[start:start + pre.batch_size]
                rows = keep[idx]
                o, _ = policy.obs_to_tensor({k: v[rows] for k, v in all_obs.items()})
                a = th.as_tensor(act[idx], device=policy.device)
                op_head, slot_head = heads(o, all_masks[rows])
                # the slot only matters for targeted ops: cloning the slot of a WRITE would teach the slot
                # head "slot 0" four times out of five and drown the targets that matter
                w = th.as_tensor(is_targeted[idx], device=policy.device)
                log_prob = op_head.log_prob(a[:, 0]) + w * slot_head.log_prob(a[:, 1])
                values = policy.predict_values(o)
                target = th.as_tensor(ret[idx], device=policy.device)
                loss = -log_prob.mean() + 0.5 * F.mse_loss(values.flatten(), target)
                opt.zero_grad()
                loss.backward()
                # clip the actor and the critic apart: one global norm lets the value loss (returns of
                # scale ~5 at first) shrink the policy's gradient to nothing for the first epochs
                for group in param_groups:
                    th.nn.utils.clip_grad_norm_(group, 0.5)
                opt.step()
                loss_v = float(loss.item())
        policy.set_training_mode(False)
        return loss_v

    def agreement(keep: np.ndarray, act: np.ndarray) -> tuple[float, float]:
        is_targeted = np.isin(act[:, 0], sorted(targeted))
        agree, slot_agree = 0, 0
        with th.no_grad():
            for start in range(0, len(keep), 1024):
                rows = keep[start:start + 1024]
                o, _ = policy.obs_to_tensor({k: v[rows] for k, v in all_obs.items()})
                if maskable:
                    pred = policy._predict(o, deterministic=True, action_masks=all_masks[rows]).cpu().numpy()
                else:
                    pred = policy._predict(o, deterministic=True).cpu().numpy()
                sl = slice(start, start + len(rows))
                agree += int((pred[:, 0] == act[sl, 0]).sum())
                slot_agree += int(((pred[:, 1] == act[sl, 1]) & is_targeted[sl]).sum())
        return agree / max(len(keep), 1), slot_agree / max(int(is_targeted.sum()), 1)

    # With `improve: rollout`, the labels are the last round's actions improved by its gain models
    # (agents/improve.py): rollout classification policy iteration on the agent.
    labels, improve_stats = np.stack(rec.actions), None
    if improving:
        labels, gate = improved_actions(rec, models, pre.margin)
        improve_stats = {"method": pre.improve, "ops": list(pre.improve_ops), "inputs": list(pre.improve_inputs),
                         "margin": pre.margin, "rounds": rounds, **gate}
    keep, act = dataset(labels)
    loss_v = fit(keep, act)
    op_agree, slot_agree = agreement(keep, act)
    k_agent, a_agent = dataset(np.stack(rec.actions))
    stats = {"agent": pre.agent, "episodes": pre.episodes, "seeds": demo_seeds(run_seed, pre.episodes, max(len(rounds) - 1, 0)),
             "samples": int(len(keep)), "dropped": int(len(rec.actions) - len(keep)), "epochs": pre.epochs,
             "final_loss": loss_v, "op_agreement": op_agree, "slot_agreement_targeted": slot_agree,
             "op_agreement_with_agent": agreement(k_agent, a_agent)[0],
             "demo_mean_return": float(np.mean(demo_returns)), "improve": improve_stats}
    if pre.temperature != 1.0:
        # A cloned policy is nearly deterministic, and the policy gradient of an action taken with
        # probability p scales with 1 - p: RL could hardly move it. Dividing the logits by T keeps
        # every greedy choice and gives the alternatives enough probability to be tried and learned.
        with th.no_grad():
            model.policy.action_net.weight.div_(pre.temperature)
            model.policy.action_net.bias.div_(pre.temperature)
    return stats


# ----------------------------------------------------------------------------------------- bench glue
def _bench():
    from agents import bench

    return bench


def _bench_env(cfg: TrainConfig):
    """What agents.bench.evaluate accepts for the env: the id, or (with overrides) the id and overrides."""
    if not cfg.env_overrides:
        return cfg.env_id
    return {"id": cfg.env_id, "overrides": dict(cfg.env_overrides)}


def _row_return(row: dict) -> float:
    for key in ("return", "episode_return", "total_reward"):
        if key in row:
            return float(row[key])
    raise KeyError(f"bench row has no return field: {sorted(row)}")


def _row_accuracy(row: dict) -> float:
    if "accuracy" in row and row["accuracy"] is not None:
        return float(row["accuracy"])
    metrics = row.get("metrics") or {}
    value = metrics.get("accuracy")  # (None: the world's metrics of an episode without questions)
    return float("nan") if value is None else float(value)


def _episode_bar(total: int, desc: str, enabled: bool | None):
    """A tqdm bar over episodes on stderr (`enabled=None`: only when stderr is a terminal)."""
    from tqdm import tqdm

    if enabled is None:
        enabled = sys.stderr.isatty()
    return tqdm(total=total, desc=desc, unit="episodes", disable=not enabled, file=sys.stderr, leave=False)


def _evaluate_with_bar(bench, name: str, env: Any, seeds: Sequence[int], bar) -> list[dict]:
    bar.set_postfix_str(name if len(name) <= 40 else f"...{name[-37:]}", refresh=False)
    try:
        rows = list(bench.evaluate(name, env, list(seeds)))
    except (KeyboardInterrupt, ValueError):  # (an interrupt; a user error that already names itself)
        raise
    except BaseException as exc:  # noqa: BLE001 - a baseline's own code (a memsys: library, an sb3: model)
        # raised, SystemExit included (it ended the run silently): one line naming it, as memgym bench does
        msg = " ".join((str(exc) or type(exc).__name__).split())
        env_id = env["id"] if isinstance(env, dict) else env
        raise TrainConfigError(
            f"agent {name!r} failed while playing {env_id} (seeds {seeds[0]}..{seeds[-1]}): {type(exc).__name__}: "
            f"{msg} (`memgym bench --agents {name} --out DIR` writes its traceback to DIR/errors.txt)") from None
    bar.update(len(seeds))
    return rows


def evaluate_agents(agents: Sequence[str], cfg: TrainConfig, seeds: Sequence[int], *,
                    progress: bool | None = False) -> dict[str, list[dict]]:
    """Episodes of each agent on `seeds` through agents.bench.evaluate (the `memgym bench` path), with a
    progress bar over the episodes when `progress` (None: when stderr is a terminal)."""
    bench = _bench()
    env = _bench_env(cfg)
    bar = _episode_bar(len(agents) * len(seeds), "final test" if seeds and seeds[0] >= TEST_SEED_START
                       else "baselines", progress)
    try:
        return {name: _evaluate_with_bar(bench, name, env, seeds, bar) for name in agents}
    finally:
        bar.close()


def summarise(episodes: dict[str, list[dict]]) -> dict[str, dict]:
    """Per agent: mean return, accuracy, normalised score (0 = random, 1 = oracle) with a 95% CI."""
    bench = _bench()
    out: dict[str, dict] = {}
    means = {name: float(np.mean([_row_return(r) for r in rows])) for name, rows in episodes.items() if rows}
    for name, rows in episodes.items():
        if not rows:
            continue
        returns = np.array([_row_return(r) for r in rows], dtype=float)
        accs = np.array([_row_accuracy(r) for r in rows], dtype=float)
        entry: dict[str, Any] = {
            "episodes": len(rows),
            "mean_return": float(returns.mean()),
            "return_ci": [float(x) for x in bench.bootstrap_ci(returns)],
            "mean_accuracy": float(np.nanmean(accs)) if np.isfinite(accs).any() else float("nan"),
        }
        if "random" in means and "oracle" in means:
            norm = np.array([bench.normalised_score(v, means["random"], means["oracle"]) for v in returns])
            entry["normalised"] = float(norm.mean())
            entry["normalised_ci"] = [float(x) for x in bench.bootstrap_ci(norm)]
        out[name] = entry
    return out


def is_heuristic(name: str) -> bool:
    """Whether a baseline counts as a heuristic to beat: a registered agent that reads no hidden payloads,
    not `random` (the floor), not an oracle or ablated oracle (privileged), not a trained model (`sb3:`)
    or an external memory system (`memsys:`)."""
    from agents.bench import FLOORS

    if name == "random" or name in FLOORS or name.startswith(("sb3:", "memsys:", "oracle")):
        return False  # (FLOORS: `abstain` stores nothing; the headline pairs the learned policy with it apart)
    from agents.base import make_agent

    try:
        return not getattr(make_agent(name), "privileged", False)
    except (ValueError, TypeError):
        return False


def best_heuristic(summary: dict[str, dict], exclude: Sequence[str] = ("random", "oracle")) -> str | None:
    names = [n for n in summary if n not in exclude and is_heuristic(n)]
    if not names:
        return None
    return max(names, key=lambda n: summary[n]["mean_return"])


def summary_table(summary: dict[str, dict]) -> str:
    """A Markdown table, best first. A ``|`` in an agent's name is written ``\\|`` (as in bench's tables:
    an ``sb3:runs/a|b/model.zip`` baseline would otherwise add a cell to its row)."""
    from agents.report import _md_cell

    lines = ["| agent | episodes | mean return [95% CI] | accuracy | normalised [95% CI] |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for name, s in sorted(summary.items(), key=lambda kv: -kv[1]["mean_return"]):
        lo, hi = s["return_ci"]
        norm = "n/a"
        if "normalised" in s:
            nlo, nhi = s["normalised_ci"]
            norm = f"{s['normalised']:.3f} [{nlo:.3f}, {nhi:.3f}]"
        lines.append(f"| {_md_cell(name)} | {s['episodes']} | {s['mean_return']:.3f} [{lo:.3f}, {hi:.3f}] | "
                     f"{_acc(s['mean_accuracy'])} | {norm} |")
    return "\n".join(lines)


def run_labels(run_dirs: Sequence[Path], seeds: Sequence[int]) -> list[str]:
    """One distinct label per run: `learned s<seed>` when the training seeds are distinct, else the run
    folder's name, else its path (the headline plays each folder once: `distinct_runs`), else its resolved
    path."""
    for candidates in ([f"learned s{s}" for s in seeds], [f"learned {Path(r).name}" for r in run_dirs],
                       [f"learned {r}" for r in run_dirs]):
        if len(set(candidates)) == len(candidates):
            return candidates
    return [f"learned {Path(r).resolve()}" for r in run_dirs]


def distinct_runs(run_dirs: Sequence[Path]) -> list[Path]:
    """The run folders, each once (the first spelling kept, in order): a folder given twice (`runs/a runs/a`,
    `runs/a ./runs/a/`, a link to it) would count one model as two training seeds in the pooled row and
    narrow its CI, as `memgym bench` plays a name given twice once. A note names what was dropped."""
    seen: dict[Path, Path] = {}
    for run in run_dirs:
        first = seen.setdefault(run.resolve(), run)
        if first is not run:
            _say(f"--headline: {run} is the run folder {first} again: played once")
    return list(seen.values())


#: recipe keys that do not change the trained policy: a difference there does not make two runs two recipes
_SAME_RECIPE_IGNORES = ("seed", "name", "versions", "progress_bar", "extended", "device", "checkpoint_freq")


def _recipe_differences(configs: Sequence[dict]) -> list[str]:
    """Dotted keys in which the runs' resolved recipes (`config.yaml`) differ, but those that do not change the
    policy (`_SAME_RECIPE_IGNORES`, `eval.baselines`, `eval.test_episodes`: what is played after training)."""
    def policy_part(cfg: dict) -> dict:
        cfg = {k: v for k, v in cfg.items() if k not in _SAME_RECIPE_IGNORES}
        if isinstance(cfg.get("eval"), dict):
            cfg["eval"] = {k: v for k, v in cfg["eval"].items() if k not in ("baselines", "test_episodes")}
        return cfg

    keys: dict[str, None] = {}
    for other in configs[1:]:
        keys.update(dict.fromkeys(_differing_keys(policy_part(configs[0]), policy_part(other))))
    return sorted(keys)


def _env_label(env_id: str, overrides: dict | None) -> str:
    return env_id + (f" with {overrides}" if overrides else "")


def _headline_env(run_dirs: Sequence[Path], metas: Sequence[dict], env: str | None) -> tuple[str, dict, bool]:
    """The env the headline tests on and the runs' overrides it applies (before `--set`), and whether the
    runs were trained on different envs. Without `env` that is the runs' env, and runs of different envs
    (`model.json`'s env id or overrides) are refused, naming each run's: the first run's env was taken
    and every run tested and pooled on it. With `env` every run is tested on it, with the overrides all
    runs were trained with."""
    trained = [(m["env"]["id"], dict(m["env"].get("overrides") or {})) for m in metas]
    mixed = any(t != trained[0] for t in trained[1:])
    if mixed and env is None:
        each = "; ".join(f"{run} on {_env_label(*t)}" for run, t in zip(run_dirs, trained))
        raise TrainConfigError(f"--headline: the runs were trained on different envs ({each}); a table tests "
                               "every run on one env and pools them: give --env ID to test each run on it (with "
                               "the overrides all runs were trained with, and --set), or compare runs of one env")
    shared = {k: v for k, v in trained[0][1].items() if all(k in o and o[k] == v for _, o in trained[1:])}
    return env or trained[0][0], shared, mixed


def headline(run_dirs: Sequence[str | Path], *, env: str | None = None, overrides: dict | None = None,
             episodes: int = 50, baselines: Sequence[str] | None = None,
             progress: bool | None = None) -> tuple[str, dict]:
    """The learned policies of several runs (training seeds) against every baseline on the test seeds.

    Each policy and baseline plays `episodes` test seeds (10000, ...) of `env` (default: the runs' env)
    with `overrides` (e.g. `{"horizon": 800}`) through `agents.bench.evaluate`. The normalised score
    (0 = random, 1 = oracle, per-episode returns against the mean random and oracle returns) gets a
    95% bootstrap CI; the learned policy is reported per run (`run_labels`: by seed, or by folder when
    seeds repeat) and pooled over runs. A folder given twice is played once (`distinct_runs`); runs trained
    on different envs need `env` (`_headline_env`); runs of different recipes are compared, with a note that
    the pooled row mixes them (`recipes_differ_in` in the numbers). `progress`: a bar over the episodes
    (default: when stderr is a terminal). Returns the Markdown tables (a ``|`` in an agent or run label written ``\\|``, as in bench's
    tables) and the raw numbers, keyed by the labels as they are.
    """
    from agents.report import _md_cell

    bench = _bench()
    run_dirs = [Path(r) for r in run_dirs]
    if not run_dirs:
        raise TrainConfigError("--headline needs at least one run folder")
    run_dirs = distinct_runs(run_dirs)
    metas = [_finished_run(r) for r in run_dirs]
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
        raise TrainConfigError(f"--episodes must be an integer >= 1, got {episodes!r}")
    env_id, over, mixed_envs = _headline_env(run_dirs, metas, env)
    over = {**over, **(overrides or {})}
    configs = [_run_config(r) for r in run_dirs]
    differ = _recipe_differences(configs)
    id_label = "--env" if env else f"{run_dirs[0] / 'model.json'}: env.id"
    check_env(env_id, over, id_label=id_label, override_label="--set {}", overrides_label="--set")
    if not env_id.split(":", 1)[-1].startswith("MemGym/"):  # the headline plays MemGym baselines and metrics
        import envs

        raise TrainConfigError(f"{id_label}: {env_id} is not a MemGym env; registered ids: "
                               f"{', '.join(envs.registered_ids())}")
    spec: Any = {"id": env_id, "overrides": over} if over else env_id
    seeds = list(range(TEST_SEED_START, TEST_SEED_START + episodes))
    if baselines is not None:
        # (stripped: " abstain" was not the floor `abstain` for is_heuristic / FLOORS, nor in the table)
        names = [n.strip() for n in baselines if n.strip()]
        check_agent_names(names, "--baselines")
    else:  # every run's (a recipe's list is the same in all its runs)
        names = list(dict.fromkeys(n for c in configs for n in (c.get("eval") or {}).get("baselines", [])))
    for needed in ("random", "oracle"):
        if needed not in names:
            names.append(needed)
    # every model must fit the env before minutes of baselines are played (SB3ModelError names the key)
    from agents.sb3_agent import SB3Agent

    probe = bench.make_env(spec)
    try:
        for run in run_dirs:
            SB3Agent(run / "model.zip").check_env(probe)
    finally:
        probe.close()
    labels = run_labels(run_dirs, [m["seed"] for m in metas])
    bar = _episode_bar(len(seeds) * (len(names) + len(run_dirs)), "memgym train --headline", progress)
    rows: dict[str, list[dict]] = {}
    try:
        for name in names:
            rows[name] = _evaluate_with_bar(bench, name, spec, seeds, bar)
        learned: dict[str, list[dict]] = {}
        for run, label in zip(run_dirs, labels):
            learned[label] = _evaluate_with_bar(bench, f"sb3:{run / 'model.zip'}", spec, seeds, bar)
    finally:
        bar.close()
    rnd = float(np.mean([_row_return(r) for r in rows["random"]]))
    orc = float(np.mean([_row_return(r) for r in rows["oracle"]]))

    def entry(eps: list[dict]) -> dict:
        ret = np.array([_row_return(r) for r in eps])
        norm = np.array([bench.normalised_score(v, rnd, orc) for v in ret])
        acc = np.array([_row_accuracy(r) for r in eps])
        return {"episodes": len(eps), "mean_return": float(ret.mean()), "return_ci": list(bench.bootstrap_ci(ret)),
                "normalised": float(norm.mean()), "normalised_ci": list(bench.bootstrap_ci(norm)),
                "mean_accuracy": float(np.nanmean(acc)) if np.isfinite(acc).any() else float("nan")}

    def pooled(runs: list[list[dict]]) -> dict:
        """The runs together: every run plays the same seeds, whose difficulty moves all runs alike, so
        the CI resamples seeds (the runs' mean per seed), not the runs' episodes as if independent
        (that made it ~sqrt(runs) too narrow)."""
        ret = np.mean([[_row_return(r) for r in eps] for eps in runs], axis=0)
        norm = np.array([bench.normalised_score(v, rnd, orc) for v in ret])
        acc = np.array([_row_accuracy(r) for eps in runs for r in eps])
        return {"episodes": sum(len(eps) for eps in runs), "mean_return": float(ret.mean()),
                "return_ci": list(bench.bootstrap_ci(ret)), "normalised": float(norm.mean()),
                "normalised_ci": list(bench.bootstrap_ci(norm)),
                "mean_accuracy": float(np.nanmean(acc)) if np.isfinite(acc).any() else float("nan")}

    table = {name: entry(eps) for name, eps in rows.items()}
    per_run = {name: entry(eps) for name, eps in learned.items()}
    pooled_name = f"learned (pooled, {len(learned)} runs)"
    table_all = {pooled_name: pooled(list(learned.values())), **per_run, **table}
    times = {label: m.get("train_wall_time_s") for label, m in zip(labels, metas)}
    label = env_id + (f" with {over}" if over else "")
    lines = [f"{label}: test seeds {seeds[0]}..{seeds[-1]} ({episodes} episodes per agent)", "",
             "| agent | normalised score [95% CI] | mean return [95% CI] | accuracy | training time |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for name, e in sorted(table_all.items(), key=lambda kv: -kv[1]["normalised"]):
        t = times.get(name)
        lines.append(f"| {_md_cell(name)} | {e['normalised']:.3f} [{e['normalised_ci'][0]:.3f}, {e['normalised_ci'][1]:.3f}] | "
                     f"{e['mean_return']:.3f} [{e['return_ci'][0]:.3f}, {e['return_ci'][1]:.3f}] | "
                     f"{_acc(e['mean_accuracy'])} | {'' if t is None else f'{t / 60:.1f} min'} |")
    seeds_means = [e["normalised"] for e in per_run.values()]
    lines += ["", f"Learned policy over training seeds: normalised {np.mean(seeds_means):.3f} "
              f"(min {np.min(seeds_means):.3f}, max {np.max(seeds_means):.3f})."]
    if differ:  # (pooled as if training seeds of one recipe: the reader must know they are not)
        lines.append(f"Note: the runs are not training seeds of one recipe (their config.yaml differ in "
                     f"{', '.join(differ)}): the pooled row and the line above mix them.")
    if mixed_envs:
        lines.append("Trained on: " + "; ".join(f"{lab}: {_env_label(m['env']['id'], m['env'].get('overrides'))}"
                                                for lab, m in zip(labels, metas)) + f"; each tested on {label}.")
    best = max((n for n in table if is_heuristic(n)), key=lambda n: table[n]["normalised"], default=None)

    def paired_with(ref_name: str, what: str) -> dict[str, dict]:
        # Paired on the same test seeds: the episode-to-episode spread (some worlds are harder for every
        # agent) cancels, so the difference's CI is far narrower than either score's.
        ref = np.array([_row_return(r) for r in rows[ref_name]])
        diffs = {name: np.array([_row_return(r) for r in eps]) - ref for name, eps in learned.items()}
        diffs[f"learned (mean of {len(learned)} runs)"] = np.mean(list(diffs.values()), axis=0)
        lines.extend(["", f"Paired on the same seeds with {what} (learned return minus {ref_name}'s, per episode, "
                      "over the oracle - random range; 95% bootstrap CI):", "",
                      "| difference | normalised [95% CI] | episodes better / worse / equal |", "| --- | ---: | ---: |"])
        out = {}
        for name, d in diffs.items():
            norm = d / (orc - rnd)
            lo, hi = bench.bootstrap_ci(norm)
            counts = (int((d > 1e-9).sum()), int((d < -1e-9).sum()), int((np.abs(d) <= 1e-9).sum()))
            out[name] = {"normalised": float(norm.mean()), "normalised_ci": [float(lo), float(hi)],
                         "better_worse_equal": list(counts)}
            lines.append(f"| {_md_cell(f'{name} - {ref_name}')} | {norm.mean():+.3f} [{lo:+.3f}, {hi:+.3f}] | "
                         f"{counts[0]} / {counts[1]} / {counts[2]} |")
        return out

    paired: dict[str, dict] = {}
    if best is not None:
        lines.append(f"Best heuristic: {best} {table[best]['normalised']:.3f}.")
        paired = paired_with(best, "the best heuristic")
    floors = {f: paired_with(f, "the do-nothing floor") for f in bench.FLOORS if f in rows}
    return "\n".join(lines), {"env": label, "seeds": seeds, "table": table_all, "best_heuristic": best,
                               "paired": paired, "paired_floors": floors, "recipes_differ_in": differ,
                               "trained_on": {lab: _env_label(m["env"]["id"], m["env"].get("overrides"))
                                              for lab, m in zip(labels, metas)}}


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise TrainConfigError(f"{path}: cannot read {what} ({err})") from None


def _run_config(run_dir: Path) -> dict:
    """The run folder's resolved `config.yaml`, or a clear error naming it."""
    path = run_dir / "config.yaml"
    if not path.is_file():
        raise TrainConfigError(f"{path} not found: {run_dir} is not a run folder of `memgym train`")
    try:
        data = load_yaml(path.read_text(encoding="utf-8"), path)
    except (OSError, UnicodeDecodeError) as err:
        raise TrainConfigError(f"{path}: not valid YAML ({err}); it is the run's recipe: restore it or "
                               "train into another --out") from None
    except TrainConfigError as err:  # (invalid YAML, or a key given twice)
        raise TrainConfigError(f"{err}; it is the run's recipe: restore it or train into another --out") from None
    if not isinstance(data, dict):
        raise TrainConfigError(f"{path}: expected the run's resolved recipe (a mapping), got {type(data).__name__}")
    return data


def _finished_run(run_dir: Path) -> dict:
    """`model.json` of a finished run (what --headline compares), or a clear error naming what is missing."""
    if not run_dir.is_dir():
        raise TrainConfigError(f"--headline: run folder {run_dir} not found")
    for name in ("model.zip", "model.json"):
        if not (run_dir / name).is_file():
            raise TrainConfigError(f"--headline: {run_dir} holds no {name}: not a finished run (a stopped run "
                                   f"finishes with memgym train --resume --out {run_dir})")
    meta = _read_json(run_dir / "model.json", "the model's metadata")
    if not (isinstance(meta, dict) and isinstance(meta.get("env"), dict) and isinstance(meta["env"].get("id"), str)
            and "seed" in meta):
        raise TrainConfigError(f"{run_dir / 'model.json'}: expected the keys env.id and seed (written by memgym train)")
    return meta


def read_baselines(path: str | Path) -> dict[str, dict]:
    """The baselines' summary in a run's `baselines.json` (agent -> its means on the validation seeds), or a
    TrainConfigError naming the file: not JSON, or not a summary of agents with their mean return and
    accuracy (numbers; null where there was none)."""
    path = Path(path)

    def number(v: Any) -> bool:
        return v is None or (isinstance(v, int | float) and not isinstance(v, bool))

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        problem = f"not readable JSON: {err}"
    else:
        summary = data.get("summary") if isinstance(data, dict) else None
        if isinstance(summary, dict) and all(
                isinstance(row, dict) and number(row.get("mean_return", "")) and number(row.get("mean_accuracy", ""))
                for row in summary.values()):
            return summary
        problem = "expected {\"seeds\": [...], \"summary\": {agent: {\"mean_return\": ..., \"mean_accuracy\": ...}}}"
    raise TrainConfigError(f"{path}: not the run's baselines ({problem}); it is recomputed when missing: delete it "
                           "and run the same command again (it plays the baselines on the validation seeds again)")


# ----------------------------------------------------------------------------------------- plot
def plot_learning_curve(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """`learning_curve.png`: validation return and accuracy against steps, baselines as lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    out = Path(out) if out else run_dir / "learning_curve.png"
    rows = read_evaluations(run_dir / "evaluations.csv")
    baselines = {}
    if (run_dir / "baselines.json").exists():
        # (a mean without a value, e.g. the accuracy of episodes without questions, is null: no line)
        baselines = {name: {k: (math.nan if v is None else v) for k, v in row.items()}
                     for name, row in read_baselines(run_dir / "baselines.json").items()}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    steps = np.array([r["timesteps"] for r in rows])
    for ax, key, label in ((axes[0], "mean_return", "validation return"),
                           (axes[1], "mean_accuracy", "validation accuracy")):
        if rows:
            values = np.array([r[key] for r in rows])
            ax.plot(steps, values, marker="o", color="tab:blue", label="learned policy")
            if key == "mean_return":
                std = np.array([r["std_return"] for r in rows])
                ax.fill_between(steps, values - std, values + std, color="tab:blue", alpha=0.15)
        base_key = "mean_return" if key == "mean_return" else "mean_accuracy"
        best = best_heuristic(baselines)
        if best is not None:
            ax.axhline(baselines[best][base_key], color="tab:red", ls="--", label=f"best heuristic ({best})")
        for name, style in (("oracle", ("tab:green", ":")), ("random", ("grey", ":"))):
            if name in baselines:
                ax.axhline(baselines[name][base_key], color=style[0], ls=style[1], label=name)
        ax.set_xlabel("environment steps")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, loc="best")
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text()) if (run_dir / "config.yaml").exists() else {}
    fig.suptitle(f"{cfg.get('env', {}).get('id', '')} - {cfg.get('algo', '')} seed {cfg.get('seed', '')}")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


# ----------------------------------------------------------------------------------------- train
#: what `memgym train` imports (lazily, deep inside): the `train` extra, with matplotlib for the curve
TRAIN_MODULES = {"torch": "torch", "stable_baselines3": "stable-baselines3", "sb3_contrib": "sb3-contrib",
                 "tqdm": "tqdm", "rich": "rich", "tensorboard": "tensorboard", "matplotlib": "matplotlib"}


def require_train_extra() -> None:
    """Raise TrainConfigError naming ``pip install 'memgym[train]'`` when a module training needs is not
    installed, before anything is written (without it the run died deep inside with a raw
    ModuleNotFoundError and left an empty run folder behind)."""
    import importlib.util

    missing = [dist for mod, dist in TRAIN_MODULES.items() if importlib.util.find_spec(mod) is None]
    if missing:
        raise TrainConfigError(f"training needs the train extra: pip install 'memgym[train]' (missing: "
                               f"{', '.join(missing)}; install torch first: the README's install section)")


def _flat_settings(section: dict, prefix: str = "") -> str:
    """`{"eval": {"freq": 1024}}` as `eval.freq 1024` (for notes)."""
    return ", ".join(_flat_settings(v, f"{prefix}{k}.") if isinstance(v, dict) else f"{prefix}{k} {v}"
                     for k, v in section.items())


def _legacy_schedule(run_dir: Path, run_seed: int) -> bool:
    """Whether the run in `run_dir` walks the rotation schedule of before SCHEDULE_VERSION 2 (its seeds.json
    has no `train.schedule`): a resume must replay the worlds the run was trained on. Seeds below
    ROTATION_SEEDS have one schedule either way; for the others a seeds.json that cannot tell is an error
    naming it, before anything is changed."""
    if run_seed < ROTATION_SEEDS:
        return False
    path = run_dir / "seeds.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        doc, why = None, f"not readable JSON ({err})"
    else:
        why = "expected {\"train\": {...}, ...} as memgym train writes it"
    train = doc.get("train") if isinstance(doc, dict) else None
    version = train.get("schedule", 1) if isinstance(train, dict) else None
    if version not in (1, SCHEDULE_VERSION):
        if isinstance(train, dict):
            why = f"key 'train.schedule' must be {SCHEDULE_VERSION} (or absent: a run of before it), got {version!r}"
        raise TrainConfigError(f"cannot resume: {path}: {why}; it says which training-seed schedule run seed "
                               f"{run_seed} was trained on: restore it, or train again into another --out")
    return version == 1


def _check_resume_options(run_dir: Path, stored: dict, run_seed: int, run_quick: Any, cfg: TrainConfig, *,
                          config_path: str | Path | None, seed: int | None, quick: bool, n_envs: int | None,
                          total_steps: int | None, extended: bool = False) -> None:
    """With --resume, --seed, --n-envs, --quick and --config must agree with the run in `run_dir` (its
    config.yaml): the run continues as it was started, and an option that would be ignored is an error.
    Only `eval.baselines` may differ in the --config (they train nothing): the run keeps its own, and a note
    names the ones the recipe adds or drops."""
    where = run_dir / "config.yaml"
    how = "--resume continues a run as it was started: drop the option, or train a new run into another --out"
    if seed is not None and seed != run_seed:
        raise TrainConfigError(f"--seed {seed} is not the seed of the run in {run_dir} ({run_seed}, in {where}); {how}")
    if n_envs is not None and n_envs != cfg.n_envs:
        raise TrainConfigError(f"--n-envs {n_envs} is not the run's n_envs ({cfg.n_envs}, in {where}; its checkpoints "
                               f"hold one env and seed-schedule position per env); {how}")
    if quick and not run_quick:
        raise TrainConfigError(f"--quick: the run in {run_dir} is not a --quick run (quick: false in {where}); {how}")
    if config_path is not None:
        # in the form the run was started with: a --quick run's recipe with its quick: section merged, whether
        # or not --quick is given again (as --seed and --n-envs, an option not given means the run's)
        recipe = TrainConfig.from_yaml(config_path, quick=bool(quick or run_quick))
        changes = {k: v for k, v in (("n_envs", n_envs), ("total_steps", total_steps)) if v is not None}
        if changes:
            recipe = recipe.replace(**changes)
        # the budget is --total-steps' business (a run may have been extended, and config.yaml then holds
        # the extended budget); the name is the file's stem; the baselines train nothing (they only add
        # rows to the curve and the summary: a recipe that gained one still continues its runs, with a note)
        budget = total_steps is not None or extended
        ignore = ("versions", "progress_bar", "extended", "name") + (("total_steps",) if budget else ())
        # the run's recipe as resolved now (`cfg`: keys added since its config.yaml was written take their
        # defaults, as in the recipe compared with it)
        differ = [k for k in _differing_keys(cfg.to_dict(), recipe.to_dict(), ignore=ignore) if k != "eval.baselines"]
        if differ:
            form = ", compared with its quick: section merged: the run is a --quick run" if run_quick else ""
            raise TrainConfigError(f"--config {config_path} is not the recipe of the run in {run_dir} (it differs from "
                                   f"{where} in {', '.join(differ)}{form}); {how}")
        added = [b for b in recipe.eval.baselines if b not in cfg.eval.baselines]
        dropped = [b for b in cfg.eval.baselines if b not in recipe.eval.baselines]
        if added or dropped:  # accepted, but said: the final test plays the run's own list
            what = "; ".join(part for part in (f"adds {', '.join(added)}" if added else "",
                                               f"drops {', '.join(dropped)}" if dropped else "") if part)
            _say(f"note: --config {config_path} {what} in eval.baselines; the resume keeps the run's own list "
                 f"({', '.join(cfg.eval.baselines) or 'none'}, in {where}) for its curve and final test. Other "
                 f"baselines on the test seeds: memgym train --headline {run_dir} --baselines A,B,...")


def default_run_dir(name: str, seed: int, quick: bool = False) -> Path:
    """`runs/<name>_s<seed>`, and `runs/<name>_quick_s<seed>` for `--quick` (a quick run in the full run's
    folder made the full run's command refuse to start: "already holds a run")."""
    return Path("runs") / f"{name or 'run'}{'_quick' if quick else ''}_s{seed}"


def check_run_dir(run_dir: Path, label: str) -> None:
    """Before anything is built or written: `run_dir` can become the run folder. It must not be a file (or
    any other non-folder), no part of its path may be a file, and the folder (or, when it does not exist
    yet, its nearest existing parent) must be writable. Nothing is created here (a refused recipe leaves
    no empty folder behind); `label` names the input in the error (`--out PATH`)."""
    if os.path.lexists(run_dir) and not run_dir.is_dir():
        what = "a file of that name exists" if run_dir.is_file() else "it exists and is not a folder"
        raise TrainConfigError(f"{label}: {what} (give a folder: the run folder is created there)")
    existing = run_dir
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise TrainConfigError(f"{label}: {existing} is a file, not a folder (a part of the path must be a folder "
                               "to hold the run folder)")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise TrainConfigError(f"{label}: {existing} is not writable (choose a folder you can write to)")


def train(config_path: str | Path | None, seed: int | None = None, out_dir: str | Path | None = None,
          quick: bool = False,
          resume: bool = False, *, n_envs: int | None = None, total_steps: int | None = None,
          stop_after: int | None = None, progress_bar: bool | None = None,
          test_eval: bool = True) -> TrainResult:
    """Train one policy; returns where everything went.

    `config_path`: YAML recipe (on `resume` the run folder's `config.yaml` is used: a recipe given then must
    be the run's). `seed`: training seed in [0, 2**32) (default 0; on `resume` the run's, and one given must
    be it; so must `n_envs` and `quick`). `out_dir`: the run folder (default `runs/<name>_s<seed>`, with
    `quick` `runs/<name>_quick_s<seed>`; on `resume` too, from `config_path`, `seed` and `quick`).
    `quick`: merge the recipe's `quick:` section, or without one the default quick form (a few thousand
    steps). `resume`: continue from the run folder's latest checkpoint. `stop_after`: stop this session at
    the end of the rollout that reaches that many total steps (after its update), saving a checkpoint with
    the session: a resume then goes on exactly as the uninterrupted run (at or past `total_steps`: a normal
    finish). `test_eval`: run the final test on the benchmark's seeds.

    A new run that fails with an error before its first checkpoint (a value SB3 refuses only while
    training, a baseline that crashes) has what it wrote moved to `crashed-<n>/` in the run folder before
    the error goes on: the folder then holds nothing to resume, and the corrected command starts there."""
    new_run: list[Path] = []
    try:
        return _train(config_path, seed, out_dir, quick, resume, n_envs=n_envs, total_steps=total_steps,
                      stop_after=stop_after, progress_bar=progress_bar, test_eval=test_eval, new_run=new_run)
    except Exception:
        # (not KeyboardInterrupt: an interrupt returns, and the same command then starts the run again)
        if new_run and not (new_run[0] / "model.zip").exists() and not _checkpoint_steps(new_run[0]):
            aside = _set_aside_partial(new_run[0], _RUN_FILES, "crashed")
            if aside is not None:
                _say(f"the run failed before its first checkpoint: what it wrote is moved to {aside}, so that the "
                     f"corrected command can start it in {new_run[0]}")
        raise


def _train(config_path: str | Path | None, seed: int | None, out_dir: str | Path | None, quick: bool,
           resume: bool, *, n_envs: int | None, total_steps: int | None, stop_after: int | None,
           progress_bar: bool | None, test_eval: bool, new_run: list[Path]) -> TrainResult:
    """:func:`train`; appends the run folder to `new_run` once a new run begins to write it."""
    if seed is not None:
        _check_seed(seed, "--seed")
    if stop_after is not None and (isinstance(stop_after, bool) or not isinstance(stop_after, int) or stop_after < 1):
        raise TrainConfigError(f"--stop-after must be an integer >= 1 (the step count at which this session stops), "
                               f"got {stop_after!r}")
    require_train_extra()
    legacy_schedule = False
    if resume:
        if out_dir is not None:
            run_dir, out_label, where = Path(out_dir), f"--out {out_dir}", ""
        elif config_path is not None:
            # the command that started the run, plus --resume: its default folder, derived as a fresh run derives it
            run_dir = default_run_dir(TrainConfig.from_yaml(config_path, quick=quick).name,
                                      0 if seed is None else seed, quick)
            out_label = f"the default run folder {run_dir} (see --out)"
            where = (f" (the default run folder of --config {config_path}{' --quick' if quick else ''} --seed "
                     f"{0 if seed is None else seed}; give --out for a run elsewhere)")
        else:
            raise TrainConfigError("--resume needs --out (the run folder to continue) or the --config (with the "
                                   "--seed and --quick) that started a run in its default folder")
        if not (run_dir / "config.yaml").exists():
            raise TrainConfigError(f"cannot resume: {run_dir}/config.yaml not found (not a run folder){where}")
        check_run_dir(run_dir, out_label)
        stored = _run_config(run_dir)
        run_seed = stored.pop("seed", None)
        if isinstance(run_seed, bool) or not isinstance(run_seed, int) or not 0 <= run_seed < RUN_SEED_LIMIT:
            raise TrainConfigError(f"{run_dir / 'config.yaml'}: key 'seed' must be the run's seed (an integer "
                                   f"in [0, {RUN_SEED_LIMIT - 1}]), got {run_seed!r}")
        stored.pop("versions", None)
        run_quick = stored.pop("quick", False)
        extended = bool(stored.pop("extended", None))
        try:
            cfg = TrainConfig.from_dict(stored)
        except TrainConfigError as err:
            raise TrainConfigError(f"{run_dir / 'config.yaml'}: {err}") from None
        # --resume goes on with the run's own recipe, seed and envs: an option saying otherwise is refused (it
        # was ignored); the same values (the command that started the run, plus --resume) are fine
        _check_resume_options(run_dir, stored, run_seed, run_quick, cfg, config_path=config_path, seed=seed,
                              quick=quick, n_envs=n_envs, total_steps=total_steps, extended=extended)
        seed = run_seed
        # everything --resume reads is checked before anything in the run folder changes
        legacy_schedule = _legacy_schedule(run_dir, run_seed)
        ckpt = latest_checkpoint(run_dir)
        if ckpt is None:
            raise TrainConfigError(f"cannot resume: no checkpoint in {run_dir / CHECKPOINT_DIR} (the run stopped "
                                   "before its first one): run the same command without --resume to start it "
                                   "again (what it wrote so far is kept in a partial-<n> folder)")
        if len(ckpt[1]["episodes_started"]) != cfg.n_envs:
            raise _bad_checkpoint(run_dir, int(ckpt[1]["timesteps"]), ckpt[0].with_name(
                f"state_{ckpt[1]['timesteps']}.json"), f"counts episodes for {len(ckpt[1]['episodes_started'])} "
                f"envs, the run's config.yaml has n_envs {cfg.n_envs}")
        _check_checkpoint_model(run_dir, ckpt, cfg)
        ckpt = _newer_final_model(run_dir, ckpt, total_steps if total_steps is not None else cfg.total_steps)
        session = _read_session(run_dir, ckpt, cfg.n_envs)
        target = total_steps if total_steps is not None else cfg.total_steps
        replay = _read_replay_buffer(run_dir, ckpt, cfg, trains=target > int(ckpt[1]["timesteps"]))
        _check_evaluation_files(run_dir)
        if (run_dir / "baselines.json").exists():  # (the curve reads it once training is done)
            read_baselines(run_dir / "baselines.json")
        check_agents(cfg, baselines=test_eval or not (run_dir / "baselines.json").exists(), pretrain=False)
        at = int(ckpt[1]["timesteps"])
        if stop_after is not None and stop_after <= at:
            raise TrainConfigError(f"--stop-after must be greater than the step count the run resumes from ({at}, "
                                   f"{ckpt[0].name} in {run_dir}), got {stop_after}")
        if total_steps is not None and total_steps != cfg.total_steps and total_steps < at:
            # (it trained nothing, yet config.yaml recorded the smaller budget beside a model of more steps)
            raise TrainConfigError(f"--total-steps {total_steps} is below the step count the run resumes from ({at}, "
                                   f"{ckpt[0].name} in {run_dir}): --resume --total-steps N extends a run to N steps "
                                   f"and cannot take steps back; give {at} or more, or train a new run into another "
                                   "--out")
        if total_steps is not None and total_steps != cfg.total_steps:
            # extending (or shortening, down to the checkpoint) a run: the run folder's config records the new budget
            cfg = cfg.replace(total_steps=total_steps)
            on_disk = yaml.safe_load((run_dir / "config.yaml").read_text())
            on_disk["total_steps"] = total_steps
            on_disk.setdefault("extended", []).append({"total_steps": total_steps})
            (run_dir / "config.yaml").write_text(yaml.safe_dump(on_disk, sort_keys=False))
    else:
        if config_path is None:
            raise TrainConfigError("a config is required: --config configs/train/<name>.yaml")
        cfg = TrainConfig.from_yaml(config_path, quick=quick)
        if cfg.default_quick:  # (before, such a --quick run trained the full recipe without a word)
            _say(f"--quick: {config_path} has no quick: section; merging the default quick form: "
                 f"{_flat_settings(cfg.default_quick)}, n_envs 1")
        seed = 0 if seed is None else seed
        changes = {}
        if n_envs is not None:
            changes["n_envs"] = n_envs
        if total_steps is not None:
            changes["total_steps"] = total_steps
        if changes:
            cfg = cfg.replace(**changes)
        run_dir = Path(out_dir) if out_dir is not None else default_run_dir(cfg.name, seed, quick)
        out_label = f"--out {run_dir}" if out_dir is not None else f"the default run folder {run_dir} (see --out)"
        check_run_dir(run_dir, out_label)
        wanted = cfg.to_dict() | {"seed": seed, "quick": bool(quick)}
        if ((run_dir / "config.yaml").exists() or (run_dir / CHECKPOINT_DIR).exists()) and \
                not _restartable(run_dir, wanted):
            if (run_dir / "model.zip").exists() or _checkpoint_steps(run_dir):
                raise TrainConfigError(f"run folder {run_dir} already holds a run: pass --resume to continue it, "
                                       "or choose another --out")
            # nothing to resume there: the start of a run of another recipe or seed (stopped before its first
            # checkpoint); --resume cannot continue it and this command would mix two runs
            stored = _stored_run(run_dir)
            what = f"its config.yaml differs in {', '.join(_differing_keys(stored, wanted))}" if stored else \
                "its config.yaml is missing or unreadable"
            raise TrainConfigError(f"run folder {run_dir} holds the start of another run (no checkpoint yet; {what}): "
                                   f"run the command that started it, choose another --out, or delete {run_dir}")
        if (run_dir / "baselines.json").exists():  # the same command again: the run reuses them
            read_baselines(run_dir / "baselines.json")
        # the recipe's values that only show when used, before anything is written (a crash there left a
        # folder behind that refused the corrected command)
        try:
            check_recipe(cfg)
            check_agents(cfg)
        except TrainConfigError as err:
            raise TrainConfigError(f"{config_path}: {err}") from None
    if progress_bar is not None:
        cfg.progress_bar = progress_bar
    if quick and not resume:
        cfg.progress_bar = cfg.progress_bar and sys.stderr.isatty()
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:  # checked above (check_run_dir); this is what changed since
        raise TrainConfigError(f"{out_label}: cannot create the run folder ({err.strerror or err})") from None

    import torch
    from stable_baselines3.common.utils import set_random_seed

    torch.set_num_threads(1)
    set_random_seed(seed)
    import warnings

    # the evaluation env is in-process on purpose (one env, fixed seeds) while training may use subprocesses
    warnings.filterwarnings("ignore", message="Training and eval env are not of the same type")

    # -- run folder: resolved config and seeds
    resolved = cfg.to_dict() | {"seed": seed, "quick": bool(quick), "versions": _versions()}
    test_seeds = list(range(TEST_SEED_START, TEST_SEED_START + cfg.eval.test_episodes))
    if not resume:
        aside = _set_aside_partial(run_dir)
        new_run.append(run_dir)
        if aside is not None:
            _say(f"{run_dir} held the output of a run stopped before its first checkpoint: moved to {aside}; "
                 "starting again")
        (run_dir / "config.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False))
        seeds_doc = {
            "train": {"rule": "seed(worker w, episode j) = schedule(run_seed)[(w + j * n_envs) mod 9000]: the pool "
                              "from 1000 * run_seed on for run seeds 0..8, its own permutation of the pool for any "
                              "other (agents.train.schedule_seed)",
                      "schedule": SCHEDULE_VERSION, "run_seed": seed, "n_envs": cfg.n_envs, "pool": [0, TRAIN_SEED_LIMIT],
                      "first": [[train_seed(seed, w, j, cfg.n_envs) for j in range(5)] for w in range(cfg.n_envs)]},
            "validation": cfg.eval.seeds,
            "test": test_seeds,
        }
        assert not set(range(*seeds_doc["train"]["pool"])) & (set(cfg.eval.seeds) | set(test_seeds))
        (run_dir / "seeds.json").write_text(json.dumps(seeds_doc, indent=2))

    # -- resume point (checked above, before anything was written)
    start_steps, started = 0, [0] * cfg.n_envs
    if not resume:
        ckpt, session, replay = None, None, None
    if ckpt is not None:
        start_steps = int(ckpt[1]["timesteps"])
        started = [int(x) for x in ckpt[1]["episodes_started"]]
        _say(f"resuming {run_dir} from {ckpt[0].name} ({start_steps} steps)")
        if legacy_schedule:
            _say(f"{run_dir} was started before run seeds from {ROTATION_SEEDS} on had their own training-seed "
                 f"schedule: it goes on with the one it was trained with (the worlds of seed {seed % ROTATION_SEEDS})")

    # -- envs
    use_subproc = cfg.n_envs > 1
    factories = [
        _EnvFactory(cfg, _TrainSeeds(seed, w, cfg.n_envs, legacy_schedule), start_episode=started[w], ignore_sigint=use_subproc,
                    shaping=cfg.shaping != "none", shaping_gamma=shaping_gamma(cfg))
        for w in range(cfg.n_envs)
    ]
    train_env = _vec_env(factories, use_subproc)
    eval_env = _vec_env([_EnvFactory(cfg, _SeedList(cfg.eval.seeds))], False)

    # -- reference levels on the validation seeds
    if not (run_dir / "baselines.json").exists():
        old_term = _on_sigterm(_raise_interrupt)  # a kill here said only "Terminated" (exit 143)
        try:
            base_eps = evaluate_agents(cfg.eval.baselines, cfg, cfg.eval.seeds,
                                       progress=None if cfg.progress_bar else False) if cfg.eval.baselines else {}
        except KeyboardInterrupt:
            # nothing to keep: the baselines are not a checkpoint; the folder holds no training output, so the
            # same command starts (or resumes) the run again (`_restartable`)
            _say("interrupted during the baselines: nothing saved yet; run the same command again")
            for env in (train_env, eval_env):
                _close_env(env, interrupted=True)
            return TrainResult(run_dir, None, start_steps, False, _STOP_REASON_INTERRUPT, 0.0, [], None)
        finally:
            _on_sigterm(old_term)
        (run_dir / "baselines.json").write_text(_strict_json(
            {"seeds": cfg.eval.seeds, "summary": summarise(base_eps) if base_eps else {}}))

    # -- model
    t0 = time.perf_counter()
    if ckpt is not None:
        model = _load_checkpoint(run_dir, ckpt, cfg, env=train_env, tensorboard_log=str(run_dir / "tb"))
        _truncate_evaluations(run_dir / "evaluations.csv", start_steps)
        if replay is not None:  # (read and checked before anything was written; as SB3's load_replay_buffer)
            model.replay_buffer = replay
            model.replay_buffer.device = model.device
        if session is None:  # a checkpoint inside a rollout: deterministic, not the uninterrupted run's course
            model.set_random_seed((seed + start_steps) % RUN_SEED_LIMIT)
        t0 -= float(ckpt[1].get("wall_time_s", 0.0))
    else:
        model = _build_model(cfg, train_env, seed, run_dir)
        if cfg.pretrain.agent is not None and cfg.pretrain.epochs > 0:
            t_pre = time.perf_counter()
            old_term = _on_sigterm(_raise_interrupt)
            try:
                stats = pretrain_by_imitation(model, cfg, seed)
            except KeyboardInterrupt:
                # nothing to keep yet: the warm start is not a checkpoint (a resume would skip it); the folder
                # holds no training output, so the same command starts it again (`_restartable`)
                _say("interrupted during the warm start: nothing saved; run the same command again")
                for env in (train_env, eval_env):
                    _close_env(env, interrupted=True)
                return TrainResult(run_dir, None, 0, False, _STOP_REASON_INTERRUPT, time.perf_counter() - t0,
                                   [], None)
            finally:
                _on_sigterm(old_term)
            stats["wall_time_s"] = round(time.perf_counter() - t_pre, 1)
            (run_dir / "pretrain.json").write_text(_strict_json(stats))
            _say(f"warm start: cloned {stats['agent']} on {stats['samples']} steps "
                 f"(op agreement {stats['op_agreement']:.3f}, demo return {stats['demo_mean_return']:.3f}, "
                 f"{stats['wall_time_s']}s)")

    EpisodeCounter, HeldOutEval, Checkpoint, RunHorizon, _ = _callbacks(cfg, run_dir, eval_env, start_steps, seed, t0)
    counter = EpisodeCounter(started)
    evaluator = HeldOutEval(eval_env, n_eval_episodes=cfg.eval.episodes, log_path=str(run_dir),
                            deterministic=cfg.eval.deterministic, warn=False)
    if ckpt is not None and (run_dir / "evaluations.npz").exists():
        npz = np.load(run_dir / "evaluations.npz")
        keep = [i for i, t in enumerate(npz["timesteps"]) if t <= start_steps]
        evaluator.evaluations_timesteps = [int(npz["timesteps"][i]) for i in keep]
        evaluator.evaluations_results = [list(npz["results"][i]) for i in keep]
        evaluator.evaluations_length = [list(npz["ep_lengths"][i]) for i in keep]
    if ckpt is not None:  # the rows kept by the resume (the final-row check below reads them)
        evaluator.rows = read_evaluations(run_dir / "evaluations.csv")
    checkpointer = Checkpoint(counter)
    from stable_baselines3.common.callbacks import CallbackList

    # -- learn
    stop_reason: str | None = None
    remaining = max(cfg.total_steps - start_steps, 0)
    session_steps = remaining
    # the evaluator before the checkpointer: when both fall on a rollout's end they run after its update in
    # this order, so the checkpoint's session holds the RNG states after the evaluation (a stochastic one,
    # eval.deterministic: false, draws from torch's); a resume from it keeps that evaluation's row without
    # repeating it, and goes on with the RNGs exactly as the uninterrupted run does
    parts = [counter, evaluator, checkpointer]
    if stop_after is not None and stop_after - start_steps < remaining:
        # --stop-after N: this session learns up to the end of the rollout reaching N, that rollout's update
        # included (learn() stops only between rollouts); the run's own end stays SB3's horizon (RunHorizon)
        session_steps = stop_after - start_steps
        parts.append(RunHorizon(start_steps + remaining))
    callbacks = CallbackList(parts)
    if session is not None:
        _restore_session(model, train_env, session)  # last: nothing may draw from the RNGs before learn()
    old_term = _on_sigterm(_raise_interrupt)  # `kill` / a scheduler's preemption saves like Ctrl-C
    try:
        # also with nothing left (a checkpoint at or past total_steps: a finished run, the overshoot to the
        # end of the last rollout, or a run killed after its last checkpoint): learn(0) trains nothing but
        # gives the callbacks the model and its logger, which the final evaluation below needs
        model.learn(total_timesteps=session_steps, callback=callbacks,
                    progress_bar=cfg.progress_bar and session_steps > 0, reset_num_timesteps=ckpt is None,
                    tb_log_name="run")
        if session_steps < remaining and model.num_timesteps < cfg.total_steps:
            stop_reason = _STOP_REASON_LIMIT
        else:
            last = latest_checkpoint(run_dir)
            if (last is None or int(last[1]["timesteps"]) < model.num_timesteps) \
                    and not (ckpt is not None and ckpt[1].get("from_model_zip")):
                # the run ends on a checkpoint of its final policy (model.zip's), wherever the schedule put the
                # last one (inside the last rollouts): a later --resume, e.g. to extend the run, starts from here.
                # (Not when finishing from model.zip itself: the seed schedule's position at its step is
                # unknown.) Saved before the envs close: its session reads them.
                checkpointer.num_timesteps = int(model.num_timesteps)
                checkpointer.save_now(reason="final", session=True)
    except KeyboardInterrupt:
        stop_reason = _STOP_REASON_INTERRUPT
        if _trained_since(checkpointer, model, start_steps):
            _say("interrupted: saving a checkpoint before exiting ...")
        else:
            # before SB3 gave the callbacks the model (its set-up: the first env reset, the subprocess envs,
            # the TensorBoard writer), or on a resume that trained nothing: the checkpoint on disk, if any,
            # already is this state, and saving over it would put a finishing resume's empty DQN replay buffer
            # in place of the real one. Not a crash either: the same command goes on (`_restartable`).
            kept = f" (the checkpoint at {start_steps} steps is kept)" if ckpt is not None else ""
            _say(f"interrupted before a training step: nothing to save yet{kept}; run the same command again")
    finally:
        _on_sigterm(old_term)
        if stop_reason == _STOP_REASON_LIMIT or (stop_reason == _STOP_REASON_INTERRUPT
                                                 and _trained_since(checkpointer, model, start_steps)):
            # a planned stop is at a rollout's end, after its update: its session is saved for an exact resume
            path = checkpointer.save_now(reason=stop_reason, session=stop_reason == _STOP_REASON_LIMIT)
            _say(f"saved {path} ({model.num_timesteps} steps); continue with --resume --out {run_dir}")
        for env in (train_env, eval_env):
            _close_env(env, interrupted=stop_reason == _STOP_REASON_INTERRUPT)

    wall = time.perf_counter() - t0
    if stop_reason is not None:
        return TrainResult(run_dir, None, int(model.num_timesteps), False, stop_reason, wall,
                           read_evaluations(run_dir / "evaluations.csv"), None)

    # -- final artefacts
    old_term = _on_sigterm(_raise_interrupt)
    try:
        return _finish_run(cfg, run_dir, model, evaluator, seed, wall, test_eval, test_seeds,
                           resumed_at=start_steps if ckpt is not None else None)
    except KeyboardInterrupt:
        # the run is trained and checkpointed at this step: a resume trains nothing and writes what is missing
        _say(f"interrupted after training ({model.num_timesteps} steps, checkpointed): finish the run (model.zip, "
             f"the curve, the final test) with --resume --out {run_dir}")
        return TrainResult(run_dir, None, int(model.num_timesteps), False, _STOP_REASON_INTERRUPT, wall,
                           read_evaluations(run_dir / "evaluations.csv"), None)
    finally:
        _on_sigterm(old_term)


def _trained_since(checkpointer, model, start_steps: int) -> bool:
    """Whether an interrupt of `learn()` has something to checkpoint: SB3 gave the callbacks the model (it
    does so only late in its set-up; before, `checkpointer.model` does not exist) and the step count the
    checkpoint would be saved under is past `start_steps`, the step the session began at (0, or the
    checkpoint it resumed from, which such a save would overwrite). (The checkpointer's count, not only the
    model's: it follows the model's one callback call later, inside the step that passes `start_steps`.)"""
    return (getattr(checkpointer, "model", None) is not None and int(model.num_timesteps) > start_steps
            and int(checkpointer.num_timesteps) > start_steps)


TEST_RESULTS = ("test_eval.json", "summary.md")


def _set_aside_test_results(run_dir: Path, steps: int, resumed_at: int | None) -> None:
    """Before model.zip is replaced: the final test's files of the model it held (`TEST_RESULTS`) no longer
    describe model.zip, so they are renamed after that model's step count (`test_eval_<steps>_steps.json`,
    `summary_<steps>_steps.md`, as `checkpoints/model_<steps>_steps.zip`), whether or not the new model is
    tested (`--no-test`, or an interrupted test, left them beside the new model). They stay when the
    resume trained nothing from model.zip's own step (`resumed_at`): the policy saved is model.zip's."""
    present = [run_dir / name for name in TEST_RESULTS if (run_dir / name).exists()]
    if not present:
        return
    try:
        previous = int(json.loads((run_dir / "model.json").read_text())["timesteps"])
    except (OSError, ValueError, KeyError, TypeError):
        previous = None  # (no model.json, or one without its step count: the files' model is unknown)
    if previous is not None and previous == steps == resumed_at:
        return
    tag = f"{previous}_steps" if previous is not None else "stale"
    moved = []
    for path in present:
        target = path.with_name(f"{path.stem}_{tag}{path.suffix}")
        os.replace(path, target)
        moved.append(target.name)
    _say(f"{run_dir}: the final test of the previous model.zip{'' if previous is None else f' ({previous} steps)'} "
         f"is kept as {' and '.join(moved)}")


def _finish_run(cfg: TrainConfig, run_dir: Path, model, evaluator, seed: int, wall: float, test_eval: bool,
                test_seeds: list[int], *, resumed_at: int | None = None) -> TrainResult:
    """The final artefacts of a trained run: the last evaluation row (the final policy's), model.zip and
    model.json, the learning curve, and with `test_eval` the final test and summary.md. `resumed_at`: the
    step count a resume started from (the test results of a model.zip it replaces are set aside)."""
    if not evaluator.rows or evaluator.rows[-1]["timesteps"] != model.num_timesteps:
        # the curve always ends with the final policy
        evaluator.eval_env = _vec_env([_EnvFactory(cfg, _SeedList(cfg.eval.seeds))], False)
        evaluator.evaluate_now()
        evaluator.eval_env.close()
    model_path = run_dir / "model.zip"
    _set_aside_test_results(run_dir, int(model.num_timesteps), resumed_at)
    model.save(model_path)
    meta = {"algo": cfg.algo, "policy": cfg.policy, "flatten_action": cfg.algo == "dqn",
            "env": {"id": cfg.env_id, "overrides": cfg.env_overrides}, "seed": seed,
            "timesteps": int(model.num_timesteps), "train_wall_time_s": round(wall, 1)}
    (run_dir / "model.json").write_text(json.dumps(meta, indent=2))
    plot_learning_curve(run_dir)

    summary = None
    if test_eval:
        agent_name = f"sb3:{model_path}"
        episodes = evaluate_agents([agent_name, *cfg.eval.baselines], cfg, test_seeds,
                                   progress=None if cfg.progress_bar else False)  # None: on a terminal only
        summary = summarise(episodes)
        (run_dir / "test_eval.json").write_text(_strict_json(
            {"seeds": test_seeds, "episodes": episodes, "summary": summary}))
        best = best_heuristic(summary)
        text = [f"# {cfg.name or cfg.env_id}: seed {seed}, {model.num_timesteps} steps, "
                f"{wall / 60:.1f} min of training", "",
                f"Test seeds {test_seeds[0]}..{test_seeds[-1]} ({len(test_seeds)} episodes per agent) on {cfg.env_id}.",
                "", summary_table(summary), ""]
        if best is not None:
            mine, theirs = summary[agent_name], summary[best]
            key = "normalised" if "normalised" in mine else "mean_return"
            verdict = "beats" if mine[key] > theirs[key] else "does not beat"
            text.append(f"The learned policy {verdict} the best heuristic ({best}): {key} "
                        f"{mine[key]:.3f} vs {theirs[key]:.3f}.")
        (run_dir / "summary.md").write_text("\n".join(text) + "\n")
        _say("\n".join(text))
    return TrainResult(run_dir, model_path, int(model.num_timesteps), True, None, wall,
                       read_evaluations(run_dir / "evaluations.csv"), summary)


_TRAINING_OUTPUTS = (CHECKPOINT_DIR, "tb", "evaluations.csv", "evaluations.npz", "model.zip")


def _restartable(run_dir: Path, resolved: dict) -> bool:
    """A run folder stopped before RL began (Ctrl-C or a kill during the baselines or the warm start) holds
    only the run's config, seeds, baselines (and maybe pretrain.json); one killed during RL before its
    first checkpoint (SIGKILL, a power cut: no handler ran) holds RL's first output too (TensorBoard
    events, evaluation rows) but nothing a resume could start from. Either way the same command (same
    recipe and seed) may start it again, reusing baselines.json (RL's partial output is set aside, see
    :func:`_set_aside_partial`). A checkpoint or a model.zip makes it a run to --resume."""
    if (run_dir / "model.zip").exists() or _checkpoint_steps(run_dir):
        return False
    try:
        stored = _run_config(run_dir)
    except TrainConfigError:
        return False
    ignore = ("versions", "progress_bar")  # neither changes what is trained
    return {k: v for k, v in stored.items() if k not in ignore} == \
        {k: v for k, v in yaml.safe_load(yaml.safe_dump(resolved, sort_keys=False)).items() if k not in ignore}


def _stored_run(run_dir: Path) -> dict:
    """The run folder's config.yaml as a mapping ({} when unreadable: the caller only reports on it)."""
    try:
        return _run_config(run_dir)
    except TrainConfigError:
        return {}


def _differing_keys(stored: dict, wanted: dict, prefix: str = "",
                    ignore: tuple[str, ...] = ("versions", "progress_bar", "extended")) -> list[str]:
    """Dotted keys whose values differ between two resolved recipes (nested mappings compared key by key)."""
    wanted = yaml.safe_load(yaml.safe_dump(wanted, sort_keys=False))  # tuples -> lists, as stored
    out = []
    for key in dict.fromkeys([*stored, *wanted]):
        if not prefix and key in ignore:
            continue
        a, b = stored.get(key), wanted.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _differing_keys(a, b, f"{prefix}{key}.", ())
        elif a != b:
            out.append(f"{prefix}{key}")
    return out


#: everything a run writes into its folder (a run that failed before its first checkpoint has all of it moved)
_RUN_FILES = ("config.yaml", "seeds.json", "baselines.json", "pretrain.json", *_TRAINING_OUTPUTS, "model.json",
              "learning_curve.png", *TEST_RESULTS)


def _set_aside_partial(run_dir: Path, names: Sequence[str] = _TRAINING_OUTPUTS, prefix: str = "partial") \
        -> Path | None:
    """Move what RL wrote before a run was killed without a checkpoint (``tb/``, ``evaluations.*``, an
    empty ``checkpoints/``) into ``run_dir/partial-<n>/`` (the first free n), so that a restart neither
    mixes it with its own output nor deletes it. Returns that folder, or None when there was nothing.
    (`names`, `prefix`: other files and another folder name: ``crashed-<n>/`` for a run that failed.)"""
    present = [run_dir / name for name in names if (run_dir / name).exists()]
    if not present:
        return None
    n = 1
    while (run_dir / f"{prefix}-{n}").exists():
        n += 1
    dest = run_dir / f"{prefix}-{n}"
    dest.mkdir()
    for path in present:
        path.rename(dest / path.name)
    return dest


def _close_env(env, *, interrupted: bool) -> None:
    """Close a vec env. After an interrupt a SubprocVecEnv may be half-way through a step (one
    worker's reply read, the other's not), where its graceful close would wait forever: terminate
    the workers instead."""
    if interrupted and hasattr(env, "processes"):
        for proc in env.processes:
            proc.terminate()
        for proc in env.processes:
            proc.join(timeout=5)
        for remote in getattr(env, "remotes", []):
            remote.close()
        env.closed = True
        return
    try:
        env.close()
    except Exception:  # noqa: BLE001 - workers may already be gone (a signal to the whole group)
        pass


def _check_seed(seed: Any, label: str) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < RUN_SEED_LIMIT:
        raise TrainConfigError(f"{label} must be an integer in [0, {RUN_SEED_LIMIT - 1}] (2**32 - 1), got {seed!r}")


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _on_sigterm(handler):
    """Install `handler` for SIGTERM (main thread only); returns the previous handler."""
    try:
        return signal.signal(signal.SIGTERM, handler)
    except (ValueError, TypeError):  # not the main thread, or no previous Python-level handler
        return None


def _acc(value: Any) -> str:
    """An accuracy for a table or a log line: "n/a" where there was none (episodes without questions),
    as the bench's tables print it."""
    return f"{value:.3f}" if isinstance(value, (int, float)) and math.isfinite(value) else "n/a"


def _strict_json(obj: Any) -> str:
    """Strict JSON of the run's result files, as the bench writes results.json: NaN / inf are null
    (json.dumps wrote NaN, which JSON parsers other than Python's refuse), numpy values plain."""
    from agents.report import _clean

    return json.dumps(_clean(json.loads(json.dumps(obj, default=_json_default))), indent=2, allow_nan=False)


def _json_default(obj: Any):
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)


# ----------------------------------------------------------------------------------------- CLI
def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Arguments of `memgym train` (agents/cli.py calls this on its subparser)."""
    parser.add_argument("--config", "-c", help="training recipe, e.g. configs/train/life_easy.yaml "
                        "(not needed with --resume)")
    parser.add_argument("--seed", type=int, help="training seed (default 0; with --resume: the run's)")
    parser.add_argument("--out", help="run folder (default runs/<config name>_s<seed>; with --quick "
                        "runs/<config name>_quick_s<seed>); with --headline: the JSON file for the numbers")
    parser.add_argument("--quick", action="store_true", help="a few thousand steps (the config's quick: section; "
                        "without one, the default quick form: total_steps 2048, ...)")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint "
                        "(without --out: the default run folder of --config, --seed and --quick)")
    parser.add_argument("--n-envs", type=int, help="override n_envs of the config")
    parser.add_argument("--total-steps", type=int, help="override total_steps of the config (with --resume: "
                        "extend the run to that many steps, at least the step count it resumes from)")
    parser.add_argument("--stop-after", type=int, help="stop this session at the end of the rollout reaching that "
                        "many steps: save a checkpoint and exit with code 0 (a planned stop; --resume then goes on "
                        "exactly as an uninterrupted run)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--no-test", action="store_true", help="skip the final test on the benchmark seeds")
    parser.add_argument("--headline", nargs="+", metavar="RUN", help="instead of training: compare the models of "
                        "these run folders (training seeds) with every baseline on the test seeds")
    parser.add_argument("--env", help="with --headline: env id to test on (default: the runs' env)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", help="with --headline: a WorldConfig "
                        "override, e.g. --set horizon=800 (repeatable)")
    parser.add_argument("--episodes", type=int, help="with --headline: test episodes per agent (default 50)")
    parser.add_argument("--baselines", help="with --headline: comma-separated baselines, as bench's --agents "
                        "(default: the runs' list)")
    return parser


def run(args: argparse.Namespace) -> int:
    """Entry point of `memgym train`; returns the exit code: 0, 2 after a user error (printed as
    `memgym train: error: ...`, as `memgym bench` does), 130 after Ctrl-C (checkpoint saved)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        return _run(args)
    except TrainConfigError as err:
        print(f"memgym train: error: {err}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    if getattr(args, "headline", None):
        training = [opt for opt, value in (
            ("--config", getattr(args, "config", None)), ("--seed", getattr(args, "seed", None)),
            ("--quick", getattr(args, "quick", False) or None), ("--resume", getattr(args, "resume", False) or None),
            ("--n-envs", getattr(args, "n_envs", None)), ("--total-steps", getattr(args, "total_steps", None)),
            ("--stop-after", getattr(args, "stop_after", None)), ("--no-test", getattr(args, "no_test", False) or None),
        ) if value is not None]
        if training:
            verb = "applies" if len(training) == 1 else "apply"
            raise TrainConfigError(f"{', '.join(training)} {verb} only to training, not with --headline (it compares "
                                   "finished runs; its options: --env, --set, --episodes, --baselines, --out "
                                   "FILE.json, --no-progress)")
        overrides = {}
        for pair in args.set or []:
            if "=" not in pair:
                raise TrainConfigError(f"--set expects KEY=VALUE (a WorldConfig field), got {pair!r}")
            key, value = pair.split("=", 1)
            try:
                overrides[key.strip()] = yaml.safe_load(value)
            except yaml.YAMLError as err:
                raise TrainConfigError(f"--set {key.strip()}: the value is not valid YAML ({err})") from None
        baselines = _name_list(args.baselines, "--baselines")
        episodes = 50 if getattr(args, "episodes", None) is None else args.episodes
        out = _headline_out(args.out) if args.out else None  # before minutes of episodes are played
        try:
            text, data = headline(args.headline, env=args.env, overrides=overrides, episodes=episodes,
                                  baselines=baselines, progress=False if args.no_progress else None)
        except TrainConfigError:
            raise
        except ValueError as err:  # e.g. agents.sb3_agent.SB3ModelError: a model of another env layout
            raise TrainConfigError(str(err)) from err
        print(text)
        if out is not None:
            try:
                out.write_text(_strict_json(data))
            except OSError as err:
                raise TrainConfigError(f"--out {out}: cannot write the numbers ({err.strerror or err}); the table "
                                       "above is all there is") from None
        return 0
    unused = [opt for opt, value in (("--env", getattr(args, "env", None)), ("--set", getattr(args, "set", None)),
                                     ("--episodes", getattr(args, "episodes", None)),
                                     ("--baselines", getattr(args, "baselines", None))) if value is not None]
    if unused:
        verb = "applies" if len(unused) == 1 else "apply"
        raise TrainConfigError(f"{', '.join(unused)} {verb} only with --headline RUN ...; for training put env "
                               "overrides in the recipe (env.overrides) and baselines in eval.baselines")
    result = train(args.config, seed=args.seed, out_dir=args.out, quick=args.quick, resume=args.resume,
                   n_envs=args.n_envs, total_steps=args.total_steps, stop_after=args.stop_after,
                   progress_bar=False if args.no_progress else None, test_eval=not args.no_test)
    if result.stop_reason == _STOP_REASON_INTERRUPT:
        return 130
    print(f"run folder: {result.run_dir} ({result.timesteps} steps, {result.wall_time_s / 60:.1f} min)")
    return 0


def _name_list(text: str | None, option: str) -> list[str] | None:
    """A comma-separated list of agent names as `memgym bench --agents` reads it (`agents.cli._csv`): split
    at the commas outside brackets (`oracle[-LINK,-FORGET]` is one name), names stripped, empty ones
    dropped; a list with no name, or an unclosed bracket, is an error naming `option`."""
    from agents.cli import CliError, _csv

    try:
        return _csv(text, option)
    except CliError as err:
        raise TrainConfigError(str(err)) from None


def _headline_out(out: str) -> Path:
    """`--out` of `--headline`: the JSON file for the numbers, checked before anything is played (a directory
    crashed the write after every episode had been played). Its folder is created."""
    path = Path(out)
    if path.is_dir():
        raise TrainConfigError(f"--out with --headline is the JSON file the numbers are written to (e.g. --out "
                               f"{path / 'headline.json'}); {path} is a directory")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise TrainConfigError(f"--out {path}: cannot create its folder {path.parent} ({err.strerror or err})") \
            from None
    if not os.access(path if path.exists() else path.parent, os.W_OK):
        raise TrainConfigError(f"--out {path}: not writable")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memgym train", description="Train a memory-management policy.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
