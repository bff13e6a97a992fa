"""Name pools, relations with their text templates, and per-seed entity generation.

People get real first names (gendered, for pronouns); places and organisations get invented
names built from syllables, so that no reader can answer from world knowledge and the pools are
large (tens of thousands of combinations): two seeds rarely share a story.
All draws go through the numpy ``Generator`` handed in by the world.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import chain, filterfalse
from operator import length_hint

import numpy as np

FEMALE = (
    "Alice Beatrice Clara Daphne Elena Fiona Greta Hannah Irene Julia Katrin Leona Mira Nadia Olivia "
    "Paula Quinn Rosa Sofia Tessa Ursula Vera Wanda Xenia Yara Zoe Amara Bianca Celia Delia Edith "
    "Freya Gemma Hilda Ines Jana Kira Lena Maren Nora Opal Petra Rhea Selma Thea Una Viola Willa "
    "Ada Bella Carmen Dora Elsa Flora Gina Helga Ida Joy Kaya Lotte Mina Nell Orla Pia Ruth Sara "
    "Tilde Uma Vivi Wren Yvette Zelda Agnes Bruna Cora Dina Esme Faye Gwen Hazel Isla June Kim Lara"
).split()
MALE = (
    "Aaron Boris Carl Dmitri Emil Felix Gustav Henrik Igor Jonas Karl Lukas Marco Nils Oscar Pavel "
    "Quentin Rafael Stefan Tomas Ulrich Victor Walter Xavier Yusuf Zeno Anton Bruno Cyril Dario "
    "Elias Fabian Georg Hugo Ivan Jasper Kasper Leon Milo Noah Otto Pedro Ravi Sven Theo Umar "
    "Vince Wim Abel Basil Cedric Dennis Edgar Finn Gideon Harold Isak Jules Kai Lars Magnus Nico "
    "Olaf Piet Roman Silas Tobias Uwe Vito Wolf Yann Ziggy Albert Benno Colin Dean Erik Frank Glen"
).split()
_PLACE_A = (
    "Var Oss Bel Kor Mar Tal Vel Dun Ash Bri Cal Dor Eld Fen Gal Hal Ist Jor Kel Lun Mor Nor Ost Pra "
    "Quel Ros Sal Tor Ul Ven Wyn Yor Zan Ard Bry Cor Del Erm Fal Gry"
).split()
_PLACE_B = (
    "holm dale mere wick ford haven stead bury port gate moor field crest vale burg ton ley wood "
    "brook cliff ridge stone bay well"
).split()
_ORG_A = (
    "Zen Lum Quor Vex Nova Cirr Dyn Ost Plex Tral Hel Mir Sol Kern Tek Vol Arc Bel Cor Fyr Gal Ion "
    "Jet Kyr Lyn Myr Nex Orb Pyr Qua"
).split()
_ORG_B = "ix ora eon ant ium ara olt ex yn os ica iva".split()
_ORG_C = (
    "Labs Systems Foods Logistics Analytics Robotics Media Textiles Energy Pharma Studios Works Bank "
    "Motors Software Insurance"
).split()
FOODS = (
    "pizza sushi ramen tacos curry paella lasagna falafel dumplings risotto goulash pho burritos "
    "gnocchi kebab pad-thai moussaka ravioli shakshuka bibimbap tagine pierogi gumbo laksa"
).split()
HOBBIES = (
    "climbing pottery chess sailing birdwatching fencing knitting archery gardening painting "
    "rowing juggling origami kayaking calligraphy beekeeping photography woodworking"
).split()
INSTRUMENTS = (
    "cello violin banjo trumpet flute harp oboe clarinet accordion ukulele saxophone drums piano "
    "mandolin bassoon trombone"
).split()
CARS = "Skoda Volvo Fiat Renault Subaru Mazda Peugeot Saab Lancia Opel Dacia Seat Tatra Kia".split()
COLOURS = "teal crimson ochre indigo amber olive violet coral navy saffron jade maroon".split()
DRINKS = "espresso chai matcha cocoa cider lemonade kefir kombucha oolong mate".split()
SPORTS = "tennis squash badminton volleyball handball rugby hockey cricket padel curling".split()
SNACKS = "pretzels almonds popcorn grapes crackers olives figs dates cashews biscuits".split()
SPOTS = "the harbour|the market|the park|the library|the bakery|the pier|the old mill|the square".split("|")
MONTHS = (
    "January February March April May June July August September October November December"
).split()
STREETS = "Elm Oak Birch Mill Quarry Harbour Station Church Cedar Willow Orchard Bridge".split()
DOCTORS = "Dr. Okafor|Dr. Lindqvist|Dr. Haddad|Dr. Moreau|Dr. Tanaka|Dr. Novak|Dr. Rossi|Dr. Brandt".split("|")


#: middle syllables that extend the place names when the plain ones run low (endless worlds)
_PLACE_MID = "en er an in el ar or is ov ing".split()


def _place(rng: np.random.Generator, used: int = 0) -> str:
    """A place name. With ``used`` names already taken, middle syllables are added as the pool runs
    low (as people get initials): 960 plain names, 9,600 with one middle syllable, 96,000 with two,
    ...; each tier is left while it is at most about half used, so that a fresh name takes a few draws."""
    k, cap = 0, len(_PLACE_A) * len(_PLACE_B) // 2
    while used > cap:
        k, cap = k + 1, cap * len(_PLACE_MID)
    if not k:  # (the usual case, without the join)
        return pick(rng, _PLACE_A) + pick(rng, _PLACE_B)
    return pick(rng, _PLACE_A) + "".join(pick(rng, _PLACE_MID) for _ in range(k)) + pick(rng, _PLACE_B)


_GENDER = {**{n: "f" for n in FEMALE}, **{n: "m" for n in MALE}}


def gender_of(name) -> str | None:
    """"f" / "m" from a person's first name ("Lena S." -> "f"); None for anything else."""
    return _GENDER.get(name.split(" ", 1)[0]) if isinstance(name, str) else None


