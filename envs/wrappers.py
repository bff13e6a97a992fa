"""Wrappers that adapt :class:`envs.MemoryEnv` to other agent interfaces.

- :class:`FlattenAction`: ``Discrete(7 * K)`` actions (``a = op * K + slot``) with the env's
  per-pair mask, for DQN-style agents and MaskablePPO with a flat action;
- :class:`MaskInObservation`: puts the action mask into the observation. ``layout="rllib"`` (the
  default) is the form RLlib's action-masking modules read,
  ``{"action_mask": ..., "observations": <the original observation>}``; ``layout="flat"`` adds
  ``action_mask`` next to the original keys, the flat Dict SB3's ``MultiInputPolicy`` takes;
- :class:`TextInterface`: observation is the event and the candidates as text, the action a command
  string such as ``"WRITE"`` or ``"LINK 3"``, for LLM agents and external memory systems;
- :class:`FinalMetrics`: the world's metrics in the last step's info also when a time limit below it
  (``gym.make(id, max_episode_steps=N)``) ends the episode; every registered id has it.
"""

from __future__ import annotations

import re
import string
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs.features import CANDIDATE_FEATURES
from envs.memory_env import InvalidAction
from world import Op

_COL = {name: i for i, name in enumerate(CANDIDATE_FEATURES)}

_OP_NAMES = tuple(op.name for op in sorted(Op, key=int))
_TARGETED = ("UPDATE", "LINK", "REFLECT", "FORGET")
_UNTARGETED = ("NOOP", "WRITE", "QUERY")


def _memory_env(env: gym.Env):
    from envs.memory_env import MemoryEnv

    base = env.unwrapped
    if not isinstance(base, MemoryEnv):
        raise TypeError(f"expected a MemoryEnv underneath, got {type(base).__name__}")
    return base


def _memory_env_actions(env: gym.Env, wrapper: str):
    """The MemoryEnv under ``env``, whose ``[op, slot]`` actions ``env`` must still take: ``wrapper`` maps
    its own action to that pair, so over a wrapper that changed the action space (FlattenAction,
    TextInterface) it would be built and then fail at every step. TypeError naming the order otherwise."""
    base = _memory_env(env)
    if env.action_space != base.action_space:
        raise TypeError(
            f"{wrapper} needs the MemoryEnv's [op, slot] actions ({base.action_space}) from the env it wraps, "
            f"got {env.action_space} from {env}: FlattenAction and TextInterface each go directly over a "
            f"MemoryEnv stack (gym.make, observation wrappers such as MaskInObservation), not over each "
            f"other or themselves"
        )
    return base


def unflatten_action(a: int, k: int) -> np.ndarray | InvalidAction:
    """``[op, slot]`` of the flat action ``a = op * k + slot`` (``0 <= a < 7 * k``), or an
    :class:`InvalidAction` for an untargeted operation (NOOP, WRITE, QUERY) on a slot other than 0:
    those aliases are masked out, and taken they are penalised no-ops, in :class:`FlattenAction` and
    wherever a flat-action model is played (``agents.sb3_agent``)."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k (candidate slots) must be an integer >= 1, got {k!r}")
    n = len(_OP_NAMES) * int(k)
    if isinstance(a, bool) or not isinstance(a, (int, np.integer)) or not 0 <= a < n:
        raise ValueError(f"action must be an integer in 0..{n - 1} (op * K + slot, K = {k}), got {a!r}")
    op, slot = divmod(int(a), int(k))
    if slot and _OP_NAMES[op] in _UNTARGETED:
        return InvalidAction(f"{_OP_NAMES[op]} takes no target: its flat action is {op * k} (slot 0), "
                             f"got {a} (slot {slot})")
    return np.array([op, slot], dtype=np.int64)


class FlattenAction(gym.ActionWrapper, gym.utils.RecordConstructorArgs):
    """``Discrete(7 * K)`` action ``a`` means operation ``a // K`` on slot ``a % K``.

    ``action_masks()`` returns the ``7 * K`` mask of the env's per-pair rules, where untargeted
    operations (NOOP, WRITE, QUERY) are only allowed on slot 0 so that each appears once. NOOP on slot
    0 is always allowed. Every masked-out action is invalid when taken: as in the base env it is a
    no-op with the penalty and ``info["invalid_action"] = True``; that includes an untargeted
    operation on a slot other than 0 (``InvalidAction`` through the wrappers below). Every allowed
    action is valid but one: a REFLECT whose target has no cluster, which is hidden and so refused
    only when taken (see ``MemoryEnv``).

    ``env`` must take the MemoryEnv's ``MultiDiscrete([7, K])`` actions (a ``TypeError`` otherwise, e.g.
    over a :class:`TextInterface`); an :class:`~envs.memory_env.InvalidAction` stepped from a wrapper
    above passes through unchanged.
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.ActionWrapper.__init__(self, env)
        base = _memory_env_actions(env, "FlattenAction")
        self.n_ops, self.K = base.n_ops, base.K
        self.action_space = spaces.Discrete(self.n_ops * self.K)

    def action(self, action: Any) -> np.ndarray | InvalidAction:
        if type(action) is InvalidAction:  # a wrapper above could not map its action: it steps through
            return action
        n = self.n_ops * self.K
        try:
            arr = np.asarray(action)
            if arr.size != 1 or arr.dtype.kind not in "iuf" or arr.dtype == bool:
                raise ValueError
            a = int(arr.reshape(()))
            if a != arr.reshape(()):  # 9.9 is not an action
                raise ValueError
        except (ValueError, TypeError, OverflowError):
            raise ValueError(f"action must be an integer in 0..{n - 1} (op * K + slot, K = {self.K}), "
                             f"got {action!r}") from None
        return unflatten_action(a, self.K)  # (which refuses one out of 0..n-1, naming the range)

    def action_masks(self) -> np.ndarray:
        return self.env.unwrapped.action_mask_pairs().reshape(-1)

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        info["action_mask"] = self.action_masks()
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs):
        obs, info = super().reset(**kwargs)
        info["action_mask"] = self.action_masks()
        return obs, info


