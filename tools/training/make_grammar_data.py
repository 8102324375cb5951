#!/usr/bin/env python3
"""Generates ordo's toy English->German parallel corpus from a small grammar.

Every sentence is subject - verb - object, and word order carries the meaning:
"cats chase dogs" and "dogs chase cats" contain the same words but translate to
"Katzen jagen Hunde" and "Hunde jagen Katzen". A Transformer without positional
information cannot tell the two apart; that is what ordo's shipped models show.

    /usr/bin/python3 tools/training/make_grammar_data.py                 # weights/data/*.tsv
    /usr/bin/python3 tools/training/make_grammar_data.py --seed 7 --out /tmp/data

Grammar
    S        -> NP_subject VERB NP_object
    NP       -> SIMPLE | SIMPLE "and" SIMPLE [... "and" SIMPLE, long split only]
    SIMPLE   -> DET? ADJ{0,2} NOUN      (a singular noun always has a determiner)
    DET      -> "the" | "a"/"an" (singular only) | nothing (plural only)

The German side is inflected properly: nominative subject, accusative object,
der/die/das and ein/eine with weak, mixed and strong adjective endings, and a verb
that agrees with its subject (a coordinated subject is plural).

Output: TSV files `english<TAB>german` (UTF-8, no header, one pair per line):
    train.tsv    unique sentences, at most MAX_WORDS English words
    test.tsv     held out: same distribution, no sentence of train
    swapped.tsv  pairs of lines: a sentence, then the same sentence with subject and
                 object swapped; both are lowercase, with the same final period and the
                 same words, so only word order tells them apart
    long.tsv     a subject and/or object of 3 or 4 conjuncts, more than any training
                 sentence has (length extrapolation)

Sentences are compared after normalization (lowercase, final period removed), so a
held-out sentence is never a mere re-capitalization of a training sentence.
The output is a pure function of the arguments: all randomness comes from one
random.Random(seed), and nothing iterates over sets or dicts in hash order.
"""

import argparse
import random
import sys
from dataclasses import dataclass
from pathlib import Path

# --------------------------------------------------------------------------------------
# Lexicon
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Noun:
    en_sg: str
    en_pl: str
    de_sg: str
    de_pl: str
    gender: str  # "m", "f" or "n"
    person: bool = False  # people get no colour adjectives ("the white women" reads badly)


@dataclass(frozen=True)
class Verb:
    en_pl: str   # English base form: "they chase"
    en_3sg: str  # "it chases"
    de_3sg: str  # "es jagt"
    de_3pl: str  # "sie jagen"


@dataclass(frozen=True)
class Adjective:
    en: str
    de: str     # German stem; the inflectional ending is appended to it
    order: int  # position class; stacked adjectives appear in increasing class order


# None of these masculine nouns is a weak noun (no "den Bären"-type accusative -n),
# so the accusative noun form always equals the nominative one.
NOUNS = [
    Noun("cat", "cats", "Katze", "Katzen", "f"),
    Noun("dog", "dogs", "Hund", "Hunde", "m"),
    Noun("mouse", "mice", "Maus", "Mäuse", "f"),
    Noun("bird", "birds", "Vogel", "Vögel", "m"),
    Noun("horse", "horses", "Pferd", "Pferde", "n"),
    Noun("fox", "foxes", "Fuchs", "Füchse", "m"),
    Noun("child", "children", "Kind", "Kinder", "n", person=True),
    Noun("teacher", "teachers", "Lehrer", "Lehrer", "m", person=True),
    Noun("woman", "women", "Frau", "Frauen", "f", person=True),
    Noun("man", "men", "Mann", "Männer", "m", person=True),
    Noun("cow", "cows", "Kuh", "Kühe", "f"),
    Noun("wolf", "wolves", "Wolf", "Wölfe", "m"),
    Noun("duck", "ducks", "Ente", "Enten", "f"),
    Noun("frog", "frogs", "Frosch", "Frösche", "m"),
]

VERBS = [
    Verb("chase", "chases", "jagt", "jagen"),
    Verb("see", "sees", "sieht", "sehen"),
    Verb("like", "likes", "mag", "mögen"),
    Verb("catch", "catches", "fängt", "fangen"),
    Verb("bite", "bites", "beißt", "beißen"),
    Verb("love", "loves", "liebt", "lieben"),
    Verb("hear", "hears", "hört", "hören"),
    Verb("find", "finds", "findet", "finden"),
    Verb("feed", "feeds", "füttert", "füttern"),
    Verb("watch", "watches", "beobachtet", "beobachten"),
    Verb("greet", "greets", "grüßt", "grüßen"),
]

