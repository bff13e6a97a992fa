"""The worlds read a script text token by token (world.sim._analysed through the per-token memo
_script_token): the cues, signatures and version keys are those of extract_cues / signature /
subject_and_topic_of, and the token memo holds the tokens of script texts only, bounded."""

import random

import numpy as np

import world.sim as sim
from world.cues import cue_of_token, cues_of_tokens, extract_cues
from world.dedup import signature, signature_of_tokens, words_of_token
from world.keys import subject_and_topic_of


def _texts() -> list[str]:
    from world import WorldConfig
    from world.families import generate_script

    texts = []
    for seed in range(3):
        texts += [e.text for e in generate_script(WorldConfig.preset("life", "hard"), seed)]
    rnd = random.Random(3)
    alphabet = "aAbZz09 .,'’-:;!?()\"s\t\x1c"  # (’ and \x1c: the texts the token path leaves to the plain rule)
    texts += ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 30))) for _ in range(3000)]
    words = [w for t in texts[:500] for w in t.split()] + ["x's", "IT'S", "'quoted'", "a''b", "A-1", "3.5,", "::", "a::b"]
    texts += [" ".join(rnd.choice(words) for _ in range(rnd.randint(0, 12))) for _ in range(3000)]
    return texts + ["", "  ", "Alice's cat's toy", "Theo X.'s car", "Umar I. and I think.", "std::vector"]


def test_token_rules_give_the_text_rules():
    for text in _texts():
        if not text.isascii() or "::" in text:
            continue
        tokens = text.split()
        for k in (1, 2, 3, 8, 12):
            assert cues_of_tokens([cue_of_token(t) for t in tokens], k) == extract_cues(text, k), (text, k)
        got, want = signature_of_tokens(tokens, [words_of_token(t) for t in tokens]), signature(text)
        assert got == want, text
        # the same sets built in the same order (their iteration order is that of the plain rule)
        assert list(got.entities) == list(want.entities) and list(got.word_set) == list(want.word_set), text


def test_analysed_gives_the_plain_values_and_keeps_script_tokens_only(monkeypatch):
    monkeypatch.setattr(sim, "_SCRIPT_TEXTS", type(sim._SCRIPT_TEXTS)())
    monkeypatch.setattr(sim, "_SCRIPT_TOKENS", {})
    texts = _texts()
    for k in (8, 3):
        for text in texts:
            entry = sim._analysed(text, k)
            sig = signature(text)
            assert entry[1] == tuple(extract_cues(text, k)) and entry[2] == sig, (text, k)
            assert entry[3] == (*subject_and_topic_of(sig), sig)
    assert set(sim._SCRIPT_TOKENS) <= {t for text in texts for t in text.split()}
    # a world's store brings in a text: none of its tokens enters the memo
    from world import World, WorldConfig

    sim._SCRIPT_TOKENS.clear()
    world = World(WorldConfig.preset("life", "easy"), seed=4)
    secret = "The vault code is qzx5521 and only Mallory knows it."
    mem = world.store.write_episode(world.store.current_step, secret)
    world.store.erase(memory_id=mem.memory_id)
    while not world.done:
        world.event_cues()
        world.advance()
    assert not {"qzx5521", "Mallory"} & set(sim._SCRIPT_TOKENS)
    assert set(sim._SCRIPT_TOKENS) <= {t for e in world.privileged.script for t in e.text.split()}
    # bounded: emptied when full
    monkeypatch.setattr(sim, "SCRIPT_TOKEN_ENTRIES", 40)
    sim._SCRIPT_TEXTS.clear()
    world.reset(5)
    assert 0 < len(sim._SCRIPT_TOKENS) <= 40
    assert np.all([sim._analysed(e.text, 8)[1] == tuple(extract_cues(e.text, 8)) for e in world.privileged.script])
