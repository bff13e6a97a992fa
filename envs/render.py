"""Rendering of :class:`envs.MemoryEnv` (the viewer, kept apart from the dynamics).

``render_ansi``: the event, the last operation and its outcome, the candidates and the store as text.
``render_rgb``: a small picture of the store, numpy only: every live memory is a dot placed by a fixed
random projection of its embedding (so similar memories sit close), coloured by tier (blue fact,
green preference, orange inference, purple semantic rule), brighter the higher its ACT-R activation;
typed links are grey lines; candidates get a white ring; a bar on top shows the fill ratio.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from envs import features as F

if TYPE_CHECKING:  # pragma: no cover
    from envs.memory_env import MemoryEnv

SIZE = 192
_BAR = 8
_TIER_COLOURS = {
    "fact": (70, 130, 255),
    "preference": (60, 200, 90),
    "inference": (255, 150, 40),
}
_SEMANTIC_COLOUR = (190, 90, 230)
_OTHER_COLOUR = (200, 200, 200)
_BG = (18, 18, 24)


def _short(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


def render_ansi(env: MemoryEnv) -> str:
    world = env.world
    store = world.store
    lines = []
    ev = None if world.done else world.event
    head = f"step {env._steps}"
    if env.config.horizon:
        head += f"/{env.config.horizon}"
    head += f"  return {env._episode_return:+.3f}  [{env.config.family}-{env.config.difficulty}]"
    lines.append(head)
    if ev is not None:
        lines.append(f"event #{ev.index} ({ev.kind}, session {ev.session}): {_short(ev.text, 100)}")
    else:
        lines.append("event: (episode over)")
    out = env._last_outcome
    if out is not None and env._last_action is not None:
        op_i, slot = env._last_action
        desc = f"last: {out.op.name}"
        if out.target is not None:
            desc += f" -> {out.target}"
        if not out.valid:
            desc += f"  INVALID ({out.invalid_reason})"
        if out.memory_id:
            desc += f"  wrote {out.memory_id}" + (" (duplicate)" if out.duplicate else "")
        if out.question:
            q = out.question
            desc += f"  question[{q.get('family')}]: {q.get('verdict')}"
        desc += f"  reward {out.reward:+.3f}"
        lines.append(desc)
    feats = env._features.candidates
    col = {name: i for i, name in enumerate(F.CANDIDATE_FEATURES)}
    lines.append(f"candidates ({len(env._ids)}/{env.K}):   sim   act   imp  flags")
    for j, mid in enumerate(env._ids):
        rec = store.get(mid)
        row = feats[j]
        flags = "".join((
            "S" if row[col["semantic"]] else "E",
            "r" if row[col["recent"]] else "-",
            "x" if row[col["superseded"]] else "-",
        ))
        text = rec.content if rec is not None else "?"
        lines.append(
            f"  [{j}] {mid:<11} {row[col['similarity']]:+.2f} {row[col['activation']]:.2f} "
            f"{row[col['importance']]:.2f}  {flags}  {_short(text, 60)}"
        )
    s = env._features.store
    lines.append(
        f"store: {len(store)}/{env.config.capacity} live ({len(store.episodic)} episodic, "
        f"{len(store.semantic)} semantic), mean activation {s[3]:.2f}, next sweep in "
        f"{s[4] * max(1, env.config.sweep_every):.0f} steps"
    )
    return "\n".join(lines) + "\n"


def _projection(dim: int) -> np.ndarray:
    rng = np.random.default_rng(12345)
    p = rng.standard_normal((dim, 2)).astype(np.float32)
    return p / np.linalg.norm(p, axis=0, keepdims=True)


def _draw_line(img: np.ndarray, p0: np.ndarray, p1: np.ndarray, colour) -> None:
    n = int(max(abs(p1[0] - p0[0]), abs(p1[1] - p0[1]))) + 1
    xs = np.linspace(p0[0], p1[0], n).round().astype(int)
    ys = np.linspace(p0[1], p1[1], n).round().astype(int)
    img[ys, xs] = colour


def dot_positions(vecs: np.ndarray) -> np.ndarray:
    """(n, 2) pixel positions (x, y) of memories with unit embeddings ``vecs`` (n, dim): a fixed
    projection and a fixed scale, so a memory's dot depends on its own embedding only and never
    moves while it lives (a video of the store does not jitter). The projection of a unit vector onto
    a unit column has a standard deviation of ~ 1/sqrt(dim) for unrelated texts; 3 of those fill the
    frame, and a rare farther dot sits on its border."""
    xy = np.asarray(vecs, dtype=np.float32) @ _projection(vecs.shape[1])
    span = 3.0 / float(np.sqrt(vecs.shape[1]))
    lo, hi = _BAR + 4, SIZE - 4
    pos = np.clip(((xy / span) * 0.5 + 0.5) * (hi - lo) + lo, lo, hi - 1)
    pos[:, 0] = np.clip(pos[:, 0], 3, SIZE - 4)
    return pos


def render_rgb(env: MemoryEnv) -> np.ndarray:
    """(SIZE, SIZE, 3) uint8 picture of the store (see the module docstring)."""
    img = np.empty((SIZE, SIZE, 3), dtype=np.uint8)
    img[:] = _BG
    store = env.world.store
    cap = max(1, int(env.config.capacity))
    fill = min(len(store) / cap, 1.0)
    img[1:_BAR - 1, 1:SIZE - 1] = (50, 50, 60)
    img[1:_BAR - 1, 1:1 + int(round(fill * (SIZE - 2)))] = (230, 200, 60) if fill < 1 else (230, 70, 60)
    ids = list(store.episodic) + list(store.semantic)
    if not ids:
        return img
    pos = dot_positions(np.stack([store.embed(store.get(m).content) for m in ids]))
    index = {m: i for i, m in enumerate(ids)}
    for i, m in enumerate(ids):
        rec = store.get(m)
        for link in getattr(rec, "links", ()) or ():
            other = link[0] if isinstance(link, (tuple, list)) else getattr(link, "target", link)
            j = index.get(other)
            if j is not None:
                _draw_line(img, pos[i], pos[j], (90, 90, 100))
    act = F.squash_activation(store.activations(ids), float(env.config.forget_threshold))
    cands = set(env._ids)
    for i, m in enumerate(ids):
        x, y = int(pos[i, 0]), int(pos[i, 1])
        rec = store.get(m)
        if m in store.semantic:
            base = _SEMANTIC_COLOUR
        else:
            base = _TIER_COLOURS.get(getattr(rec, "tier", None), _OTHER_COLOUR)
        shade = 0.35 + 0.65 * float(act[i])
        colour = tuple(int(c * shade) for c in base)
        if m in cands:
            img[y - 3:y + 4, x - 3:x + 4] = (255, 255, 255)
        img[y - 2:y + 3, x - 2:x + 3] = colour
    return img