class MaskInObservation(gym.ObservationWrapper, gym.utils.RecordConstructorArgs):
    """Puts the action mask (float32 0/1, ``Box(0, 1, (n,))``) into the observation.

    Two layouts:

    - ``layout="rllib"`` (default): ``Dict({"action_mask": Box(0, 1, (n,)), "observations": <the
      wrapped env's observation space, unchanged>})``, the layout RLlib's action-masking modules read
      (the new stack's ``ActionMaskingRLModule`` example and the old stack's ``ActionMaskModel`` take
      ``observation_space["observations"]`` and ``obs["action_mask"]``). Those modules mask one
      ``Discrete`` action: wrap a :class:`FlattenAction` (``n = 7 * K``).
    - ``layout="flat"``: the wrapped env's Dict with ``action_mask`` added next to its keys. No
      nesting, so SB3's ``MultiInputPolicy`` (which takes no nested Dict) and SB3's checker accept it.

    The mask is whatever ``action_masks()`` of the wrapped env returns: ``7 + K`` entries on a
    ``MemoryEnv`` (operation mask, then slot mask), ``7 * K`` on a :class:`FlattenAction`.
    """

    LAYOUTS = ("rllib", "flat")

    def __init__(self, env: gym.Env, layout: str = "rllib") -> None:
        gym.utils.RecordConstructorArgs.__init__(self, layout=layout)
        gym.ObservationWrapper.__init__(self, env)
        if layout not in self.LAYOUTS:
            raise ValueError(f"MaskInObservation: layout must be one of {', '.join(map(repr, self.LAYOUTS))}, "
                             f"got {layout!r}")
        self.layout = layout
        n = len(self._mask())
        mask_space = spaces.Box(0.0, 1.0, shape=(n,), dtype=np.float32)
        if layout == "rllib":
            self.observation_space = spaces.Dict({"action_mask": mask_space, "observations": env.observation_space})
            return
        if not isinstance(env.observation_space, spaces.Dict):
            raise TypeError(f"MaskInObservation(layout='flat') needs a Dict observation space, got "
                            f"{type(env.observation_space).__name__} (layout='rllib' takes any space)")
        if "action_mask" in env.observation_space.spaces:
            raise ValueError("MaskInObservation(layout='flat'): the observation already has a key 'action_mask'")
        self.observation_space = spaces.Dict({**env.observation_space.spaces, "action_mask": mask_space})

    def _mask(self) -> np.ndarray:
        return np.asarray(self.env.get_wrapper_attr("action_masks")(), dtype=bool)

    def observation(self, observation: Any) -> dict[str, Any]:
        mask = self._mask().astype(np.float32)
        if getattr(self, "layout", "flat") == "rllib":  # (pickled before layouts existed: the flat form)
            return {"action_mask": mask, "observations": observation}
        out = dict(observation)
        out["action_mask"] = mask
        return out


_CHARSET = frozenset(string.printable) | frozenset(chr(c) for c in range(0xA0, 0x250))
_COMMAND = re.compile(r"^\s*([A-Za-z]+)(?:\s+(\S+))?\s*$")


