"""WorldConfig: validation errors name the key and the allowed range; presets; YAML round trip."""

from pathlib import Path

import pytest

from world import DIFFICULTIES, FAMILIES, WorldConfig
from world.config import DEFAULT_REWARDS, ConfigError, preset_names, write_preset_yamls

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_every_preset_is_valid(family, difficulty):
    cfg = WorldConfig.preset(family, difficulty)
    assert cfg.family == family and cfg.difficulty == difficulty
    assert (cfg.horizon is None) == (difficulty == "endless")
    assert cfg.n_candidates == 8
    assert set(cfg.rewards) == set(DEFAULT_REWARDS)


def test_easy_horizons_are_modest_and_difficulty_grows():
    for fam in FAMILIES:
        e, m, h = (WorldConfig.preset(fam, d) for d in ("easy", "medium", "hard"))
        assert 60 <= e.horizon <= 150
        assert e.horizon < m.horizon < h.horizon
        assert e.delay_max < m.delay_max < h.delay_max


@pytest.mark.parametrize(
    "overrides, needle",
    [
        ({"horizont": 10}, "horizont"),
        ({"capacity": 0}, "capacity"),
        ({"capacity": "40"}, "capacity"),
        ({"capacity": 4.5}, "capacity"),
        ({"top_k": True}, "top_k"),
        ({"embedder": "word2vec"}, "embedder"),
        ({"decay": 1.5}, "decay"),
        ({"family": "chess"}, "family"),
        ({"noise_ratio": -0.1}, "noise_ratio"),
        ({"rewards": {"correct": 1.0, "bonus": 2.0}}, "bonus"),
        ({"rewards": {"leaked": "a lot"}}, "rewards.leaked"),
        ({"mix": {"poetry": 1.0}}, "poetry"),
        ({"delay_min": 30, "delay_max": 10}, "delay_max"),
        ({"horizon": None}, "horizon"),
        ({"n_recent": 9}, "n_recent"),
    ],
)
def test_bad_values_raise_with_the_key_named(overrides, needle):
    with pytest.raises(ConfigError) as exc:
        WorldConfig.preset("recall", "easy").replace(**overrides)
    assert needle in str(exc.value)


def test_range_is_in_the_message():
    with pytest.raises(ConfigError, match=r"capacity: must be an integer in \[1, 100000\], got 0"):
        WorldConfig(capacity=0)
    with pytest.raises(ConfigError, match=r"embedder: must be one of \['hashing', 'minilm'\]"):
        WorldConfig(embedder="bert")


def test_replace_and_to_dict_round_trip():
    cfg = WorldConfig.preset("life", "medium")
    again = WorldConfig(**cfg.to_dict())
    assert again == cfg and hash(again) == hash(cfg)
    small = cfg.replace(capacity=7, rewards={"leaked": -5.0})
    assert small.capacity == 7 and small.rewards["leaked"] == -5.0
    assert small.rewards["correct"] == DEFAULT_REWARDS["correct"]  # missing reward keys keep defaults
    assert cfg.capacity != 7  # frozen: replace copies


