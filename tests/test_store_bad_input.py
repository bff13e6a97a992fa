"""The memory store on bad or unusual input: texts in any script, evidence across namespaces,
non-finite numbers, rejected supersessions. A rejected call raises a ValueError naming the field and
changes nothing (docs/store.md)."""

import math
import re
import warnings

import numpy as np
import pytest

from world.dedup import DedupConfig, signature, words
from world.embedding import CachedEmbedder, HashingEmbedder, tokenize
from world.importance import SEED_KEY_TERMS, ImportanceScorer
from world.memory import MemoryStore


def _store(**kw) -> MemoryStore:
    return MemoryStore(CachedEmbedder(HashingEmbedder(64)), **kw)


def _snapshot(store: MemoryStore) -> str:
    """Everything the store holds (records, graph edges, ACT-R rows, layout, counters, embeddings)."""
    state = store._export_state()
    state["embeddings"] = state["embeddings"].tobytes()
    return repr(state)


# --------------------------------------------------------------------------- 1. any script
@pytest.mark.parametrize("old, new", [
    ("用户最喜欢的饮料是绿茶", "用户最喜欢的饮料是咖啡"),  # tea -> coffee (was: 'prefix')
    ("Пользователь любит чай и кофе каждый день", "Пользователь любит чай и сок каждый день"),  # (was: 'prefix')
    ("Zoë likes the café", "Zoé likes the café"),  # another person (was: 'containment')
    ("ผู้ใช้ชอบชาเขียว", "ผู้ใช้ชอบกาแฟ"),  # Thai, no spaces: tea -> coffee
    ("Bob likes tea", "Bob likes tea with Émile"),  # an accented name is entity-like (was: 'containment')
    ("东京今天下雨", "我的猫叫山火木"),  # two unrelated sentences (was: 'embedding')
])
def test_a_changed_value_in_any_script_is_never_a_duplicate(old, new):
    s = _store()
    a = s.write_episode(1, old)
    b = s.write_episode(2, new)
    assert s.last_write.status == "written", s.last_write
    assert b.memory_id != a.memory_id
    assert [r.content for r in s.episodic.values()] == [old, new]


@pytest.mark.parametrize("text, again", [
    ("用户最喜欢的饮料是绿茶", "用户最喜欢的饮料是绿茶"),
    ("Zoë likes the café", "ZOË LIKES THE CAFÉ"),
    ("Zoë likes the café", "Zoe\u0308 likes the cafe\u0301"),  # the same text, decomposed (NFD)
])
def test_the_same_statement_in_any_script_is_still_a_duplicate(text, again):
    s = _store()
    first = s.write_episode(1, text)
    assert s.write_episode(2, again) is first
    assert s.last_write.status == "duplicate" and len(s) == 1


def test_words_of_any_script():
    assert words("Zoë's café, Пользователь любит чай") == ["zoë", "café", "пользователь", "любит", "чай"]
    assert words("张伟的电话号码是138") == ["张", "伟", "的", "电", "话", "号", "码", "是", "138"]
    assert words("コーヒーが好き") == ["コ", "ー", "ヒ", "ー", "が", "好", "き"]
    assert words("हिन्दी बोलता") == ["हिन्दी", "बोलता"]  # vowel signs (combining marks) stay in the word
    assert words("Zoe\u0308 x") == ["zoë", "x"]  # NFC
    assert tokenize("Zoë's CAFÉ 张伟") == ["zoë", "café", "张", "伟"]
    sig = signature("Émile met Zoë and élodie at ٣ and 东京")
    assert sig.entities == frozenset({"émile", "zoë", "٣"})


def test_hashing_embedder_separates_sentences_without_spaces():
    e = HashingEmbedder(64)
    a, b = e.encode("东京今天下雨"), e.encode("我的猫叫山火木")
    assert float(a @ b) < 0.5
    # lexical, as for English: sharing most characters makes texts similar
    assert float(e.encode("东京今天下雨") @ e.encode("东京今天下大雨")) > 0.6


def test_subject_erasure_matches_the_subject_as_words_in_any_script():
    s = _store()
    zoe_dia = s.write_episode(1, "Zoë lives in Lyon.")
    zoe_acute = s.write_episode(2, "Zoé lives in Portmere.")
    rene = s.write_episode(3, "René has a cat")
    renee = s.write_episode(4, "Renée has a dog")
    zhang = s.write_episode(5, "张伟的电话号码是13800138000")
    li = s.write_episode(6, "李娜的电话号码是13900139000")

    assert s.erase(subject="Zoë").episodic == [zoe_dia.memory_id]
    assert zoe_acute.memory_id in s
    assert s.erase(subject="René").episodic == [rene.memory_id]
    assert renee.memory_id in s
    assert s.erase(subject="张伟").episodic == [zhang.memory_id]
    assert li.memory_id in s
    assert s.erase(subject="Ze\u0301").episodic == []  # no word "zé" anywhere
    assert s.erase(subject="Zoe\u0301").episodic == [zoe_acute.memory_id]  # the NFD spelling is the same name
    assert sorted(r.content for r in s.episodic.values()) == ["Renée has a dog", "李娜的电话号码是13900139000"]