class TextInterface(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Text in, text out: the observation is a frame of text, the action a command string.

    Observation (``spaces.Text``)::

        EVENT (statement): Alice moved to Lyon.
        CANDIDATES:
          [0] ep_000003 (sim +0.71, recent): Alice lives in Paris.
          ...
        STORE: 12/64 live

    Commands (case-insensitive): ``NOOP``, ``WRITE``, ``QUERY``, and ``UPDATE n``, ``LINK n``,
    ``REFLECT n``, ``FORGET n`` where ``n`` is a slot number shown in the frame or the memory id
    itself. A malformed command raises ``ValueError`` naming the allowed commands; with
    ``on_error="noop"`` it is instead an invalid action (no-op, penalty) with ``info["parse_error"]``.
    An :class:`~envs.memory_env.InvalidAction` from a wrapper above steps through with its own reason.
    Gymnasium's ``check_env`` steps with a sampled ``Text`` action (a random string, so a malformed
    command): it passes with ``on_error="noop"`` and raises that ``ValueError`` with the default.

    ``env`` must take the MemoryEnv's ``MultiDiscrete([7, K])`` actions: a ``TypeError`` over a
    :class:`FlattenAction` or another ``TextInterface`` (observation wrappers in between are fine).
    """

    def __init__(self, env: gym.Env, max_length: int = 8192, on_error: str = "raise") -> None:
        gym.utils.RecordConstructorArgs.__init__(self, max_length=max_length, on_error=on_error)
        gym.Wrapper.__init__(self, env)
        if on_error not in ("raise", "noop"):
            raise ValueError(f"on_error must be 'raise' or 'noop', got {on_error!r}")
        if isinstance(max_length, (bool, np.bool_)) or not isinstance(max_length, (int, np.integer)) or max_length < 1:
            raise ValueError(f"max_length must be an integer >= 1 (characters of the text observation), "
                             f"got {max_length!r}")
        self.on_error = on_error
        self._base = _memory_env_actions(env, "TextInterface")
        self.max_length = int(max_length)
        charset = "".join(sorted(_CHARSET))
        self.observation_space = spaces.Text(max_length=self.max_length, min_length=0, charset=charset)
        self.action_space = spaces.Text(max_length=64, min_length=1,
                                        charset=string.ascii_letters + string.digits + " _")

    @staticmethod
    def commands() -> str:
        return "NOOP, WRITE, QUERY, UPDATE <slot|id>, LINK <slot|id>, REFLECT <slot|id>, FORGET <slot|id>"

    def parse(self, command: str) -> np.ndarray:
        """Parse a command into the base env's ``[op, slot]`` action; ValueError if malformed."""
        if not isinstance(command, str):
            raise ValueError(f"command must be a string, got {type(command).__name__}; allowed: {self.commands()}")
        m = _COMMAND.match(command)
        if not m:
            raise ValueError(f"malformed command {command!r}; allowed: {self.commands()}")
        name, arg = m.group(1).upper(), m.group(2)
        if name not in _OP_NAMES:
            raise ValueError(f"unknown operation {m.group(1)!r} in {command!r}; allowed: {self.commands()}")
        op = int(Op[name])
        if name in _UNTARGETED:
            if arg is not None:
                raise ValueError(f"{name} takes no target, got {command!r}; allowed: {self.commands()}")
            return np.array([op, 0], dtype=np.int64)
        if arg is None:
            raise ValueError(f"{name} needs a target slot (0..{self._base.K - 1}) or memory id, got {command!r}")
        ids = self._base.candidate_ids
        if arg.isascii() and arg.isdigit():  # ("²".isdigit() is True)
            slot = int(arg)
            if not 0 <= slot < self._base.K:
                raise ValueError(f"slot {slot} out of range in {command!r}; slots are 0..{self._base.K - 1}")
            return np.array([op, slot], dtype=np.int64)
        by_id = {m.lower(): j for j, m in enumerate(ids)}  # ids are case-insensitive, as the command
        if arg.lower() in by_id:
            return np.array([op, by_id[arg.lower()]], dtype=np.int64)
        raise ValueError(
            f"target {arg!r} in {command!r} is neither a slot number (0..{self._base.K - 1}) nor a candidate id "
            f"({', '.join(ids) if ids else 'no candidates now'})"
        )

    def frame(self) -> str:
        base = self._base
        world = base.world
        lines = []
        if world.done:
            lines.append("EVENT: (episode over)")
        else:
            ev = world.event
            lines.append(f"EVENT ({ev.kind}): {ev.text}")
        lines.append("CANDIDATES:" if base.candidate_ids else "CANDIDATES: (none)")
        feats = base._features.candidates
        for j, mid in enumerate(base.candidate_ids):
            rec = world.store.get(mid)
            tags = [f"sim {feats[j, _COL['similarity']]:+.2f}"]
            if feats[j, _COL["recent"]]:
                tags.append("recent")
            if feats[j, _COL["superseded"]]:
                tags.append("superseded")
            if feats[j, _COL["semantic"]]:
                tags.append("rule")
            lines.append(f"  [{j}] {mid} ({', '.join(tags)}): {rec.content if rec else ''}")
        lines.append(f"STORE: {len(world.store)}/{base.config.capacity} live")
        lines.append(f"COMMANDS: {self.commands()}")
        text = "\n".join(lines)
        text = "".join(ch if ch in _CHARSET else "?" for ch in text)
        return text[: self.max_length]

    def reset(self, **kwargs):
        _, info = self.env.reset(**kwargs)
        return self.frame(), info

    def step(self, action: str | InvalidAction):
        if type(action) is InvalidAction:  # a wrapper above could not map its action: it steps through
            _, reward, terminated, truncated, info = self.env.step(action)
            return self.frame(), reward, terminated, truncated, info
        try:
            act = self.parse(action)
        except ValueError as e:
            if self.on_error == "raise":
                raise
            # the env's invalid no-op (penalty, flag), as a step through every wrapper below this one
            _, reward, terminated, truncated, info = self.env.step(InvalidAction(f"malformed command: {e}"))
            info["parse_error"] = str(e)
            return self.frame(), reward, terminated, truncated, info
        _, reward, terminated, truncated, info = self.env.step(act)
        return self.frame(), reward, terminated, truncated, info


