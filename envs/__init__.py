"""memgym's Gymnasium environments.

``import envs`` registers one id per task family and difficulty, ``MemGym/<Family>-<Difficulty>-v0``
(e.g. ``MemGym/Recall-Easy-v0``, ``MemGym/MultiHop-Hard-v0``), plus ``MemGym/Life-Endless-v0``::

    import gymnasium as gym
    import envs  # noqa: F401  (registers the ids)
    env = gym.make("MemGym/Life-Easy-v0")
    env = gym.make("envs:MemGym/Life-Easy-v0")   # works without the import too

:func:`id_table` lists every id with its family, horizon and capacity (the README's table).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import WrapperSpec

from envs.memory_env import AgentView, MemoryEnv, resolve_config

__all__ = ["MemoryEnv", "AgentView", "resolve_config", "env_id", "parse_env_id", "registered_ids",
           "id_table", "write_id_table", "register_envs", "ENTRY_POINT"]

ENTRY_POINT = "envs.memory_env:MemoryEnv"
FINAL_METRICS = "envs.wrappers:FinalMetrics"
_NAMESPACE = "MemGym"
_VERSION = "v0"
_ENV_DIFFICULTIES = ("easy", "medium", "hard")
_ENDLESS = (("life", "endless"),)


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def env_id(family: str, difficulty: str) -> str:
    """``("multi_hop", "easy")`` -> ``"MemGym/MultiHop-Easy-v0"``; unknown names raise ValueError listing the valid ones."""
    from world import DIFFICULTIES, FAMILIES

    fam = str(family).lower()
    diff = str(difficulty).lower()
    if fam not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; valid families: {', '.join(FAMILIES)}")
    if diff not in DIFFICULTIES:
        raise ValueError(f"unknown difficulty {difficulty!r}; valid difficulties: {', '.join(DIFFICULTIES)}")
    if diff not in _ENV_DIFFICULTIES and (fam, diff) not in _ENDLESS:
        valid = ", ".join(f"{f}-{d}" for f, d in _ENDLESS)
        raise ValueError(f"no env for {fam!r} at {diff!r}: only {valid} has that difficulty")
    return f"{_NAMESPACE}/{_camel(fam)}-{_camel(diff)}-{_VERSION}"


def _pairs() -> list[tuple[str, str]]:
    from world import FAMILIES

    pairs = [(f, d) for f in FAMILIES for d in _ENV_DIFFICULTIES]
    pairs.extend(_ENDLESS)
    return pairs


def registered_ids() -> list[str]:
    """Every id this package registers, in a stable order (families as in ``world.FAMILIES``)."""
    return [env_id(f, d) for f, d in _pairs()]


def parse_env_id(id_: str) -> tuple[str, str]:
    """``"MemGym/MultiHop-Easy-v0"`` -> ``("multi_hop", "easy")`` (an ``"envs:"`` module prefix is
    allowed); anything else, a non-string included, raises ValueError naming the valid ids."""
    table = {env_id(f, d): (f, d) for f, d in _pairs()}
    if not isinstance(id_, str):  # (the string tests below raised a bare TypeError for None, 123, bytes)
        raise ValueError(f"env id must be a string, got {id_!r}; registered ids: {', '.join(table)}")
    key = id_.split(":", 1)[1] if ":" in id_ else id_
    if key not in table:
        raise ValueError(f"unknown env id {id_!r}; registered ids: {', '.join(table)}")
    return table[key]


def register_envs() -> list[str]:
    """Register every MemGym id with Gymnasium (idempotent); returns the ids."""
    ids = []
    for family, difficulty in _pairs():
        id_ = env_id(family, difficulty)
        if id_ not in gym.registry:
            gym.register(
                id=id_,
                entry_point=ENTRY_POINT,
                kwargs={"preset": f"{family}-{difficulty}", "registered_as": f"{family}-{difficulty}"},
                nondeterministic=False,
                disable_env_checker=False,
                # over gym.make's TimeLimit (max_episode_steps), which the env cannot see: the last
                # step's info gets the world's metrics however the episode ends (envs.wrappers)
                additional_wrappers=(WrapperSpec(name="FinalMetrics", entry_point=FINAL_METRICS, kwargs={}),),
            )
        ids.append(id_)
    return ids


def id_table(fmt: str = "markdown") -> Any:
    """The registered ids with family, difficulty, horizon, capacity and K, from the presets.

    ``fmt="rows"`` returns a list of dicts; ``fmt="markdown"`` a table to paste (the README's).
    """
    from world import WorldConfig

    rows = []
    for family, difficulty in _pairs():
        cfg = WorldConfig.preset(family, difficulty)
        rows.append({
            "id": env_id(family, difficulty),
            "family": family,
            "difficulty": difficulty,
            "horizon": cfg.horizon,
            "capacity": cfg.capacity,
            "n_candidates": cfg.n_candidates,
            "top_k": cfg.top_k,
        })
    if fmt == "rows":
        return rows
    if fmt != "markdown":
        raise ValueError(f"fmt must be 'markdown' or 'rows', got {fmt!r}")
    head = "| id | family | difficulty | horizon | capacity | K |\n|---|---|---|---:|---:|---:|\n"
    body = "".join(
        f"| `{r['id']}` | {r['family']} | {r['difficulty']} | "
        f"{'endless' if r['horizon'] is None else r['horizon']} | {r['capacity']} | {r['n_candidates']} |\n"
        for r in rows
    )
    return head + body


def write_id_table(path: str = "docs/env.md") -> bool:
    """Rewrite the id table between ``<!-- id-table:start -->`` and ``<!-- id-table:end -->`` in a
    Markdown file (docs/env.md, the README) from :func:`id_table`; True if the file changed.
    ``python -c "import envs; envs.write_id_table('docs/env.md')"`` after changing a preset."""
    from pathlib import Path

    file = Path(path)
    text = file.read_text()
    start, end = "<!-- id-table:start -->\n", "<!-- id-table:end -->"
    i, j = text.find(start), text.find(end)
    if i < 0 or j < i:
        raise ValueError(f"{path}: no '<!-- id-table:start -->' ... '<!-- id-table:end -->' markers")
    new = text[: i + len(start)] + id_table() + text[j:]
    if new != text:
        file.write_text(new)
    return new != text


register_envs()