def _org(rng: np.random.Generator, used: int = 0) -> str:
    """An organisation name; extra syllables as the pool runs low, as :func:`_place` (5,760 plain
    names, 69,120 with one more syllable, ...)."""
    k, cap = 0, len(_ORG_A) * len(_ORG_B) * len(_ORG_C) // 2
    while used > cap:
        k, cap = k + 1, cap * len(_ORG_B)
    if not k:  # (the usual case, without the join)
        return pick(rng, _ORG_A) + pick(rng, _ORG_B) + " " + pick(rng, _ORG_C)
    return pick(rng, _ORG_A) + "".join(pick(rng, _ORG_B) for _ in range(k + 1)) + " " + pick(rng, _ORG_C)


def randint(rng: np.random.Generator, lo: int, hi: int) -> int:
    """Uniform integer in [lo, hi) from one float draw (``rng.integers`` costs ~10x more per scalar)."""
    return lo + int(rng.random() * (hi - lo))


def pick(rng: np.random.Generator, seq):
    return seq[int(rng.random() * len(seq))]


class BlockDraws:
    """A numpy ``Generator`` whose ``random()`` floats are drawn in blocks: the same floats, in the same
    order, as the generator's own scalar calls, for a fraction of their cost (``Generator.random()``
    costs ~0.3 us a call and a script takes ~5 per event; here it is a C-level ``next`` over a block
    that ``random(64)`` drew at ~5 ns a float).

    Both give one float per 64-bit output of the bit generator (``next_double``), so a block of ``n``
    is the next ``n`` scalar draws. The generator runs ahead of the floats handed out; :meth:`settle` puts
    it where the scalar calls would have left it (the state before the first block is restored and
    exactly the floats handed out are drawn again). Every other draw (``integers``, ``choice``,
    ``permutation``, ...) settles first and is then the generator's own, so it and all that follows
    are what the plain generator gives. ``random()`` takes no argument here (a script draws scalars
    only). Settle before anything else reads or draws from the generator (see
    ``ScriptGenerator._buffered``)."""

    #: floats per block (a Life-Easy script draws ~490 floats, with ~3 other draws between them)
    BLOCK = 64

    __slots__ = ("gen", "random", "_run")

    def __init__(self, gen: np.random.Generator):
        self.gen = gen
        self._restart()

    def _restart(self) -> None:
        # _run: [the generator's state before the first block, floats drawn in blocks, the block being
        # handed out]; kept in a list that the block source shares, so that no cycle holds self
        run = self._run = [None, 0, iter(())]
        self.random = chain.from_iterable(_blocks(self.gen, run, self.BLOCK)).__next__

    def settle(self) -> None:
        """Leave the generator where the scalar ``random()`` calls so far would have left it."""
        start, drawn, block = self._run
        if start is None:  # nothing drawn since the last settle
            return
        gen = self.gen
        gen.bit_generator.state = start
        gen.random(drawn - length_hint(block))
        self._restart()

    def __getattr__(self, name: str):
        # any other Generator method: settled first, so that it draws what the plain generator would
        if name.startswith("_"):
            raise AttributeError(name)
        self.settle()
        return getattr(self.gen, name)


