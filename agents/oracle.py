"""The privileged oracle as a benchmark agent: the upper bound of the normalised score (1.0).

It wraps ``world.oracle`` (the policy that reads the hidden payloads of the current event and of
the stored memories and uses every operation well) and turns its ``(op, target id)`` choice into
the env's ``[op, slot]`` action. ``disabled_ops`` removes operations for the ablation table
(``oracle[-LINK]`` in results); the world's oracle then plays its best without them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agents.base import NOOP, OP_NAMES, TARGETED, BaseAgent, register_agent


@register_agent("oracle", "privileged: reads the hidden payloads, uses every operation well (the upper bound)")
class OracleAgent(BaseAgent):
    """Privileged policy of ``world.oracle``; ``disabled_ops`` (names or numbers) for ablations."""

    name = "oracle"
    privileged = True

    def __init__(self, disabled_ops: Any = ()) -> None:
        super().__init__()
        from world.oracle import _op

        if isinstance(disabled_ops, (str, bytes)):  # (a bare "FORGET" was read letter by letter)
            raise TypeError(f"disabled_ops must be a list of ops, got {type(disabled_ops).__name__} "
                            f"{disabled_ops!r} (one op: [{disabled_ops!r}])")
        ops = []
        for o in disabled_ops or ():
            # the world oracle's conversion: names (any case), Op members, ints and decimal strings; not a
            # float or a bool (OP_NAMES[int(o)] made 1.9 and True a WRITE, and -1 a FORGET)
            try:
                name = OP_NAMES[int(_op(o))]
            except ValueError:
                name = None
            if name not in OP_NAMES[1:]:
                raise ValueError(f"disabled_ops: unknown operation {o!r}; allowed: {list(OP_NAMES[1:])} "
                                 "(names in any case, or their numbers 1-6)")
            ops.append(name)
        # canonical: each op once, in the operations' order (the name labels rows of results.json; as
        # make_agent's "oracle[-FORGET,-LINK,-LINK]" gives "oracle[-LINK,-FORGET]")
        ops = sorted(set(ops), key=OP_NAMES.index)
        self.disabled_ops = tuple(ops)
        if ops:
            self.name = "oracle[" + ",".join(f"-{o}" for o in ops) + "]"
        self.world = None
        self.policy = None

    def attach_world(self, world: Any) -> None:
        from world.oracle import Oracle

        self.world = world
        self.policy = Oracle(disabled_ops=self.disabled_ops)
        self.policy.reset()
        self.misses = 0  # targets the env did not show as candidates (played as NOOP)

    def act(self, observation: Any, info: dict) -> np.ndarray:
        if self.policy is None:
            raise RuntimeError("the oracle needs the world: agents.bench calls attach_world(env.unwrapped.world)")
        op, target = self.policy.act(self.world)
        op = int(op)
        slot = 0
        if op in TARGETED:
            ids = list(info.get("candidate_ids", []))
            if target not in ids:
                self.misses += 1
                return np.array([NOOP, 0], dtype=np.int64)
            slot = ids.index(target)
        return np.array([op, slot], dtype=np.int64)