# Adjective order classes, following the usual English order (which German shares):
# size, then quality, then age, then colour: "the big lazy dog", "a hungry old wolf",
# "a small brown bird". Two adjectives of one class are never stacked ("big small",
# "black white").
SIZE, QUALITY, AGE, COLOUR = range(4)

ADJECTIVES = [
    Adjective("big", "groß", SIZE),
    Adjective("small", "klein", SIZE),
    Adjective("hungry", "hungrig", QUALITY),
    Adjective("lazy", "faul", QUALITY),
    Adjective("clever", "klug", QUALITY),
    Adjective("old", "alt", AGE),
    Adjective("young", "jung", AGE),
    Adjective("black", "schwarz", COLOUR),
    Adjective("white", "weiß", COLOUR),
    Adjective("brown", "braun", COLOUR),
]

# --------------------------------------------------------------------------------------
# German inflection tables, keyed by (case, gender), where the "gender" of any plural
# noun phrase is "pl". Only nominative ("nom") and accusative ("acc") occur.
# --------------------------------------------------------------------------------------

DEFINITE_ARTICLE = {
    ("nom", "m"): "der", ("nom", "f"): "die", ("nom", "n"): "das", ("nom", "pl"): "die",
    ("acc", "m"): "den", ("acc", "f"): "die", ("acc", "n"): "das", ("acc", "pl"): "die",
}

INDEFINITE_ARTICLE = {  # singular only
    ("nom", "m"): "ein", ("nom", "f"): "eine", ("nom", "n"): "ein",
    ("acc", "m"): "einen", ("acc", "f"): "eine", ("acc", "n"): "ein",
}

# Weak endings, after der/die/das: der große Hund, den großen Hund, die großen Katzen.
WEAK_ENDING = {
    ("nom", "m"): "e", ("nom", "f"): "e", ("nom", "n"): "e", ("nom", "pl"): "en",
    ("acc", "m"): "en", ("acc", "f"): "e", ("acc", "n"): "e", ("acc", "pl"): "en",
}

# Mixed endings, after ein/eine: ein großer Hund, einen großen Hund, ein großes Pferd.
MIXED_ENDING = {
    ("nom", "m"): "er", ("nom", "f"): "e", ("nom", "n"): "es",
    ("acc", "m"): "en", ("acc", "f"): "e", ("acc", "n"): "es",
}

# Strong endings, without a determiner; only bare plurals occur: große Hunde.
STRONG_ENDING = {("nom", "pl"): "e", ("acc", "pl"): "e"}

# --------------------------------------------------------------------------------------
# Sentence structure
# --------------------------------------------------------------------------------------

THE, A = "the", "a"  # determiners; None means no determiner (bare plural)

MAX_WORDS = 16  # longest English sentence in train, test and swapped
TRAIN_MAX_CONJUNCTS = 2  # longest coordination in train, test and swapped


@dataclass(frozen=True)
class SimpleNP:
    noun: int             # index into NOUNS
    plural: bool
    det: object           # THE, A or None
    adjectives: tuple     # indices into ADJECTIVES, in order class order


@dataclass(frozen=True)
class Sentence:
    subject: tuple        # one or more SimpleNP conjuncts
    verb: int             # index into VERBS
    object: tuple         # one or more SimpleNP conjuncts


@dataclass(frozen=True)
class Style:
    capitalized: bool     # English first letter upper case (German always is)
    period: bool          # final period, in both languages


def is_plural(np):
    """A noun phrase is plural if its noun is, or if it coordinates several conjuncts."""
    return len(np) > 1 or np[0].plural


# --------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------


def english_simple_np(np):
    noun = NOUNS[np.noun]
    words = [ADJECTIVES[a].en for a in np.adjectives]
    words.append(noun.en_pl if np.plural else noun.en_sg)
    if np.det == THE:
        words.insert(0, "the")
    elif np.det == A:
        words.insert(0, "an" if words[0][0] in "aeiou" else "a")  # "an old dog"
    return words


