"""Trained Stable-Baselines3 / sb3-contrib models as benchmark agents: ``sb3:path/to/model.zip``.

The algorithm is read from the ``model.json`` that ``memgym train`` writes next to the model (or
the run's ``config.yaml``); without it, it is detected from the zip itself: SB3 stores the policy
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
    """The model file is missing or is not a Stable-Baselines3 archive."""


def _sidecar(path: Path) -> dict | None:
    for candidate in (path.with_suffix(".json"), path.parent / "model.json", path.parent.parent / "model.json"):
        if candidate.exists() and candidate != path:
            try:
                meta = json.loads(candidate.read_text())
            except json.JSONDecodeError:
                continue
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

    def reset(self, seed: int | None) -> None:
        pass

    def attach(self, view: Any) -> None:
        """Only used for the exact (op, slot) mask of a flat-action (FlattenAction) model."""
        self.view = view

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
        obs = self._obs(observation, info)
        if self.algo == "maskable_ppo":
            action, _ = self.model.predict(obs, deterministic=self.deterministic, action_masks=self._mask(info))
        else:
            action, _ = self.model.predict(obs, deterministic=self.deterministic)
        a = np.asarray(action).reshape(-1)
        if self.flat:
            k = int(np.asarray(info["action_mask"]).shape[0]) - 7
            v = int(a[0])
            return np.array([v // k, v % k], dtype=np.int64)
        return a.astype(np.int64)