# --------------------------------------------------------------------------- 2. evidence across namespaces
def test_evidence_from_another_namespace_is_refused_and_nothing_is_written():
    s = _store()
    a = s.write_episode(1, "Alice's PIN is 4417")
    before = _snapshot(s)
    with pytest.raises(ValueError, match=r"evidence: 'ep_000001' lives in namespace 'default', not 'audit'"):
        s.write_semantic(2, "Alice reuses PIN 4417", [], evidence=[a.memory_id], namespace="audit")
    with pytest.raises(ValueError, match="evidence"):
        s.namespace("audit").write_episode(2, "Alice reuses PIN 4417", evidence=[a.memory_id])
    with pytest.raises(ValueError, match="evidence must be a list"):
        s.write_episode(2, "Alice reuses PIN 4417", evidence=a.memory_id)
    assert _snapshot(s) == before
    assert s.namespaces() == ["default"]
    # inside one namespace the evidence is accepted and the cascade removes what cites the erased id
    sem = s.write_semantic(2, "Alice reuses PIN 4417", [], evidence=[a.memory_id])
    report = s.erase(memory_id=a.memory_id)
    assert report.cascaded == [sem.memory_id] and len(s) == 0


# --------------------------------------------------------------------------- 3. non-finite numbers
NAN, INF = math.nan, math.inf


@pytest.mark.parametrize("kwargs, field", [
    ({"forget_threshold": NAN}, "forget_threshold"),
    ({"forget_threshold": INF}, "forget_threshold"),
    ({"forget_threshold": -INF}, "forget_threshold"),
    ({"decay": NAN}, "decay"),
    ({"ppr_alpha": NAN}, "ppr_alpha"),
    ({"ppr_alpha": 1.0}, "ppr_alpha"),
    ({"ppr_tol": NAN}, "ppr_tol"),
    ({"ppr_tol": INF}, "ppr_tol"),
    ({"ppr_tol": 0.0}, "ppr_tol"),
    ({"ppr_max_iter": 0}, "ppr_max_iter"),
    ({"ppr_max_iter": 2.5}, "ppr_max_iter"),
    ({"max_cues": 0}, "max_cues"),
    ({"actr_k": True}, "actr_k"),
    ({"embed_window": 0}, "embed_window"),
    ({"embed_window": 1.5}, "embed_window"),
])
def test_constructor_rejects_bad_numbers_by_name(kwargs, field):
    with pytest.raises(ValueError, match=field):
        _store(**kwargs)


def test_dedup_config_and_embedder_reject_non_finite_numbers():
    with pytest.raises(ValueError, match="jaccard"):
        DedupConfig(jaccard=NAN)
    with pytest.raises(ValueError, match="embed_threshold"):
        DedupConfig(embed_threshold=NAN)
    with pytest.raises(ValueError, match="window"):
        DedupConfig(window=2.5)
    with pytest.raises(ValueError, match="bigram_weight"):
        HashingEmbedder(64, bigram_weight=NAN)


def _two_memories() -> tuple[MemoryStore, list[str]]:
    s = _store()
    ids = [s.write_episode(1, "Alice likes tea").memory_id, s.write_episode(2, "Bob likes coffee").memory_id]
    s.tick(5)
    return s, ids


@pytest.mark.parametrize("step", [NAN, INF, -INF, 7.5, "8", True, 4])
def test_tick_rejects_non_int_and_backwards_steps_and_changes_nothing(step):
    s, ids = _two_memories()
    before = _snapshot(s)
    with pytest.raises(ValueError, match="step"):
        s.tick(step)
    assert s.current_step == 5 and _snapshot(s) == before
    acts = s.activations(ids)
    assert np.isfinite(acts).all()
    assert len(s.query("tea", top_k=1)) == 1


@pytest.mark.parametrize("weight", ["alpha_ppr", "alpha_sim", "alpha_actr"])
@pytest.mark.parametrize("value", [NAN, INF, -INF, "0.5"])
def test_query_rejects_non_finite_weights_before_bumping(weight, value):
    s, _ = _two_memories()
    before = _snapshot(s)
    with pytest.raises(ValueError, match=weight):
        s.query("tea", top_k=1, **{weight: value})
    assert _snapshot(s) == before  # no retrieval recorded
    assert [r.content for r in s.query("tea", top_k=1)] == ["Alice likes tea"]