def _blocks(gen: np.random.Generator, run: list, size: int):
    """Blocks of ``size`` floats of ``gen`` (as iterators), for :class:`BlockDraws`: the state before the
    first one in ``run[0]``, the floats drawn so far in ``run[1]``, the newest block in ``run[2]``."""
    run[0] = gen.bit_generator.state
    while True:
        block = run[2] = iter(gen.random(size).tolist())
        run[1] += size
        yield block


# ---------------------------------------------------------------------- relations
@dataclass(frozen=True)
class Relation:
    """A relation with its object pool and text templates.

    Templates use ``{s}`` (subject), ``{o}`` (object), ``{p}`` (possessive pronoun of the subject).
    ``fact``: first statement; ``change``: a later change of value; ``ask``: current-value question;
    ``before``: value before the last change (the wording says "last": a value may have
    changed more than once); ``order``: which of ``{a}`` / ``{b}`` came first.
    ``subject_kind``: person | company | user.
    """

    name: str
    noun: str
    objects: str  # object pool name (see ObjectPools)
    fact: tuple[str, ...]
    ask: tuple[str, ...]
    change: tuple[str, ...] = ()
    before: tuple[str, ...] = ()
    order: tuple[str, ...] = ()
    subject_kind: str = "person"
    ref: tuple[str, ...] = ()  # referring forms for the *object* of this relation (multi-hop)


