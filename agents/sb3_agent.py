"""Trained Stable-Baselines3 / sb3-contrib models as benchmark agents: ``sb3:path/to/model.zip``.

The algorithm is read from the ``model.json`` that ``memgym train`` writes next to the model; without
it, it is detected from the zip itself: SB3 stores the policy
class (with its module) and the constructor arguments in the archive's ``data`` JSON, so

- a policy from ``sb3_contrib.common.maskable`` -> MaskablePPO (masks passed to ``predict``);
- a policy from ``stable_baselines3.dqn`` -> DQN (a flat ``Discrete(7 * K)`` action, as
  ``envs.wrappers.FlattenAction`` defines it: ``op = a // K``, ``slot = a % K``);
- ``clip_range`` among the saved arguments -> PPO, otherwise A2C.

SB3 is imported lazily, only when such an agent is built. Actions are deterministic.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

ALGORITHMS = ("maskable_ppo", "ppo", "dqn", "a2c")


class SB3ModelError(ValueError):
    """The model file is missing, is not a Stable-Baselines3 archive, or was trained for another env layout."""


def _describe(space: Any) -> str:
    shape = getattr(space, "shape", None)
    n = getattr(space, "n", None)
    if type(space).__name__ == "Discrete":
        return f"Discrete({int(n)})"
    if type(space).__name__ == "MultiDiscrete":
        return f"MultiDiscrete({[int(v) for v in np.asarray(space.nvec).reshape(-1)]})"
    return f"{type(space).__name__} of shape {tuple(shape) if shape is not None else '?'}"


def _signature(space: Any) -> tuple:
    """What must agree between a model's space and an env's for the model to read / act on the env."""
    name = type(space).__name__
    if name == "Discrete":
        return (name, int(space.n))
    if name == "MultiDiscrete":
        return (name, tuple(int(v) for v in np.asarray(space.nvec).reshape(-1)))
    return (name, tuple(getattr(space, "shape", None) or ()))


def space_mismatch(model_space: Any, env_space: Any, what: str = "observation",
                   optional_keys: tuple[str, ...] = ()) -> str | None:
    """None if a model with `model_space` can be used on an env with `env_space`; else what differs, naming
    the key and both shapes (e.g. ``observation key 'candidates': the model has Box of shape (112,), the env
    Box of shape (152,)``). Dict spaces are compared key by key; `optional_keys` of the model may be missing
    from the env (the agent adds them, e.g. ``action_mask``)."""
    model_sub = getattr(model_space, "spaces", None)
    env_sub = getattr(env_space, "spaces", None)
    if isinstance(model_sub, dict) or isinstance(env_sub, dict):
        if not (isinstance(model_sub, dict) and isinstance(env_sub, dict)):
            return f"{what} space: the model has {_describe(model_space)}, the env {_describe(env_space)}"
        missing = [k for k in model_sub if k not in env_sub and k not in optional_keys]
        extra = [k for k in env_sub if k not in model_sub]
        if missing or extra:
            return (f"{what} keys: the model has {sorted(model_sub)}, the env {sorted(env_sub)} "
                    f"(missing in the env: {missing}, unknown to the model: {extra})")
        for key, sub in model_sub.items():
            if key in env_sub and _signature(sub) != _signature(env_sub[key]):
                return (f"{what} key {key!r}: the model has {_describe(sub)}, the env {_describe(env_sub[key])}")
        return None
    if _signature(model_space) != _signature(env_space):
        return f"{what} space: the model has {_describe(model_space)}, the env {_describe(env_space)}"
    return None


def _sidecar(path: Path) -> dict | None:
    for candidate in (path.with_suffix(".json"), path.parent / "model.json", path.parent.parent / "model.json"):
        if candidate.exists() and candidate != path:
            try:
                meta = json.loads(candidate.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError):
                continue  # (not memgym train's: the algorithm is detected from the zip itself)
            if isinstance(meta, dict) and meta.get("algo") in ALGORITHMS:
                return meta
    return None


def detect_algorithm(path: str | Path) -> str:
    """The algorithm of an SB3 zip: ``maskable_ppo``, ``ppo``, ``dqn`` or ``a2c`` (see module docstring)."""
    path = Path(path)
    if not path.exists():
        raise SB3ModelError(f"model file not found: {path}")
    meta = _sidecar(path)
    if meta is not None:
        return str(meta["algo"])
    try:
        with zipfile.ZipFile(path) as zf:
            data = json.loads(zf.read("data").decode("utf-8"))
    except (zipfile.BadZipFile, KeyError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SB3ModelError(f"{path} is not a Stable-Baselines3 model zip (no readable 'data' entry): {exc}") from exc
    policy = data.get("policy_class") or {}
    module = str(policy.get("__module__", "")) if isinstance(policy, dict) else ""
    if "maskable" in module or "sb3_contrib" in module:
        return "maskable_ppo"
    if ".dqn" in module or "exploration_schedule" in data or "target_update_interval" in data:
        return "dqn"
    if "clip_range" in data:
        return "ppo"
    return "a2c"


def _algorithm_class(algo: str) -> Any:
    try:
        if algo == "maskable_ppo":
            from sb3_contrib import MaskablePPO

            return MaskablePPO
        import stable_baselines3 as sb3
    except ImportError as exc:
        raise SB3ModelError(f"loading a {algo} model needs the training extra: pip install 'memgym[train]' ({exc})") \
            from exc
    return {"ppo": sb3.PPO, "dqn": sb3.DQN, "a2c": sb3.A2C}[algo]


class SB3Agent:
    """Deterministic actions of a saved SB3 model; the observation is passed as the env gives it."""

    privileged = False

    def __init__(self, path: str | Path, algo: str | None = None, deterministic: bool = True,
                 device: str = "cpu") -> None:
        self.path = Path(path)
        self.name = f"sb3:{path}"
        if algo is not None and algo not in ALGORITHMS:
            raise ValueError(f"algo must be one of {', '.join(ALGORITHMS)}, got {algo!r}")
        self.algo = algo or detect_algorithm(self.path)
        cls = _algorithm_class(self.algo)
        import torch

        # one thread per agent: the bench already runs one worker process per core
        torch.set_num_threads(1)
        try:
            self.model = cls.load(str(self.path), device=device)
        except Exception as exc:  # noqa: BLE001 - SB3 raises many kinds on a bad archive
            raise SB3ModelError(f"could not load {self.path} as {self.algo}: {exc}") from exc
        self.deterministic = deterministic
        self.flat = self.algo == "dqn" or getattr(self.model.action_space, "n", None) is not None
        space = self.model.observation_space
        self._keys = list(getattr(space, "spaces", {}).keys())
        self._checked = False

    def _check_observation(self, observation: Any) -> None:
        """The shapes of a first observation against the model's space (when no env was attached)."""
        space = self.model.observation_space
        model_sub = getattr(space, "spaces", None)
        if isinstance(observation, dict) and isinstance(model_sub, dict):
            problem = None
            missing = [k for k in model_sub if k not in observation and k != "action_mask"]
            extra = [k for k in observation if k not in model_sub]
            if missing or extra:
                problem = (f"observation keys: the model has {sorted(model_sub)}, the env gives {sorted(observation)} "
                           f"(missing: {missing}, unknown to the model: {extra})")
            else:
                for key, value in observation.items():
                    if tuple(np.shape(value)) != tuple(model_sub[key].shape or ()):
                        problem = (f"observation key {key!r}: the model has shape {tuple(model_sub[key].shape)}, "
                                   f"the env gives shape {tuple(np.shape(value))}")
                        break
            if problem is not None:
                raise SB3ModelError(f"{self.path} was trained for another env layout: {problem}. Retrain it "
                                    "on this env (memgym train), or evaluate it on the env it was trained on")
        self._checked = True

    def reset(self, seed: int | None) -> None:
        """A stochastic policy (``deterministic=False``) samples with SB3's generators: torch's (policy
        gradient methods' distributions), and NumPy's global one and the action space's (DQN's epsilon-greedy
        exploration). All are seeded from the episode's seed (SB3's ``set_random_seed``), so that an episode
        is a function of its seed, as the benchmark promises, not of how many episodes this process played
        before. (memgym itself draws from no global generator.)"""
        if not self.deterministic and seed is not None:
            self.model.set_random_seed(int(seed))

    def attach(self, view: Any) -> None:
        """Check the model against the env it is about to play (before the first act), and keep the view
        for the (op, slot) pair mask of a flat-action (FlattenAction) model."""
        self.view = view
        env = getattr(view, "_env", None)  # AgentView wraps the bare MemoryEnv the bench plays
        if env is not None and hasattr(env, "observation_space"):
            self.check_env(env)

    def check_env(self, env: Any) -> None:
        """Raise SB3ModelError if the model was trained for another env layout than `env` (a bare
        ``MemoryEnv``; a flat-action model is compared with its ``FlattenAction`` action space):
        SB3 would otherwise fail deep inside ``predict`` with "Unexpected observation shape"."""
        base = getattr(env, "unwrapped", env)
        problem = space_mismatch(self.model.observation_space, base.observation_space, "observation",
                                 optional_keys=("action_mask",))
        if problem is None:
            env_action = base.action_space
            if self.flat:
                from gymnasium import spaces

                env_action = spaces.Discrete(int(np.prod(np.asarray(base.action_space.nvec))))
            problem = space_mismatch(self.model.action_space, env_action, "action")
        if problem is not None:
            config = getattr(base, "config", None)
            label = f"{config.family}-{config.difficulty}" if config is not None else type(base).__name__
            raise SB3ModelError(f"{self.path} was trained for another env layout than {label}: {problem}. "
                                "Retrain it on this env (memgym train), or evaluate it on the env it was "
                                "trained on")
        self._checked = True

    def _obs(self, observation: Any, info: dict) -> Any:
        if "action_mask" in self._keys and isinstance(observation, dict) and "action_mask" not in observation:
            observation = {**observation, "action_mask": np.asarray(self._mask(info), dtype=np.float32)}
        return observation

    def _mask(self, info: dict) -> np.ndarray:
        mask = np.asarray(info["action_mask"], dtype=bool)
        if self.flat:
            view = getattr(self, "view", None)
            if view is not None:
                return view.pair_mask().reshape(-1)
            n_ops = 7  # no view: the product of the two independent masks
            return (mask[:n_ops, None] & mask[None, n_ops:]).reshape(-1)
        return mask

    def act(self, observation: Any, info: dict) -> np.ndarray:
        if not self._checked:  # played without attach(): check what the env gives against the model
            self._check_observation(observation)
        obs = self._obs(observation, info)
        if self.algo == "maskable_ppo":
            action, _ = self.model.predict(obs, deterministic=self.deterministic, action_masks=self._mask(info))
        else:
            action, _ = self.model.predict(obs, deterministic=self.deterministic)
        a = np.asarray(action).reshape(-1)
        if self.flat:  # as FlattenAction maps it: an untargeted op on a slot > 0 is an invalid alias
            from envs.wrappers import unflatten_action

            return unflatten_action(int(a[0]), int(np.asarray(info["action_mask"]).shape[0]) - 7)
        return a.astype(np.int64)