@pytest.mark.parametrize("kwargs, field", [
    ({"importance": NAN}, "importance"),
    ({"importance": INF}, "importance"),
    ({"confidence": NAN}, "confidence"),
    ({"confidence": INF}, "confidence"),
    ({"confidence": True}, "confidence"),
    ({"step": NAN}, "step"),
    ({"step": 3.0}, "step"),
])
def test_writes_reject_non_finite_numbers_and_change_nothing(kwargs, field):
    s, _ = _two_memories()
    before = _snapshot(s)
    step = kwargs.pop("step", 6)
    with pytest.raises(ValueError, match=field):
        s.write_episode(step, "Carol likes juice", **kwargs)
    with pytest.raises(ValueError, match=field):
        s.write_semantic(step, "People like drinks", [], **kwargs)
    assert _snapshot(s) == before


def test_value_at_rejects_a_non_finite_step():
    s = _store()
    s.write_episode(1, "Alice lives in Portmere", key="alice/home")
    with pytest.raises(ValueError, match="step"):
        s.value_at("alice/home", NAN)
    assert s.value_at("alice/home", 1).content == "Alice lives in Portmere"


def test_a_keyed_write_cannot_start_before_the_active_version():
    s = _store()
    s.write_episode(5, "Alice lives in Portmere", key="alice/home")
    before = _snapshot(s)
    with pytest.raises(ValueError, match=r"step must be >= 5"):
        s.write_episode(4, "Alice lives in Salbury", key="alice/home")
    assert _snapshot(s) == before
    s.write_episode(4, "Alice lives in Portmere", key="alice/home")  # the same content: a duplicate, as before
    assert s.last_write.status == "duplicate"


# --------------------------------------------------------------------------- 4. rejected supersede
@pytest.mark.parametrize("step, kwargs, field", [
    (2.0, {}, "step"),
    (NAN, {}, "step"),
    (0, {}, "step"),  # before the target was written
    (2, {"confidence": NAN}, "confidence"),
    (2, {"tier": "inference", "confidence": 0.9}, "confidence"),
    (2, {"importance": INF}, "importance"),
    (2, {"cues": "alice"}, "cues"),
    (2, {"evidence": ["ep_000002"]}, "evidence"),  # an id of another namespace
])
def test_a_rejected_supersede_changes_nothing(step, kwargs, field):
    s = _store()
    m = s.write_episode(1, "Alice lives in Portmere")
    s.write_episode(1, "Alice audits Portmere", namespace="audit")  # ep_000002
    before = _snapshot(s)
    with pytest.raises(ValueError, match=field):
        s.supersede(m.memory_id, "Alice lives in Salbury", step, **kwargs)
    assert m.key is None and m.active
    assert s.versions(f"chain:{m.memory_id}") == []
    assert _snapshot(s) == before
    # the same call with good arguments works afterwards
    new = s.supersede(m.memory_id, "Alice lives in Salbury", 2)
    assert [r.memory_id for r in s.versions(f"chain:{m.memory_id}")] == [m.memory_id, new.memory_id]


def test_a_supersede_whose_write_fails_later_gives_the_key_back():
    class Failing:
        name, dim = "failing", 8

        def __init__(self):
            self.fail = False

        def encode(self, text):
            if self.fail:
                raise RuntimeError("embedder down")
            v = np.zeros(8, dtype=np.float32)
            v[len(text) % 8] = 1.0
            return v

    emb = Failing()
    s = MemoryStore(emb)
    m = s.write_episode(1, "Alice lives in Portmere")
    before = _snapshot(s)
    emb.fail = True
    with pytest.raises(RuntimeError, match="embedder down"):
        s.supersede(m.memory_id, "Alice lives in Salbury", 2)
    assert m.key is None and _snapshot(s) == before


def test_supersede_with_the_same_content_at_an_earlier_step_is_a_duplicate():
    st = MemoryStore(HashingEmbedder(64))
    a = st.write_episode(20, "Carol lives in Rome", key="carol/city")
    assert st.supersede(a.memory_id, "Carol lives in Rome", 15) is a and st.last_write.status == "duplicate"
    with pytest.raises(ValueError, match="step must be >= 20"):
        st.supersede(a.memory_id, "Carol lives in Milan", 15)


def test_dedup_window_accepts_numpy_integers():
    cfg = DedupConfig(window=np.int64(5))
    assert cfg.window == 5 and type(cfg.window) is int
    with pytest.raises(ValueError, match="dedup window must be an int >= 0"):
        DedupConfig(window=2.5)


# --------------------------------------------------------------------------- 5. lone surrogates
LONE = "chat \ud83d"  # half of a UTF-16 pair (text cut in the middle of an emoji): no UTF-8 form