RELATIONS: dict[str, Relation] = {
    r.name: r
    for r in [
        Relation(
            "lives_in", "home town", "place",
            fact=("{s} lives in the town of {o}.", "{s}'s home town is {o}.", "{s} has a flat in the town of {o}."),
            change=("{s} moved to the town of {o}.", "{s}'s new home town is {o}.",
                    "{s} packed up and went to live in the town of {o}."),
            ask=("Which town does {s} live in?", "What is {s}'s home town?", "In which town is {s} living now?"),
            before=("Which town did {s} live in before the last move?", "What was {s}'s home town just before the last move?"),
            order=("Did {s} live in {a} or in {b} first?", "Which home town came first for {s}: {a} or {b}?"),
            ref=("That town", "The town"),
        ),
        Relation(
            "works_at", "job", "org",
            fact=("{s} has a job at {o}.", "{s}'s job is at {o}.", "{s} works at {o}, a good job."),
            change=("{s} got a new job at {o}.", "{s} quit and took a job at {o}.", "{s} has a new job at {o}."),
            ask=("Where is {s}'s job?", "Which company is {s}'s job at?", "Where does {s} have a job now?"),
            before=("Where was {s}'s job before the last change?", "Which company was {s}'s job at just before the last job change?"),
            order=("Was {s}'s job at {a} or at {b} first?", "Which job came first for {s}: {a} or {b}?"),
            ref=("That company", "The firm", "That employer"),
        ),
        Relation(
            "favourite_food", "favourite food", "food",
            fact=("{s}'s favourite food is {o}.", "{s} says {o} is the favourite food.", "The favourite food of {s} is {o}."),
            change=("{s}'s new favourite food is {o}.", "These days {s}'s favourite food is {o}.",
                    "{s} has a new favourite food: {o}."),
            ask=("What is {s}'s favourite food?", "Which food is {s}'s favourite now?", "What favourite food does {s} have?"),
            before=("What was {s}'s favourite food before the last change?",
                    "Which favourite food did {s} have just before the last change?"),
            order=("Was {s}'s favourite food {a} or {b} first?", "Which favourite food came first for {s}: {a} or {b}?"),
        ),
        Relation(
            "hobby", "hobby", "hobby",
            fact=("{s}'s hobby is {o}.", "{s} has {o} as a hobby.", "{s}'s weekend hobby is {o}."),
            change=("{s}'s new hobby is {o}.", "{s} dropped the old hobby for {o}.", "{s} took up {o} as a new hobby."),
            ask=("What is {s}'s hobby?", "Which hobby does {s} have now?", "What hobby is {s} into?"),
            before=("What was {s}'s hobby before the last change?", "Which hobby did {s} have just before the last new one?"),
            order=("Was {s}'s hobby {a} or {b} first?", "Which hobby came first for {s}: {a} or {b}?"),
        ),
        Relation(
            "instrument", "instrument", "instrument",
            fact=("{s}'s instrument is the {o}.", "{s} plays the {o}, a lovely instrument.", "The instrument {s} plays is the {o}."),
            change=("{s} switched instrument to the {o}.", "{s}'s new instrument is the {o}.",
                    "{s} sold the old instrument and plays the {o} now."),
            ask=("Which instrument does {s} play?", "What is {s}'s instrument?", "What instrument does {s} play now?"),
            before=("Which instrument did {s} play before the last switch?",
                    "What was {s}'s instrument just before the last switch?"),
            order=("Was {s}'s instrument the {a} or the {b} first?", "Which instrument came first for {s}: {a} or {b}?"),
        ),
        Relation(
            "car", "car", "car",
            fact=("{s}'s car is a {o}.", "{s} drives a {o}, a reliable car.", "The car {s} drives is a {o}."),
            change=("{s}'s new car is a {o}.", "{s} traded the old car for a {o}.", "{s} bought a {o} as a new car."),
            ask=("What car does {s} drive?", "What is {s}'s car?", "Which car does {s} have now?"),
            before=("What car did {s} drive before the last change of car?", "Which car did {s} have just before the last new one?"),
            order=("Was {s}'s car the {a} or the {b} first?", "Which car came first for {s}: {a} or {b}?"),
        ),
        Relation(
            "sibling", "sibling", "person",
            fact=("{s}'s sibling is {o}.", "{s} has a sibling called {o}.", "{o} is {s}'s sibling."),
            ask=("Who is {s}'s sibling?", "What is the name of {s}'s sibling?"),
            ref=("{p} sibling",),
        ),
        # company relations (multi-hop second hops)
        Relation(
            "based_in", "headquarters", "place",
            fact=("{s} is based in {o}.", "{s} has its headquarters in {o}."),
            ask=("Where is {s} based?",),
            subject_kind="company",
        ),
        Relation(
            "region", "region", "region",
            fact=("{s} lies in {o}.", "{s} is a town in {o}."),
            ask=("Which region is {s} in?",),
            subject_kind="place",
        ),
        # the user's own details (erasure)
        Relation("phone", "phone number", "phone",
                 fact=("My phone number is {o}.", "You can reach me on my phone number, {o}."),
                 ask=("What is my phone number?", "Which phone number can I be reached on?"), subject_kind="user"),
        Relation("email", "email address", "email",
                 fact=("My email address is {o}.", "Write to my email address, {o}."),
                 ask=("What is my email address?", "Which email address do I use?"), subject_kind="user"),
        Relation("address", "home address", "address",
                 fact=("My home address is {o}.", "My address is {o}, if you need to visit."),
                 ask=("What is my home address?", "What is my address?"), subject_kind="user"),
        Relation("birthday", "birthday", "birthday",
                 fact=("My birthday is on {o}.", "My birthday falls on {o}."),
                 ask=("When is my birthday?", "What day is my birthday?"), subject_kind="user"),
        Relation("plate", "licence plate", "plate",
                 fact=("My licence plate is {o}.", "My car's licence plate reads {o}."),
                 ask=("What is my licence plate?", "What does my licence plate read?"), subject_kind="user"),
        Relation("doctor", "doctor", "doctor",
                 fact=("My doctor is {o}.", "I see {o}, my doctor, for check-ups."),
                 ask=("Who is my doctor?", "Which doctor do I see?"), subject_kind="user"),
        Relation("locker", "locker code", "code",
                 fact=("My gym locker code is {o}.", "The code to my locker is {o}."),
                 ask=("What is my locker code?", "Which code opens my locker?"), subject_kind="user"),
    ]
}