def german_simple_np(np, case):
    noun = NOUNS[np.noun]
    key = (case, "pl" if np.plural else noun.gender)
    if np.det == THE:
        words, endings = [DEFINITE_ARTICLE[key]], WEAK_ENDING
    elif np.det == A:
        words, endings = [INDEFINITE_ARTICLE[key]], MIXED_ENDING
    else:
        words, endings = [], STRONG_ENDING
    words += [ADJECTIVES[a].de + endings[key] for a in np.adjectives]
    words.append(noun.de_pl if np.plural else noun.de_sg)
    return words


def join_conjuncts(parts, conjunction):
    words = list(parts[0])
    for part in parts[1:]:
        words.append(conjunction)
        words += part
    return words


def english_words(sentence):
    verb = VERBS[sentence.verb]
    return (join_conjuncts([english_simple_np(np) for np in sentence.subject], "and")
            + [verb.en_pl if is_plural(sentence.subject) else verb.en_3sg]
            + join_conjuncts([english_simple_np(np) for np in sentence.object], "and"))


def german_words(sentence):
    verb = VERBS[sentence.verb]
    return (join_conjuncts([german_simple_np(np, "nom") for np in sentence.subject], "und")
            + [verb.de_3pl if is_plural(sentence.subject) else verb.de_3sg]
            + join_conjuncts([german_simple_np(np, "acc") for np in sentence.object], "und"))


def upper_first(text):
    return text[:1].upper() + text[1:]


def render_english(sentence, style):
    text = " ".join(english_words(sentence))
    if style.capitalized:
        text = upper_first(text)
    return text + "." if style.period else text


def render_german(sentence, style):
    text = upper_first(" ".join(german_words(sentence)))  # nouns are already capitalized
    return text + "." if style.period else text


def normalize(english):
    """The form under which splits are compared: lowercase, without the final period."""
    return english.lower().rstrip(".")


# --------------------------------------------------------------------------------------
# Parsing English back into a Sentence (used by the tests, and to translate by hand)
# --------------------------------------------------------------------------------------

_NOUN_FORMS = {}
for _i, _n in enumerate(NOUNS):
    _NOUN_FORMS[_n.en_sg] = (_i, False)
    _NOUN_FORMS[_n.en_pl] = (_i, True)
_VERB_FORMS = {}
for _i, _v in enumerate(VERBS):
    _VERB_FORMS[_v.en_pl] = (_i, True)
    _VERB_FORMS[_v.en_3sg] = (_i, False)
_ADJECTIVE_FORMS = {a.en: i for i, a in enumerate(ADJECTIVES)}


def _parse_simple_np(words):
    if not words or words[-1] not in _NOUN_FORMS:
        raise ValueError(f"noun phrase must end in a noun: {' '.join(words)!r}")
    noun, plural = _NOUN_FORMS[words[-1]]
    det, rest = None, words[:-1]
    if rest and rest[0] in ("the", "a", "an"):
        det, rest = (THE if rest[0] == "the" else A), rest[1:]
    if any(w not in _ADJECTIVE_FORMS for w in rest):
        raise ValueError(f"not a noun phrase: {' '.join(words)!r}")
    np = SimpleNP(noun, plural, det, tuple(_ADJECTIVE_FORMS[w] for w in rest))
    if det == A and plural:
        raise ValueError(f"'a' with a plural noun: {' '.join(words)!r}")
    if det is None and not plural:
        raise ValueError(f"singular noun without a determiner: {' '.join(words)!r}")
    if english_simple_np(np) != words:
        raise ValueError(f"'a'/'an' mismatch: {' '.join(words)!r}")
    return np


def _parse_np(words):
    conjuncts, current = [], []
    for word in words + ["and"]:
        if word == "and":
            conjuncts.append(_parse_simple_np(current))
            current = []
        else:
            current.append(word)
    return tuple(conjuncts)


def parse(english):
    """Parses a sentence of the grammar into (Sentence, Style); ValueError if it is not one."""
    period = english.endswith(".")
    body = english[:-1] if period else english
    words = body.lower().split()
    verbs = [i for i, w in enumerate(words) if w in _VERB_FORMS]
    if len(verbs) != 1:
        raise ValueError(f"expected exactly one verb: {english!r}")
    at = verbs[0]
    sentence = Sentence(_parse_np(words[:at]), _VERB_FORMS[words[at]][0], _parse_np(words[at + 1:]))
    if _VERB_FORMS[words[at]][1] != is_plural(sentence.subject):
        raise ValueError(f"verb does not agree with its subject: {english!r}")
    return sentence, Style(capitalized=body[:1].isupper(), period=period)