@pytest.mark.parametrize("call, field", [
    (lambda s: s.write_episode(6, "Carol likes juice", source=LONE), "source"),
    (lambda s: s.write_episode(6, f"Carol likes juice {LONE}"), "content"),
    (lambda s: s.write_episode(6, "Carol likes juice", key=f"carol/{LONE}"), "key"),
    (lambda s: s.write_episode(6, "Carol likes juice", cues=["carol", LONE]), "cues"),
    (lambda s: s.write_episode(6, "Carol likes juice", namespace=LONE), "namespace"),
    (lambda s: s.write_episode(6, "Carol likes juice", evidence=[LONE]), "evidence"),
    (lambda s: s.write_semantic(6, f"People like {LONE}", []), "rule"),
    (lambda s: s.write_semantic(6, "People like drinks", [LONE]), "derived_from"),
    (lambda s: s.supersede("ep_000001", "Alice drinks coffee now", 6, source=LONE), "source"),
    (lambda s: s.add_evidence("ep_000001", [LONE]), "evidence"),
    # queries and embeddings too (they met a raw UnicodeEncodeError from the cache's key hashing)
    (lambda s: s.query(f"what does Alice drink {LONE}"), "query_text"),
    (lambda s: s.query_scored(LONE, bump=False), "query_text"),
    (lambda s: s.namespace("default").query(LONE), "query_text"),
    (lambda s: s.embed(f"Alice {LONE}"), "text"),
])
def test_a_lone_surrogate_is_refused_by_name_and_changes_nothing(call, field):
    """Python keeps a lone surrogate in a str, but it has no UTF-8 form: a store holding one could not
    be saved, so the write that would let it in is refused, naming the field."""
    s, _ = _two_memories()
    before = _snapshot(s)
    with pytest.raises(ValueError, match=rf"^{field} must be valid Unicode text: it holds a lone surrogate"):
        call(s)
    assert _snapshot(s) == before
    s.write_episode(6, "Zoë likes the café 😀", source="chat 😀")  # a whole pair, any script: fine


# --------------------------------------------------------------------------- 6. non-finite embeddings
class _PoisonEmbedder:
    """A user embedder (not unit_norm) whose vector for a text holding "poison" has a NaN, for one
    holding "blowup" an inf, and for one holding "huge" finite entries whose squares overflow float32."""

    name = "poison"
    dim = 64

    def __init__(self) -> None:
        self.inner = HashingEmbedder(64)

    def encode(self, text):
        vec = np.array(self.inner.encode(text), dtype=np.float32)
        if "poison" in text:
            vec[0] = np.nan
        elif "blowup" in text:
            vec[3] = np.inf
        elif "huge" in text:
            vec *= np.float32(1e30)
        return vec


@pytest.mark.parametrize("text", ["poison text here", "blowup text here"])
def test_a_non_finite_embedding_is_refused_naming_the_embedder_and_the_text(text):
    """A NaN norm failed `norm > 0`, so the vector was kept: every later query scored that row NaN and
    returned fewer than top_k memories (audit session 9)."""
    s = MemoryStore(embedder=_PoisonEmbedder())
    for i in range(5):
        s.write_episode(i, f"Alice fact number {i} about tea{i}.")
    before = _snapshot(s)
    with pytest.raises(ValueError, match=rf"^embedder 'poison' returned a vector that is not finite .*for text {text!r}"):
        s.write_episode(9, text)
    with pytest.raises(ValueError, match="^embedder 'poison'"):
        s.write_semantic(9, text, [])
    with pytest.raises(ValueError, match="^embedder 'poison'"):
        s.query(text, top_k=3)
    with pytest.raises(ValueError, match="^embedder 'poison'"):
        s.embed(text)
    assert _snapshot(s) == before
    assert len(s.query("Alice tea1", top_k=3, bump=False)) == 3


def test_a_finite_embedding_whose_float32_norm_overflows_is_still_normalised():
    s = MemoryStore(embedder=_PoisonEmbedder())
    vec = s.embed("huge text here")
    assert np.isfinite(vec).all() and abs(float(np.linalg.norm(vec.astype(np.float64))) - 1.0) < 1e-5
    np.testing.assert_allclose(vec, s.embedder.inner.encode("huge text here"), atol=1e-6)  # the unscaled one


class _FixedEmbedder:
    """A user embedder (not unit_norm) returning one given vector, as given (float64 here)."""

    name = "fixed"

    def __init__(self, vec) -> None:
        self.vec = vec
        self.dim = len(vec)

    def encode(self, text):
        return self.vec


_GAUSS = np.random.default_rng(0).standard_normal(384)


@pytest.mark.parametrize("vec", [
    np.array([1e39, 1e39, 0.0, 0.0]),  # finite in float64, inf in float32
    np.array([1e300, -2e300, 0.0, 0.0]),  # squares overflow float64 too
    np.array([3e-30, 4e-30, 0.0, 0.0]),  # squares underflow float32
    np.array([3e-200, 4e-200, 0.0, 0.0]),  # squares underflow float64 too
    1e-23 * _GAUSS,
    5.0 * _GAUSS,
], ids=["1e39", "1e300", "3e-30", "3e-200", "tiny-gauss", "gauss"])
def test_a_finite_vector_of_any_scale_is_normalised_in_float64(vec):
    """embed() cast to float32 before taking the norm: [1e39, 1e39, 0, 0] became inf and was refused as
    "NaN or inf" (with a RuntimeWarning), and 1e-23 * a 384-d normal vector came out with norm 2.35
    (review of session 9). The norm is now taken on the embedder's own output."""
    s = MemoryStore(embedder=_FixedEmbedder(vec))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = s.embed("any text")
        rec = s.write_episode(1, "Alice likes tea")
    assert out.dtype == np.float32
    assert abs(float(np.linalg.norm(out.astype(np.float64))) - 1.0) < 1e-6
    direction = vec / np.abs(vec).max()
    np.testing.assert_allclose(out, direction / np.linalg.norm(direction), rtol=1e-6, atol=1e-7)
    assert s.query_scored("Alice likes tea", top_k=1, alpha_ppr=0.0, bump=False)[0][0] is rec