#: Person attributes that can be stated, changed and asked.
PERSON_RELATIONS = ("lives_in", "works_at", "favourite_food", "hobby", "instrument", "car")
#: Relations whose value can change (update / temporal threads).
CHANGE_RELATIONS = PERSON_RELATIONS
USER_RELATIONS = ("phone", "email", "address", "birthday", "plate", "doctor", "locker")

#: Forget requests: about the user's own details ({n} = noun) and about another person's.
FORGET_REQUESTS = (
    "Please forget my {n}.",
    "I'd rather you didn't keep my {n}; delete it.",
    "Can you erase my {n} from your memory?",
)
FORGET_PERSON_REQUESTS = (
    "Please forget what I told you about {s}'s {n}.",
    "{s} asked me to have you delete {s}'s {n}.",
    "Erase {s}'s {n} from your memory, please.",
)


@dataclass(frozen=True)
class Habit:
    """A habit: episodes ``episode`` (with ``{s}``, ``{o}``, ``{w}`` = week number), asked as a rule."""

    name: str
    objects: str
    episode: tuple[str, ...]
    ask: str
    rule: str


HABITS: dict[str, Habit] = {
    h.name: h
    for h in [
        Habit("friday_dinner", "food",
              ("In week {w} {s} ordered {o} on Friday night.", "Friday of week {w}: {s} had {o} delivered.",
               "{s} picked up {o} for dinner last Friday (week {w}).", "Week {w}, Friday dinner for {s} was {o}."),
              "What does {s} usually order on Fridays?", "{s} usually orders {o} on Fridays."),
        Habit("morning_drink", "drink",
              ("On a Monday in week {w} {s} started the day with {o}.", "{s} drank {o} at breakfast in week {w}.",
               "Week {w}: {s} made {o} before work.", "{s} had {o} first thing this morning (week {w})."),
              "What does {s} usually drink in the morning?", "{s} usually drinks {o} in the morning."),
        Habit("sunday_sport", "sport",
              ("On Sunday of week {w} {s} played {o}.", "{s} spent Sunday in week {w} playing {o}.",
               "Week {w} Sunday: {s} went to play {o}.", "{s} joined a {o} match on Sunday, week {w}."),
              "What sport does {s} usually play on Sundays?", "{s} usually plays {o} on Sundays."),
        Habit("snack", "snack",
              ("In week {w} {s} snacked on {o} at the office.", "{s} brought {o} as a snack in week {w}.",
               "Week {w}: {s} munched {o} all afternoon.", "{s} shared some {o} during the break in week {w}."),
              "What does {s} usually snack on?", "{s} usually snacks on {o}."),
        Habit("walk_spot", "spot",
              ("In week {w} {s} went for a walk to {o}.", "{s} strolled down to {o} after lunch in week {w}.",
               "Week {w}: {s} took the dog to {o}.", "{s} wandered over to {o} on Saturday of week {w}."),
              "Where does {s} usually go for a walk?", "{s} usually walks to {o}."),
    ]
}

CHITCHAT = (
    "The weather is {weather} today.", "I watched a {genre} film last night.", "Traffic was {traffic} this morning.",
    "I think I need another coffee.", "Did you see the {genre} series everyone talks about?",
    "My neighbour's {pet} again.", "It's been a {mood} week, honestly.",
    "I might repaint the kitchen {colour}.", "The {animal} at the park was adorable.",
    "Let's talk about something else for a bit.", "I can't believe it's already {month}.",
    "I read a {mood} article about {topic} today.", "Remind me to buy {buy} later.",
    "The train was {traffic} again.", "I've been listening to a lot of {genre} podcasts.",
    "What a {mood} sunset that was.", "I should really clean my {clean}.",
)
_FILL = {
    "weather": "lovely gloomy rainy sunny windy grey mild chilly".split(),
    "traffic": "awful slow chaotic calm quiet packed late".split(),
    "mood": "strange hectic lovely odd quiet busy wonderful long".split(),
    "genre": "crime sci-fi comedy documentary horror cooking history nature".split(),
    "animal": "dog cat parrot goose hedgehog fox squirrel".split(),
    "pet": "dog kept barking|cat kept meowing|parrot kept squawking|goose kept honking|rooster kept crowing".split("|"),
    "colour": COLOURS,
    "month": MONTHS,
    "topic": "volcanoes bees tides typography trains fungi glaciers".split(),
    "buy": "batteries|bread|stamps|light bulbs|milk|a birthday card".split("|"),
    "clean": "desk|bike|shoes|windows|oven|car".split("|"),
}