def translate(english):
    """The German translation of any English sentence of the grammar."""
    sentence, style = parse(english)
    return render_german(sentence, style)


# --------------------------------------------------------------------------------------
# Sampling
# --------------------------------------------------------------------------------------


def sample_adjectives(rng, count, person):
    """`count` adjectives of distinct order classes, in order; no colour for people."""
    allowed = [i for i, a in enumerate(ADJECTIVES) if not (person and a.order == COLOUR)]
    while True:
        chosen = rng.sample(allowed, count)
        if len({ADJECTIVES[a].order for a in chosen}) == count:
            return tuple(sorted(chosen, key=lambda a: ADJECTIVES[a].order))


def sample_simple_np(rng):
    noun = rng.randrange(len(NOUNS))
    plural = rng.random() < 0.4
    det = rng.choice([THE, None]) if plural else rng.choice([THE, A])
    count = rng.choices([0, 1, 2], weights=[6, 3, 1])[0]
    return SimpleNP(noun, plural, det, sample_adjectives(rng, count, NOUNS[noun].person))


def sample_np(rng, conjuncts):
    """A noun phrase of `conjuncts` simple noun phrases joined by "and"; no two of them
    share noun and adjectives ("the big dog and the small dog", but not "a dog and the
    dog" or "the cat and cats")."""
    while True:
        np = tuple(sample_simple_np(rng) for _ in range(conjuncts))
        if len({(simple.noun, simple.adjectives) for simple in np}) == conjuncts:
            return np


def sample_train_np(rng):
    """The training distribution: mostly simple, one in five a coordination of two."""
    return sample_np(rng, TRAIN_MAX_CONJUNCTS if rng.random() < 0.2 else 1)


def sample_train_sentence(rng):
    while True:
        sentence = Sentence(sample_train_np(rng), rng.randrange(len(VERBS)), sample_train_np(rng))
        if sentence.subject != sentence.object and len(english_words(sentence)) <= MAX_WORDS:
            return sentence


def sample_long_sentence(rng):
    """Like training, but the subject, the object or both have 3 or 4 conjuncts."""
    def long_np():
        return sample_np(rng, rng.choice([TRAIN_MAX_CONJUNCTS + 1, TRAIN_MAX_CONJUNCTS + 2]))

    where = rng.choices(["subject", "object", "both"], weights=[2, 2, 1])[0]
    subject = long_np() if where != "object" else sample_train_np(rng)
    obj = long_np() if where != "subject" else sample_train_np(rng)
    return Sentence(subject, rng.randrange(len(VERBS)), obj)


def sample_style(rng):
    return Style(capitalized=rng.random() < 0.5, period=rng.random() < 0.5)


def sample_swapped_pair(rng):
    """A sentence and its subject/object swap, both with the same English verb form."""
    while True:
        sentence = sample_train_sentence(rng)
        if is_plural(sentence.subject) == is_plural(sentence.object):
            swapped = Sentence(sentence.object, sentence.verb, sentence.subject)
            return sentence, swapped


# --------------------------------------------------------------------------------------
# Splits
# --------------------------------------------------------------------------------------


def _attempts(size):
    return 100 * size + 10000  # generous; running out means the grammar is too small


def make_split(rng, size, sample_sentence, seen):
    """`size` (english, german) pairs of new sentences; their normalized forms join `seen`."""
    pairs, sentences = [], []
    for _ in range(_attempts(size)):
        if len(pairs) == size:
            break
        sentence, style = sample_sentence(rng), sample_style(rng)
        english = render_english(sentence, style)
        if normalize(english) in seen:
            continue
        seen.add(normalize(english))
        pairs.append((english, render_german(sentence, style)))
        sentences.append((sentence, style))
    if len(pairs) < size:
        raise RuntimeError(f"could only find {len(pairs)} of {size} new sentences")
    return pairs, sentences