def test_a_zero_vector_stays_zero_a_unit_one_is_kept_and_a_non_finite_one_is_still_refused():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not MemoryStore(embedder=_FixedEmbedder(np.zeros(4))).embed("x").any()
    unit = np.array([0.6, 0.8, 0.0, 0.0], dtype=np.float32)  # (a MiniLM vector: unit within 1e-4)
    assert MemoryStore(embedder=_FixedEmbedder(unit)).embed("x").tobytes() == unit.tobytes()
    for bad in ([np.nan, 1.0, 0.0, 0.0], [np.inf, 1e39, 0.0, 0.0], [-np.inf, np.inf, 0.0, 0.0]):
        s = MemoryStore(embedder=_FixedEmbedder(np.array(bad)))
        with pytest.raises(ValueError, match=r"^embedder 'fixed' returned a vector that is not finite \(\d NaN or inf "
                                             r"value\(s\) of 4\) for text 'some text'"):
            s.embed("some text")


# --------------------------------------------------------------------------- 7. types of source and cited ids
@pytest.mark.parametrize("call, field", [
    (lambda s: s.write_episode(6, "Carol likes juice", source=b"user"), "source"),
    (lambda s: s.write_episode(6, "Carol likes juice", source=("x",)), "source"),
    (lambda s: s.write_semantic(6, "People like drinks", [], source=3), "source"),
    (lambda s: s.supersede("ep_000001", "Alice drinks coffee now", 6, source=b"user"), "source"),
    (lambda s: s.write_episode(6, "Carol likes juice", evidence=[b"ep_000001"]), "evidence"),
    (lambda s: s.write_episode(6, "Carol likes juice", evidence=[object()]), "evidence"),
    (lambda s: s.write_episode(6, "Carol likes juice", evidence=[["ep_000001"]]), "evidence"),
    (lambda s: s.write_semantic(6, "People like drinks", [b"ep_000001"]), "derived_from"),
    (lambda s: s.write_semantic(6, "People like drinks", [["ep_000001"]]), "derived_from"),
    (lambda s: s.write_semantic(6, "People like drinks", ["ep_000001"], evidence=[1]), "evidence"),
    (lambda s: s.add_evidence("ep_000001", [b"ep_000002"]), "evidence"),
    (lambda s: s.add_evidence("ep_000001", [["ep_000002"]]), "evidence"),
])
def test_a_non_str_source_or_cited_id_is_refused_by_name_and_changes_nothing(call, field):
    """A bytes source or id was kept and the next save failed naming nothing, a tuple source came back
    from a save as a list, a list id was a bare TypeError (audit session 9)."""
    s, _ = _two_memories()
    s.write_semantic(3, "People like drinks", ["ep_000001"])  # (a semantic memory for add_evidence)
    before = _snapshot(s)
    with pytest.raises(ValueError, match=rf"^{field}"):
        call(s)
    assert _snapshot(s) == before


# --------------------------------------------------------------------------- 8. blank keys
@pytest.mark.parametrize("key", [" ", "\t\n", ""])
def test_a_blank_key_is_refused_at_write_as_erase_refuses_it(key):
    """" " could be written but erase(key=" ") refused it: the chain could not be erased by key."""
    s, _ = _two_memories()
    before = _snapshot(s)
    with pytest.raises(ValueError, match="^key must be a non-empty string"):
        s.write_episode(6, "Alice likes tea.", key=key)
    with pytest.raises(ValueError, match="^key must be a non-empty string"):
        s.write_semantic(6, "People like drinks", [], key=key)
    assert _snapshot(s) == before
    with pytest.raises(ValueError, match="erase: key must be a non-empty string"):
        s.erase(key=key)


# --------------------------------------------------------------------------- 9. numpy importance
@pytest.mark.parametrize("value", [np.float32(0.5), np.float64(0.25), np.int64(1), np.int32(0)])
def test_importance_accepts_numpy_numbers_as_confidence_does(value):
    s = _store()
    rec = s.write_episode(1, "Alice likes tea.", importance=value)
    assert rec.importance == float(value) and type(rec.importance) is float
    sem = s.write_semantic(2, "People like drinks.", [rec.memory_id], importance=value)
    assert sem.importance == float(value) and type(sem.importance) is float