#: template -> [("{key}", pool)] of the _FILL placeholders it holds, in _FILL order
_CHITCHAT_SLOTS: dict[str, list[tuple[str, list[str]]]] = {
    t: [("{" + k + "}", pool) for k, pool in _FILL.items() if "{" + k + "}" in t] for t in CHITCHAT
}

#: object pools that are fixed lists (the others are generated)
_FINITE: dict[str, tuple[str, ...]] = {
    "food": tuple(FOODS), "hobby": tuple(HOBBIES), "instrument": tuple(INSTRUMENTS), "car": tuple(CARS),
    "drink": tuple(DRINKS), "sport": tuple(SPORTS), "snack": tuple(SNACKS), "spot": tuple(SPOTS),
    "doctor": tuple(DOCTORS),
}


#: beginnings of words that take "a" although they start with a vowel letter ("a unicorn", "a ukulele",
#: "a one-off"); words with a silent "h" ("an hour") are not handled (none in the pools)
_A_BEFORE = ("uni", "use", "usu", "uti", "uku", "ura", "uri", "ubi", "eu", "one", "once")
_ARTICLE_RE = re.compile(r"\b([Aa]) ([A-Za-z][\w-]*)")
#: what every "a" that must become "an" looks like ("a" + space + a vowel letter): a text without it is
#: left as it is by _ARTICLE_RE's substitution, which is skipped then (it costs ~3x this search)
_MAYBE_AN_RE = re.compile(r"[Aa] [AEIOUaeiou]")
_INITIAL_END_RE = re.compile(r"(\b[A-Z]\.)\.")


def article(word: str) -> str:
    """"a" or "an" for ``word``, from its first letter: a vowel letter takes "an", except the few
    words whose vowel letter sounds like a consonant ("a unicorn")."""
    w = word.lower()
    return "an" if w[:1] in ("a", "e", "i", "o", "u") and not w.startswith(_A_BEFORE) else "a"


#: tidy's answers for the texts it saw last: a script's text is tidied when it is rendered and again when
#: it is placed, and chit-chat recurs across episodes. Only the world's own rendered texts come here
#: (as to the shared perception cache), never a memory's; emptied when full, so bounded.
_TIDIED: dict[str, str] = {}
_TIDIED_MAX = 4096


def tidy(text: str) -> str:
    """A rendered template's text with "a" / "an" chosen from the next word ("an Opel", "an odd
    week") and no double period after a name's initial at the end of a sentence ("Lena S.")."""
    done = _TIDIED.get(text)
    if done is not None:
        return done
    out = text
    if _MAYBE_AN_RE.search(out):
        out = _ARTICLE_RE.sub(lambda m: m.group(1) + ("n" if article(m.group(2)) == "an" else "") + " " + m.group(2),
                              out)
    if ".." in out:
        out = _INITIAL_END_RE.sub(r"\1", out)
    if len(_TIDIED) >= _TIDIED_MAX:
        _TIDIED.clear()
    _TIDIED[text] = out
    return out


def chitchat(rng: np.random.Generator) -> str:
    t = pick(rng, CHITCHAT)
    # the placeholders of this template in _FILL order (as a scan of every _FILL key would find them)
    for token, pool in _CHITCHAT_SLOTS[t]:
        if token in t:  # (a filled value could contain a later placeholder: keep the check)
            t = t.replace(token, pick(rng, pool))
    return tidy(t)