def _time_limit_below(env: gym.Env) -> int | None:
    """``max_episode_steps`` of the nearest ``gymnasium.wrappers.TimeLimit`` in ``env``'s stack, if any.
    (Its own attribute: ``env.spec`` would deep-copy the spec, a custom reader in its kwargs included.)"""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, gym.wrappers.TimeLimit):
            n = getattr(env, "_max_episode_steps", None)
            return n if isinstance(n, int) else None
        env = env.env
    return None


class FinalMetrics(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Puts the world's metrics (``World.metrics()``) into ``info["metrics"]`` on the last step of an
    episode that a wrapper below ended without them: Gymnasium's ``TimeLimit``, which
    ``gym.make(id, max_episode_steps=N)`` adds under the registered wrappers. The env never sees
    that limit (``gym.make`` gives the unwrapped env a spec without it), so its world goes on as if
    the episode went on: for ``MemGym/Life-Endless-v0`` the limit is the episode's only end, and
    without this wrapper its last info had no metrics at all.

    Every registered id has it (``gym.make`` puts it over the ``TimeLimit``); put it over a limit of
    your own: ``FinalMetrics(TimeLimit(env, N))``. An episode the world ended (its horizon) already
    has its metrics and passes through unchanged.

    A limit below a fixed horizon cuts that world from outside: the metrics are those of the events
    played, the world's end-of-episode checks (an erasure request whose question the cut left
    unasked) do not run and the observation's clock stops at ``N / horizon``. The first reset warns
    once and names the override that plays an ``N``-event world instead, ``horizon=N``.
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        self._base = _memory_env(env)
        self._warned = False

    def reset(self, **kwargs):
        out = self.env.reset(**kwargs)
        if not self._warned:
            self._warn_if_cut()
        return out

    def _warn_if_cut(self) -> None:
        """Warn (once per wrapper) when a time limit below ends the world before its horizon."""
        n = _time_limit_below(self.env)
        horizon = self._base.config.horizon
        if n is None or horizon is None or n >= horizon:
            return
        self._warned = True
        from world.config import _SPECS

        low = _SPECS["horizon"].lo
        instead = (f"gym.make(id, horizon={n}) plays a {n}-event world instead (the last step's info then has its "
                   f"metrics, the clock reaches 1)" if n >= low else
                   f"a horizon is at least {low}: gym.make(id, horizon={low}) is the shortest whole world")
        gym.logger.warn(
            f"max_episode_steps={n} (a TimeLimit) ends this {horizon}-event world after {n} events from outside: "
            f"the env does not see the limit, so the last step's info['metrics'] (added by FinalMetrics) count the "
            f"events played, the world's end-of-episode checks do not run and the observation's clock stops at "
            f"{n / horizon:.2f}; {instead}")

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if (terminated or truncated) and "metrics" not in info:
            info["metrics"] = self._base.world.metrics()  # (a new dict on each call)
        return obs, reward, terminated, truncated, info