@pytest.mark.parametrize("value", [np.float32("nan"), np.float64("inf"), np.float32(-0.5), np.bool_(True), "0.5"])
def test_importance_still_refuses_bad_numpy_and_other_values(value):
    s, _ = _two_memories()
    before = _snapshot(s)
    with pytest.raises(ValueError, match="^importance must be"):
        s.write_episode(6, "Carol likes juice", importance=value)
    assert _snapshot(s) == before


# --------------------------------------------------------------------------- 10. query cues
@pytest.mark.parametrize("cues", ["alice", [1], ["alice", None], 5, [b"alice"]])
@pytest.mark.parametrize("method", ["query", "query_scored"])
def test_query_refuses_bad_cues_by_name_before_bumping(cues, method):
    """cues="alice" iterated its letters (no cue node: PPR silently off), cues=[1] was a bare
    TypeError (audit session 9): the write's check, before anything is bumped."""
    s, _ = _two_memories()
    before = _snapshot(s)
    with pytest.raises(ValueError, match="^cues must be a list of strings or None"):
        getattr(s, method)("tea", cues=cues, top_k=1)
    with pytest.raises(ValueError, match="^cues must be a list of strings or None"):
        getattr(s.namespace("default"), method)("tea", cues=cues, top_k=1)
    assert _snapshot(s) == before


def test_cues_may_be_any_iterable_of_strings():
    """A generator was consumed by the type check: the write kept no cues at all."""
    s = _store()
    rec = s.write_episode(1, "Alice likes tea.", cues=(c for c in ["alice", "tea"]))
    assert rec.cues == ["alice", "tea"]
    new = s.supersede(rec.memory_id, "Alice likes coffee.", 2, cues=(c for c in ["alice", "coffee"]))
    assert new.cues == ["alice", "coffee"]
    s.query("what does she drink", cues=(c for c in ["alice"]), bump=False)
    assert s.last_ppr_method is not None  # the cue seeded PPR


# --------------------------------------------------------------------------- 11. ints beyond float range
HUGE = 10**400  # a Python int: exact, but float() and math.isfinite() raise OverflowError on it


class _HugeScorer:
    def score(self, text, query=None):
        return HUGE


@pytest.mark.parametrize("call, field", [
    (lambda s: s.write_episode(6, "Carol likes juice", importance=HUGE), "importance"),
    (lambda s: s.write_episode(6, "Carol likes juice", importance=-HUGE), "importance"),
    (lambda s: s.write_semantic(6, "People like drinks", [], importance=HUGE), "importance"),
    (lambda s: s.write_episode(6, "Carol likes juice", confidence=HUGE), "confidence"),
    (lambda s: s.write_semantic(6, "People like drinks", [], confidence=-HUGE), "confidence"),
    (lambda s: s.supersede("ep_000001", "Alice drinks coffee now", 6, importance=HUGE), "importance"),
    (lambda s: s.supersede("ep_000001", "Alice drinks coffee now", 6, confidence=HUGE), "confidence"),
    (lambda s: s.query("tea", top_k=1, alpha_ppr=HUGE), "alpha_ppr"),
    (lambda s: s.query_scored("tea", top_k=1, alpha_sim=-HUGE), "alpha_sim"),
    (lambda s: s.namespace("default").query("tea", top_k=1, alpha_actr=HUGE), "alpha_actr"),
    (lambda s: s.value_at("alice/home", HUGE), "step"),
    (lambda s: MemoryStore(forget_threshold=HUGE), "forget_threshold"),
    (lambda s: MemoryStore(importance_scorer=_HugeScorer()).write_episode(1, "Alice likes tea", importance=None),
     "importance_scorer"),
], ids=["episode-importance", "negative-importance", "semantic-importance", "episode-confidence",
        "semantic-confidence", "supersede-importance", "supersede-confidence", "alpha_ppr", "alpha_sim",
        "view-alpha_actr", "value_at-step", "forget_threshold", "scorer"])
def test_an_int_beyond_float_range_is_a_value_error_naming_the_field(call, field):
    """10**400 raised a bare OverflowError from float() / math.isfinite() (review of session 9)."""
    s, _ = _two_memories()
    before = _snapshot(s)
    with pytest.raises(ValueError, match=rf"^{field}"):
        call(s)
    assert _snapshot(s) == before