# ---------------------------------------------------------------------- the cast of one episode
@dataclass
class Cast:
    """Entities of one episode, drawn lazily from the pools (endless worlds keep drawing)."""

    rng: np.random.Generator
    people: list[str] = field(default_factory=list)
    used_names: set[str] = field(default_factory=set)
    used_objects: dict[str, set[str]] = field(default_factory=dict)

    def new_person(self, female: bool | None = None) -> str:
        """A new person with a name not used before (of the given gender when ``female`` is set)."""
        want = female
        for _ in range(200):
            female = self.rng.random() < 0.5 if want is None else want
            name = pick(self.rng, FEMALE if female else MALE)
            n = len(self.used_names)
            if n > 120:  # endless worlds: surname-like initials, more of them as the cast grows
                # (one initial gives ~4,200 names, two ~110,000, three ~2.9 million: each tier is
                # left while it is at most about half used, so a fresh name takes a few draws)
                k = 1 if n <= 2_000 else 2 if n <= 50_000 else 3 if n <= 1_000_000 else 4
                name += "".join(f" {chr(ord('A') + randint(self.rng, 0, 26))}." for _ in range(k))
            if name not in self.used_names:
                self.used_names.add(name)
                self.people.append(name)
                return name
        raise RuntimeError("name pools exhausted")

    def possessive(self, person: str) -> str:
        return "her" if gender_of(person) == "f" else "his"  # (the first name tells it)

    def person(self, exclude: set[str] | None = None) -> str:
        """An existing person of the episode (not in ``exclude``), or a new one."""
        pool = [p for p in self.people if p not in exclude] if exclude else self.people
        if not pool:
            return self.new_person()
        return pick(self.rng, pool)

    def value(self, pool: str, exclude: set[str] | None = None) -> str:
        """A fresh object value from ``pool``; values of a pool are not reused within an episode
        when avoidable (so that a value identifies its fact)."""
        used = self.used_objects.setdefault(pool, set())
        finite = _FINITE.get(pool)
        if finite is not None:
            # (filterfalse with the sets' own membership test: the same list as a comprehension, faster)
            fresh = list(filterfalse(used.__contains__, finite))
            if exclude:
                fresh = list(filterfalse(exclude.__contains__, fresh))
            if not fresh:
                fresh = [v for v in finite if not exclude or v not in exclude]
            v = pick(self.rng, fresh)
            used.add(v)
            return v
        for _ in range(60):
            v = self._draw(pool)
            if v not in used and (not exclude or v not in exclude):
                used.add(v)
                return v
        v = self._draw(pool)
        while exclude and v in exclude:
            v = self._draw(pool)
        return v

    def _draw(self, pool: str) -> str:
        r = self.rng
        if pool == "place":
            taken = len(self.used_objects.get("place", ()))
            name = _place(r, taken)
            # nor is a town named after a region drawn before it ("The town is in the Rosbrook valley."
            # then "Dean's home town is Rosbrook."): redrawn, so only such a collision changes the draws
            stems = self.__dict__.get("_region_stems")
            if stems:
                for _ in range(50):
                    if name not in stems:
                        break
                    name = _place(r, taken + len(stems))
            return name
        if pool == "org":
            return _org(r, len(self.used_objects.get("org", ())))
        if pool == "region":
            towns = self.used_objects.get("place", ())
            # stems taken: by regions (5 endings per place name) and by towns, which a region is never
            # named after ("That town lies in the Ossford province." would name the town a multi-hop
            # reference must only refer to); a stem that is a town's name is drawn again
            taken = len(self.used_objects.get("region", ())) // 5 + len(towns)
            stem = _place(r, taken)
            for _ in range(50):
                if stem not in towns:
                    break
                stem = _place(r, taken)
            self.__dict__.setdefault("_region_stems", set()).add(stem)  # (towns drawn later avoid it)
            return "the " + stem + " " + pick(r, ("valley", "coast", "highlands", "lowlands", "province"))
        if pool == "person":
            return self.new_person()
        if pool == "phone":
            return f"555-{randint(r, 1000, 10000):04d}"
        if pool == "email":
            return f"{pick(r, FEMALE + MALE).lower()}.{pick(r, _ORG_A).lower()}{randint(r, 10, 100)}@mailbox.test"
        if pool == "address":
            return f"{randint(r, 1, 200)} {pick(r, STREETS)} Street"
        if pool == "birthday":
            return f"{randint(r, 1, 29)} {pick(r, MONTHS)}"
        if pool == "plate":
            letters = "".join(chr(ord("A") + randint(r, 0, 26)) for _ in range(3))
            return f"{letters}-{randint(r, 100, 1000)}"
        if pool == "doctor":
            return pick(r, DOCTORS)
        if pool == "code":
            return f"{randint(r, 0, 10000):04d}"
        if pool not in _FINITE:
            raise KeyError(f"unknown object pool {pool!r}")
        return pick(r, _FINITE[pool])