def test_from_yaml_partial_uses_the_preset(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("family: erasure\ndifficulty: medium\ncapacity: 33\n")
    cfg = WorldConfig.from_yaml(p)
    assert cfg == WorldConfig.preset("erasure", "medium").replace(capacity=33)
    p.write_text("preset: multi_hop-hard\ntop_k: 7\n")
    assert WorldConfig.from_yaml(p) == WorldConfig.preset("multi_hop", "hard").replace(top_k=7)


def test_a_preset_and_a_family_that_name_two_worlds_are_refused(tmp_path):
    """``preset: life-medium`` with ``family: recall`` named two worlds; the family silently won."""
    p = tmp_path / "c.yaml"
    p.write_text("preset: life-medium\nfamily: recall\n")
    with pytest.raises(ConfigError, match=r"c.yaml.*family: 'recall' contradicts preset: 'life-medium'"):
        WorldConfig.from_yaml(p)
    with pytest.raises(ConfigError, match=r"difficulty: 'hard' contradicts preset: 'life-medium'"):
        WorldConfig.from_dict({"preset": "life-medium", "difficulty": "hard"})
    # the same values again are no contradiction
    assert WorldConfig.from_dict({"preset": "life-medium", "family": "life", "top_k": 4}) == \
        WorldConfig.preset("life", "medium").replace(top_k=4)
    for bad in ("life", "lifemedium", "recall-endless", 3):
        with pytest.raises(ConfigError, match=r"preset: expected FAMILY-DIFFICULTY, one of \['recall-easy'"):
            WorldConfig.from_dict({"preset": bad})


def test_python_m_world_reports_bad_input_as_an_argparse_error(tmp_path, capsys):
    """As docs/world.md says (it said "in one line"): argparse's usage line, then one error line."""
    from world.config import _main

    for argv, match in ((["--show", "foo"], "--show: expected FAMILY-DIFFICULTY, one of recall-easy"),
                        (["--show", "life"], "got 'life'"),
                        (["--write", str(tmp_path / "f")], "--write"),
                        # (nothing asked: it printed nothing and exited 0)
                        ([], "give --write DIR or --show FAMILY-DIFFICULTY"),
                        (["--write", ""], "--write: expected a folder, got an empty name"),
                        (["--show", ""], "--show: expected FAMILY-DIFFICULTY")):
        if argv[:1] == ["--write"] and argv[1]:
            (tmp_path / "f").write_text("a file, not a folder")
        with pytest.raises(SystemExit) as exc:
            _main(argv, prog="python -m world")
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert match in err and "Traceback" not in err
        usage, error = err.splitlines()
        assert usage.startswith("usage: python -m world [-h]") and error.startswith("python -m world: error: ")
    _main(["--show", "life-easy"])
    assert capsys.readouterr().out.startswith("family: life\ndifficulty: easy\n")


def test_a_configs_tables_cannot_be_changed_in_place():
    """cfg.rewards / cfg.mix were plain dicts: a NaN or unknown weight written into them went round every
    check (the env then paid NaN rewards) and changed the frozen config's hash."""
    import copy
    import pickle

    cfg = WorldConfig.preset("life", "easy")
    before = hash(cfg)
    for change in (lambda: cfg.rewards.__setitem__("storage", float("nan")), lambda: cfg.rewards.update(typo=5),
                   lambda: cfg.mix.pop("recall"), lambda: cfg.mix.clear(), lambda: cfg.rewards.setdefault("x", 1)):
        with pytest.raises(TypeError, match="frozen: its rewards and mix cannot be changed in place"):
            change()
    assert hash(cfg) == before and cfg == WorldConfig.preset("life", "easy")
    for twin in (pickle.loads(pickle.dumps(cfg)), copy.deepcopy(cfg), WorldConfig(**cfg.to_dict())):
        assert twin == cfg and hash(twin) == before
    loose = cfg.to_dict()["rewards"]  # (copies are plain dicts)
    loose["storage"] = 9.0
    assert type(loose) is dict and cfg.rewards["storage"] != 9.0


def test_tables_of_an_older_pickle_are_read_only_and_tables_dump_as_yaml_mappings():
    """A config pickled when rewards / mix were plain dicts loads with read-only tables (they stayed
    writable: NaN weights again); PyYAML's safe dumper, which represents exact dicts only, dumps the
    tables as mappings (a config logged with dataclasses.asdict raised RepresenterError)."""
    import dataclasses
    import pickle

    import yaml

    from world.config import FrozenTable

    cfg = WorldConfig.preset("life", "easy")
    old = WorldConfig.preset("life", "easy")
    object.__setattr__(old, "rewards", dict(old.rewards))  # (as an older release built it)
    object.__setattr__(old, "mix", dict(old.mix))
    back = pickle.loads(pickle.dumps(old))
    assert type(back.rewards) is FrozenTable and type(back.mix) is FrozenTable and back == cfg
    with pytest.raises(TypeError, match="frozen"):
        back.rewards["storage"] = float("nan")
    dumped = yaml.safe_load(yaml.safe_dump(dataclasses.asdict(cfg)))
    assert dumped["rewards"] == dict(cfg.rewards) and dumped["mix"] == dict(cfg.mix)
    assert yaml.safe_load(yaml.dump({"r": cfg.rewards})) == {"r": dict(cfg.rewards)}


def test_replace_with_some_reward_weights_keeps_the_others(tmp_path):
    """A partial rewards override changes the weights it names and keeps the config's others (they fell
    back to the defaults: a YAML file's weights vanished under one keyword override)."""
    import envs

    p = tmp_path / "w.yaml"
    p.write_text("preset: recall-easy\nrewards: {write: -0.1, storage: -0.005}\n")
    cfg = WorldConfig.from_yaml(p)
    both = cfg.replace(rewards={"correct": 2.0})
    assert (both.rewards["correct"], both.rewards["write"], both.rewards["storage"]) == (2.0, -0.1, -0.005)
    env = envs.MemoryEnv(config=str(p), rewards={"correct": 2.0})
    assert env.config.rewards == both.rewards
    with pytest.raises(ConfigError, match="rewards.storage: must be a number"):
        cfg.replace(rewards={"storage": float("inf")})


def test_from_yaml_errors_name_file_and_key(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("family: recall\ncapacty: 3\n")
    with pytest.raises(ConfigError, match="bad.yaml.*capacty"):
        WorldConfig.from_yaml(p)
    p.write_text("family: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        WorldConfig.from_yaml(p)
    with pytest.raises(ConfigError, match="no such config file"):
        WorldConfig.from_yaml(tmp_path / "missing.yaml")


def test_shipped_yamls_match_the_presets(tmp_path):
    shipped = ROOT / "configs" / "world"
    names = preset_names()
    assert "life-endless" in names and len(names) == len(FAMILIES) * 3 + 1
    for name in names:
        fam, _, diff = name.rpartition("-")
        assert WorldConfig.from_yaml(shipped / f"{name}.yaml") == WorldConfig.preset(fam, diff), name
    written = write_preset_yamls(tmp_path)
    for p in written:
        assert p.read_text() == (shipped / p.name).read_text()


def test_the_preset_command_runs_without_a_warning(tmp_path):
    """`python -m world.config --write DIR` printed a RuntimeWarning ('world.config' found in sys.modules):
    the documented command is now `python -m world`, which the package import does not run twice."""
    import subprocess
    import sys
    from pathlib import Path

    from world.config import WorldConfig

    root = str(Path(__file__).resolve().parents[1])
    run = subprocess.run([sys.executable, "-W", "error", "-m", "world", "--show", "life-easy", "--write", str(tmp_path)],
                         capture_output=True, text=True, cwd=root, check=True)
    assert run.stderr == ""
    assert WorldConfig.preset("life", "easy").to_yaml() in run.stdout
    assert (tmp_path / "life-easy.yaml").read_text().startswith("# memgym world preset life-easy (written by "
                                                                "`python -m world --write`)")


def test_nan_and_inf_are_refused_in_every_number_field():
    """A NaN passed every range check (`value < lo` is False for it): noise_ratio=nan ran a world without
    chit-chat, thread_rate=nan crashed later without naming the key."""
    import math

    from world.config import _SPECS

    floats = [name for name, spec in _SPECS.items() if float in spec.types]
    assert {"noise_ratio", "thread_rate", "decay", "forget_threshold", "level_up"} <= set(floats)
    base = WorldConfig.preset("life", "easy")
    for name in floats:
        for bad in (math.nan, math.inf, -math.inf):
            with pytest.raises(ConfigError, match=f"^{name}: must be"):
                base.replace(**{name: bad})


@pytest.mark.parametrize("family", [f for f in FAMILIES if f != "life"])
def test_only_life_mixes_families(family):
    """A mix on another family was accepted and used: gym.make("MemGym/Recall-Easy-v0",
    mix={"erasure": 1.0}) ran erasure threads under the name recall-easy. Refused now, naming mix and
    the allowed value; the family's own weight (or no mix) stays valid."""
    other = "erasure" if family != "erasure" else "recall"
    base = WorldConfig.preset(family, "easy")
    for mix in ({other: 1.0}, {family: 1.0, other: 0.5}, {family: 1.0, other: 0.0}):
        with pytest.raises(ConfigError, match=rf"mix: only the life family mixes families; {family} allows "
                                              rf"\{{'{family}': <weight>\}} or no mix, got "):
            base.replace(mix=mix)
        with pytest.raises(ConfigError, match="mix: only the life family"):
            WorldConfig.from_dict({"family": family, "mix": mix})
    assert base.mix == {family: 1.0}
    assert base.replace(mix={family: 3}).mix == {family: 3.0}
    assert base.replace(mix={}).mix == {}
    assert WorldConfig.preset("life", "easy").replace(mix={family: 1.0, other: 2.0}).mix == {family: 1.0, other: 2.0}


def test_to_dict_copies_the_tables():
    """config.py defined _plain twice, the second (without dict recursion) shadowing the first, so
    to_dict() returned the config's own rewards and mix: writing into the result changed the frozen
    config and its hash."""
    cfg = WorldConfig.preset("life", "easy")
    h = hash(cfg)
    d = cfg.to_dict()
    d["rewards"]["correct"] = 50.0
    d["mix"]["recall"] = 0.0
    assert cfg.rewards["correct"] == DEFAULT_REWARDS["correct"] and cfg.mix["recall"] == 1.0
    assert hash(cfg) == h and cfg == WorldConfig.preset("life", "easy")
    again = cfg.to_dict()
    assert again["rewards"] is not cfg.rewards and again["mix"] is not cfg.mix
    assert WorldConfig(**again) == cfg


def test_the_constructor_runs_the_preset_its_family_and_difficulty_name():
    """WorldConfig(family="temporal", difficulty="hard") ran a 100-event world with easy-like settings
    labelled temporal-hard, and WorldConfig() / World() said recall-easy but differed from that preset
    in 5 fields. A field not given is now the named preset's, as from_dict and a YAML file have it."""
    from world import World

    for family in FAMILIES:
        for difficulty in DIFFICULTIES:
            assert WorldConfig(family=family, difficulty=difficulty) == WorldConfig.preset(family, difficulty)
    assert WorldConfig() == WorldConfig.preset("recall", "easy") == World().config
    assert WorldConfig(family="life") == WorldConfig.preset("life", "easy")
    given = WorldConfig(family="erasure", difficulty="medium", capacity=33, top_k=7)
    assert given == WorldConfig.preset("erasure", "medium").replace(capacity=33, top_k=7)
    assert given == WorldConfig.from_dict({"family": "erasure", "difficulty": "medium", "capacity": 33, "top_k": 7})
    # a field given is kept as given and checked as before, also one the preset sets
    assert WorldConfig(family="temporal", difficulty="hard", horizon=100).horizon == 100
    with pytest.raises(ConfigError, match="mix: the life family draws its threads from mix, which is empty"):
        WorldConfig(family="life", mix={})
    with pytest.raises(ConfigError, match=r"^family: must be one of \['recall'"):
        WorldConfig(family="chess")
    with pytest.raises(ConfigError, match="horizon: null"):
        WorldConfig(difficulty="easy", horizon=None)


def test_equal_configs_hash_equal_whatever_the_number_spelling(tmp_path):
    """forget_threshold=-2 and -2.0 (a YAML file or --set gives an int) made configs that were == but
    hashed differently (the hash was of repr), so a set counted one world twice; to_yaml wrote -2."""
    base = WorldConfig.preset("recall", "easy")
    for name, as_int in (("forget_threshold", -2), ("noise_ratio", 1), ("thread_rate", 1), ("level_up", 0),
                         ("repeat_ratio", 0)):
        a, b = base.replace(**{name: as_int}), base.replace(**{name: float(as_int)})
        assert a == b and hash(a) == hash(b) and len({a, b}) == 1, name
        assert type(getattr(a, name)) is float and a.to_yaml() == b.to_yaml(), name
    # -0.0 == 0.0 too (their reprs differ)
    a, b = base.replace(noise_ratio=0.0, rewards={"abstained": 0.0}), base.replace(noise_ratio=-0.0,
                                                                               rewards={"abstained": -0.0})
    assert a == b and hash(a) == hash(b)
    p = tmp_path / "c.yaml"
    p.write_text("family: recall\nforget_threshold: -2\n")
    assert WorldConfig.from_yaml(p) == base.replace(forget_threshold=-2.0)
    assert hash(WorldConfig.from_yaml(p)) == hash(base.replace(forget_threshold=-2.0))
    assert "forget_threshold: -2.0\n" in WorldConfig.from_yaml(p).to_yaml()


def test_a_folder_or_a_binary_file_as_config_is_a_config_error_naming_the_file(tmp_path):
    """from_yaml turned only a missing file and bad YAML into ConfigError: a folder raised a raw
    IsADirectoryError and a Latin-1 or binary file a UnicodeDecodeError naming no file, through
    MemoryEnv(config=path) too (config="configs" is an easy slip for a file in it)."""
    import envs

    folder = tmp_path / "life.yaml"
    folder.mkdir()
    plain_folder = tmp_path / "configs"
    plain_folder.mkdir()
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("family: r\xe9call\n".encode("latin-1"))
    binary = tmp_path / "prog"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(128, 256)))
    cases = [(folder, "is a folder, not a config file; give a world YAML file"),
             (plain_folder, "is a folder, not a config file; give a world YAML file"),
             (latin, r"not UTF-8 text \(byte 0xe9 at position 9\); give a world YAML file"),
             (binary, r"not UTF-8 text \(byte 0x80 at position 8\); give a world YAML file"),
             (tmp_path / "latin.yaml" / "x.yaml", r"cannot be read \(Not a directory\)")]
    for path, message in cases:
        for load in (WorldConfig.from_yaml, lambda p: envs.MemoryEnv(config=str(p)),
                     lambda p: envs.MemoryEnv(config=p, preset="recall-easy")):
            with pytest.raises(ConfigError, match=rf"^{path}: {message}$"):
                load(path)


def test_a_key_given_twice_in_a_world_file_is_refused_naming_it(tmp_path):
    """PyYAML keeps the last value of a repeated key: a world file's second `capacity:` won without a word
    (the training recipes were already refused; both now read through world.yaml_keys)."""
    path = tmp_path / "w.yaml"
    path.write_text("preset: life-easy\ncapacity: 30\nrewards:\n  write: -0.1\n  write: -0.2\ncapacity: 50\n")
    with pytest.raises(ConfigError) as exc:
        WorldConfig.from_yaml(path)
    assert str(exc.value) == (f"{path}: key 'rewards.write' is given twice (lines 4 and 5); YAML keeps only the "
                              "last and drops the other without a word: remove one")
    path.write_text("preset: life-easy\ncapacity: 30\ncapacity: 50\n")
    with pytest.raises(ConfigError, match=r"key 'capacity' is given twice \(lines 2 and 3\)"):
        WorldConfig.from_yaml(path)
    path.write_text("base: &b {capacity: 30}\n")  # anchors and a single key each: fine
    with pytest.raises(ConfigError, match="base"):  # (an unknown key, not a duplicate)
        WorldConfig.from_yaml(path)


def test_number_fields_of_an_older_pickle_load_as_floats():
    """A config pickled before number fields were stored as floats kept an int (-2) after loading, and
    its to_yaml wrote `-2` where the same world built today writes `-2.0`."""
    import pickle

    cfg = WorldConfig.preset("recall", "easy").replace(forget_threshold=-2, noise_ratio=1)
    old = WorldConfig.preset("recall", "easy").replace(forget_threshold=-2, noise_ratio=1)
    object.__setattr__(old, "forget_threshold", -2)  # (as an older release kept it)
    object.__setattr__(old, "noise_ratio", 1)
    back = pickle.loads(pickle.dumps(old))
    assert type(back.forget_threshold) is float and type(back.noise_ratio) is float
    assert back.to_yaml() == cfg.to_yaml() and hash(back) == hash(cfg)
    assert type(back.horizon) is int and type(back.capacity) is int  # (integer fields stay integers)