def test_a_step_or_ppr_tol_beyond_float_range_is_refused_by_name_and_changes_nothing():
    """ppr_tol=10**400 was accepted (every PPR query then raised OverflowError); write_episode(10**400)
    raised a bare OverflowError after allocating an embedding row and an id; tick(10**400) was accepted
    and every later sweep or query overflowed, with no way back (the clock never goes back)."""
    from world import MemoryStore

    with pytest.raises(ValueError, match="ppr_tol"):
        MemoryStore(ppr_tol=10**400)
    s = MemoryStore()
    s.write_episode(1, "Alice likes tea.")
    before = (len(s), s.stats()["embedding_rows"], dict(s._counters), s.current_step)
    with pytest.raises(ValueError, match="step"):
        s.write_episode(10**400, "Bob likes jazz.")
    with pytest.raises(ValueError, match="step"):
        s.tick(10**400)
    with pytest.raises(ValueError, match="step"):
        s.tick(2**53 + 1)
    assert (len(s), s.stats()["embedding_rows"], dict(s._counters), s.current_step) == before
    assert s.write_episode(2, "Bob likes jazz.").memory_id == "ep_000002"
    s.tick(2**53)  # the largest step: still exact as a float
    assert s.query("tea") and s.sweep_decayed() is not None


# --------------------------------------------------------------------------- id lists, vectors, counts
@pytest.mark.parametrize("call, field", [
    (lambda s, a: s.write_semantic(1, "rule x", None), r"derived_from must be a list of memory ids \(\[\] for none\)"),
    (lambda s, a: s.write_semantic(1, "rule x", 5), "derived_from must be a list of memory ids"),
    (lambda s, a: s.write_semantic(1, "rule x", [], evidence=5), "evidence must be a list of memory ids or None"),
    (lambda s, a: s.write_episode(1, "Bob likes jazz.", evidence=5), "evidence must be a list of memory ids or None"),
    (lambda s, a: s.namespace("default").write_episode(1, "Bob likes jazz.", evidence=5), "evidence must be a list"),
    (lambda s, a: s.add_evidence(a.memory_id, 5), "evidence must be a list of memory ids"),
    (lambda s, a: s.add_evidence(a.memory_id, [], 5), "derived_from must be a list of memory ids"),
    (lambda s, a: s.supersede(a.memory_id, "rule y", 2, derived_from=5), "derived_from must be a list"),
    (lambda s, a: s.similarities([1.0, 0.0]), r"vec must be a 1-d vector of the store's embedding dimension 64, "
                                              r"got shape \(2,\)"),
    (lambda s, a: s.similarities(np.ones((1, 64))), r"vec must be a 1-d vector.*got shape \(1, 64\)"),
    (lambda s, a: s.similarities(np.ones(3), [a.memory_id]), "vec must be a 1-d vector"),
    (lambda s, a: s.recent_ids(2.5), r"n must be an int \(how many ids; none for n <= 0\), got 2.5"),
    (lambda s, a: s.recent_ids(True), "n must be an int"),
    (lambda s, a: s.namespace("default").recent_ids("2"), "n must be an int"),
])
def test_bad_id_lists_vectors_and_counts_name_the_parameter_and_change_nothing(call, field):
    """A bare TypeError ("'int' object is not iterable") or a numpy shape error named no parameter."""
    s = _store()
    s.write_episode(0, "Alice likes tea.")
    a = s.write_semantic(1, "Alice drinks tea daily.", [])
    before = _snapshot(s)
    with pytest.raises(ValueError, match=field):
        call(s, a)
    assert _snapshot(s) == before


def test_good_id_lists_vectors_and_counts_still_work():
    s = _store()
    e = s.write_episode(0, "Alice likes tea.")
    sem = s.write_semantic(1, "Alice drinks tea daily.", (m for m in [e.memory_id]))  # any iterable
    assert sem.derived_from == [e.memory_id] and sem.evidence == [e.memory_id]
    assert s.recent_ids(np.int64(1)) == [sem.memory_id] and s.recent_ids(-1) == []
    ids, sims = s.similarities(s.embed("Alice likes tea."))
    assert ids == [e.memory_id, sem.memory_id] and sims[0] == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("value", ["no", None, 0, 1, "False"])
def test_dedup_config_value_aware_must_be_a_bool(value):
    """value_aware="no" was accepted (truthy: the guard stayed on) and None silently turned it off."""
    with pytest.raises(ValueError, match=r"dedup value_aware must be True or False, got "):
        DedupConfig(value_aware=value)
    assert DedupConfig(value_aware=False).value_aware is False and DedupConfig().value_aware is True


def test_a_namespace_view_refuses_writes_aimed_at_another_namespace():
    """view.write_episode / write_semantic dropped a namespace= kwarg silently and wrote into the
    view's namespace; the view's other methods refuse another namespace, so these do too."""
    s = _store()
    alice = s.namespace("alice")
    alice.write_episode(0, "Alice likes tea.")
    before = _snapshot(s)
    with pytest.raises(ValueError, match="namespace 'bob' given for a view of namespace 'alice'"):
        alice.write_episode(5, "Bob owns a boat.", namespace="bob")
    with pytest.raises(ValueError, match="namespace 'default' given for a view of namespace 'alice'"):
        alice.write_semantic(5, "Bob sails.", [], namespace="default")
    assert _snapshot(s) == before and s.namespaces() == ["alice"]
    assert alice.write_episode(5, "Carol owns a car.", namespace="alice").namespace == "alice"
    assert alice.write_semantic(6, "Carol drives.", [], namespace=None).namespace == "alice"