def make_swapped_split(rng, pair_count, seen):
    """2 * pair_count lines: each sentence immediately followed by its swap."""
    pairs = []
    for _ in range(_attempts(pair_count)):
        if len(pairs) == 2 * pair_count:
            break
        sentence, swapped = sample_swapped_pair(rng)
        style = Style(capitalized=False, period=rng.random() < 0.5)
        a, b = render_english(sentence, style), render_english(swapped, style)
        if a == b or normalize(a) in seen or normalize(b) in seen:
            continue
        seen.update((normalize(a), normalize(b)))
        pairs.append((a, render_german(sentence, style)))
        pairs.append((b, render_german(swapped, style)))
    if len(pairs) < 2 * pair_count:
        raise RuntimeError(f"could only find {len(pairs) // 2} of {pair_count} swapped pairs")
    return pairs


def coverage_features(sentences):
    """What a split exercises: every word, determiner, number, case/gender/determiner
    combination, coordination position and spelling variant."""
    features = set()
    for sentence, style in sentences:
        features.add(f"verb:{VERBS[sentence.verb].en_pl}")
        features.add(f"capitalized:{style.capitalized}")
        features.add(f"period:{style.period}")
        for position, case, np in (("subject", "nom", sentence.subject),
                                   ("object", "acc", sentence.object)):
            if len(np) > 1:
                features.add(f"coordination:{position}")
            for simple in np:
                noun = NOUNS[simple.noun]
                gender = "pl" if simple.plural else noun.gender
                features.add(f"noun:{noun.en_sg}:{'pl' if simple.plural else 'sg'}")
                features.add(f"det:{simple.det}")
                features.add(f"declension:{case}:{gender}:{simple.det}:{bool(simple.adjectives)}")
                features.update(f"adjective:{ADJECTIVES[a].en}" for a in simple.adjectives)
    return features


def required_features():
    """The features every training set must show."""
    features = {f"verb:{v.en_pl}" for v in VERBS}
    features |= {f"adjective:{a.en}" for a in ADJECTIVES}
    features |= {f"noun:{n.en_sg}:{num}" for n in NOUNS for num in ("sg", "pl")}
    features |= {f"det:{d}" for d in (THE, A, None)}
    features |= {"coordination:subject", "coordination:object"}
    features |= {f"{k}:{v}" for k in ("capitalized", "period") for v in (True, False)}
    for case in ("nom", "acc"):
        for adjectives in (False, True):
            for gender in ("m", "f", "n"):
                for det in (THE, A):
                    features.add(f"declension:{case}:{gender}:{det}:{adjectives}")
            for det in (THE, None):
                features.add(f"declension:{case}:pl:{det}:{adjectives}")
    return features


def generate_corpus(seed=1234, train_size=45000, test_size=2000, swapped_pairs=1000,
                    long_size=1000):
    """All four splits as lists of (english, german) pairs, a pure function of the arguments."""
    rng = random.Random(seed)
    seen = set()  # normalized English of every sentence emitted so far, in any split
    train, train_sentences = make_split(rng, train_size, sample_train_sentence, seen)
    if train_size >= 10000:  # a tiny corpus may legitimately miss a rare combination
        missing = required_features() - coverage_features(train_sentences)
        if missing:
            raise RuntimeError(f"training data misses {sorted(map(str, missing))}")
    test, _ = make_split(rng, test_size, sample_train_sentence, seen)
    swapped = make_swapped_split(rng, swapped_pairs, seen)
    long, _ = make_split(rng, long_size, sample_long_sentence, seen)
    return {"train": train, "test": test, "swapped": swapped, "long": long}


def write_tsv(path, pairs):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for english, german in pairs:
            f.write(f"{english}\t{german}\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1234, help="random seed (default 1234)")
    parser.add_argument("--out", type=Path, default=Path("weights/data"), help="output directory")
    parser.add_argument("--train-size", type=int, default=45000,
                        help="training sentences (default 45000: about 3.5 MB)")
    parser.add_argument("--test-size", type=int, default=2000, help="held-out test sentences")
    parser.add_argument("--swapped-pairs", type=int, default=1000,
                        help="sentence/swapped-sentence pairs (twice as many lines)")
    parser.add_argument("--long-size", type=int, default=1000,
                        help="sentences with 3-4 coordinated noun phrases")
    args = parser.parse_args(argv)

    corpus = generate_corpus(args.seed, args.train_size, args.test_size, args.swapped_pairs,
                             args.long_size)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, pairs in corpus.items():
        path = args.out / f"{name}.tsv"
        write_tsv(path, pairs)
        longest = max((len(en.split()) for en, _ in pairs), default=0)
        print(f"{path}: {len(pairs)} pairs, longest English sentence {longest} words, "
              f"{path.stat().st_size} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