@pytest.mark.parametrize("term, token", [("long term", "['long', 'term']"), ("C++", "['c']"), ("it's", "['it']"),
                                         ("", "[]"), ("e-mail", "['e', 'mail']")])
def test_importance_key_terms_that_can_never_match_a_token_are_refused(term, token):
    """Key terms are compared with the text's tokens: "long term", "C++" or "it's" were accepted and
    never matched (the score of "the long term plan for C++" got no keyword bonus)."""
    with pytest.raises(ValueError, match=r"key_terms must be single words.*can never match: " + re.escape(f"{term!r} (-> {token})")):
        ImportanceScorer(key_terms=["memory", term])


def test_importance_key_terms_are_matched_as_the_tokens_they_are():
    import unicodedata

    sc = ImportanceScorer(key_terms=["Remember", unicodedata.normalize("NFD", "Café"), "don\u2019t", "3d"])
    assert sc.key_terms == {"remember", "café", "don't", "3d"}
    base = ImportanceScorer(key_terms=[])
    for text in ("Remember it.", "The café opens.", "I don't know.", "A 3d print."):
        assert sc.score(text) == pytest.approx(base.score(text) + 0.4)
    assert ImportanceScorer().key_terms == {t.lower() for t in SEED_KEY_TERMS}


def test_actr_of_names_a_bad_argument_and_an_id_that_is_not_live():
    """actr_of iterated a single id letter by letter (KeyError 'e') and raised a bare TypeError for 5."""
    from world.embedding import HashingEmbedder
    from world.memory import MemoryStore

    store = MemoryStore(embedder=HashingEmbedder(dim=64))
    mid = store.write_episode(0, "Alice moved to Lisbon.").memory_id
    with pytest.raises(ValueError, match="ids must be a list of memory ids, not a string"):
        store.actr_of(mid)
    for bad in (5, None):
        with pytest.raises(ValueError, match="ids must be a list of memory ids"):
            store.actr_of(bad)
    with pytest.raises(KeyError, match="'ep_999999' is no live memory"):
        store.actr_of([mid, "ep_999999"])
    assert list(store.actr_of([mid])) == [mid] and store.actr_of([mid])[mid].n == store.actr[mid].n


def test_activations_and_similarities_name_a_bad_ids_argument():
    """activations / similarities read a single id string as a list of one-letter ids (KeyError
    "unknown memory id 'e'"), and None or 5 were bare TypeErrors; actr_of refused them by name."""
    from world.embedding import HashingEmbedder
    from world.memory import MemoryStore

    store = MemoryStore(embedder=HashingEmbedder(dim=64))
    mid = store.write_episode(0, "Alice moved to Lisbon.").memory_id
    vec = store.embed("Lisbon")
    view = store.namespace("default")
    for owner in (store, view):
        calls = {"activations": owner.activations,
                 "similarities": lambda ids, owner=owner: owner.similarities(vec, ids)}
        for method, call in calls.items():
            with pytest.raises(ValueError, match=f"^{method}: ids must be a list of memory ids, not a string, "
                                                 f"got 'ep_000001'$"):
                call(mid)
            for bad in (5, None) if method == "activations" else (5,):
                with pytest.raises(ValueError, match=f"^{method}: ids must be a list of memory ids"):
                    call(bad)
            with pytest.raises(KeyError, match="ep_999999"):
                call([mid, "ep_999999"])
    with pytest.raises(ValueError, match=r"ids must hold memory ids \(strings\), got \['x'\]"):
        store.activations([mid, ["x"]])
    # lists, tuples and generators of ids answer as before
    assert store.activations(m for m in [mid]).tolist() == store.activations([mid]).tolist()
    assert store.similarities(vec, (mid,))[0] == [mid] == store.similarities(vec)[0]


@pytest.mark.parametrize("key", [42, ["42"], None, b"42", 4.0])
@pytest.mark.parametrize("method", ["versions", "explain", "value_at"])
def test_key_lookups_refuse_a_key_that_is_no_string_by_name(method, key):
    """erase(key=42) is refused by name; versions / explain / value_at answered "no record" for it
    (with a live key "42" in the store), and an unhashable key was a bare TypeError."""
    s = _store()
    s.write_episode(1, "Alice likes tea.", key="42")
    view = s.namespace("default")
    call = {"versions": lambda o: o.versions(key), "explain": lambda o: o.explain(key),
            "value_at": lambda o: o.value_at(key, 1)}[method]
    for owner in (s, view):
        with pytest.raises(ValueError, match=f"^{method}: key must be a string, got {re.escape(repr(key))}$"):
            call(owner)
    # a string key answers as before, a blank one included (an old file's chain may have one)
    assert [r.content for r in s.versions("42")] == ["Alice likes tea."] and s.versions(" ") == []
    assert s.value_at("42", 1).content == "Alice likes tea." and s.explain("43") == "43: no record"
