"""ordo.Translator on a multilingual model (the oracle's NLLB-layout model, written by
tools/oracle/make_parity_models.py, which CTest runs first): source_lang and target_lang
as the CLI's --source-lang and --target-lang, the same ids; a missing or unknown code is
ordo.OptionError naming the keyword."""

import json

import pytest

import ordo
from conftest import BUILD_DIR, cli_json

MODEL = BUILD_DIR / "tests" / "parity" / "nllb-relu-f32"


@pytest.fixture(scope="module")
def nllb():
    assert (MODEL / "config.json").exists(), f"{MODEL}: the oracle has not run (ctest runs it first)"
    return ordo.Translator(str(MODEL))


def test_translations_equal_the_cli_and_start_with_the_target_code(nllb):
    reference = json.loads((MODEL / "reference.json").read_text(encoding="utf-8"))
    assert nllb.language_codes == list(reference["codes"])
    for case in reference["translations"]:
        got = nllb.translate_batch([case["text"]], max_length=len(case["ids"]), source_lang=case["source_lang"],
                                   target_lang=case["target_lang"])[0]
        want = cli_json("translate", "--model", str(MODEL), "--max-length", str(len(case["ids"])), "--source-lang",
                        case["source_lang"], "--target-lang", case["target_lang"], case["text"])[0]
        assert got.error is None, got.error
        assert got.source_ids == want["source_ids"] == case["source_ids"]
        assert got.ids == [want["target_ids"]] == [case["ids"]]
        assert got.hypotheses == [want["translation"]]


def test_missing_unknown_or_superfluous_codes_are_option_errors(nllb):
    with pytest.raises(ordo.OptionError, match="source_lang: this model translates between languages"):
        nllb.translate("the dogs", target_lang="deu_Latn")
    with pytest.raises(ordo.OptionError, match="target_lang: unknown language code"):
        nllb.translate("the dogs", source_lang="eng_Latn", target_lang="xyz_Latn")
    with pytest.raises(TypeError, match="source_lang: expected a str"):
        nllb.translate("the dogs", source_lang=3, target_lang="deu_Latn")
    with pytest.raises(ordo.OptionError, match="source_lang: this model has no language codes"):
        ordo.Translator().translate("cats chase dogs", source_lang="eng_Latn", target_lang="deu_Latn")
    assert ordo.Translator().language_codes == []


def test_the_tokenizer_puts_the_codes_as_the_cli_does(nllb):
    """Tokenizer.encode/tokenize with source_lang and target_lang: the ids `ordo tokenize
    --source-lang --target-lang` prints, for a source, a target and a prompt."""
    reference = json.loads((MODEL / "reference.json").read_text(encoding="utf-8"))
    tokenizer = nllb.tokenizer
    for case in reference["tokenization"]:
        kind, text, lang = case["as"], case["text"], case["lang"]
        side = {"source_lang": lang} if kind == "source" else {"target_lang": lang}
        assert tokenizer.encode(text, kind=kind, **side) == case["ids"], (kind, text)
    case = reference["translations"][0]
    languages = dict(source_lang=case["source_lang"], target_lang=case["target_lang"])
    flags = ["--source-lang", case["source_lang"], "--target-lang", case["target_lang"]]
    for kind in ["source", "target", "prompt"]:
        (want,) = cli_json("tokenize", "--model", str(MODEL), "--as", kind, *flags, case["text"])
        got = tokenizer.tokenize(case["text"], kind=kind, **languages)
        assert got.ids == want["ids"] and got.pieces == want["pieces"], kind
        assert ordo.tokenize(str(MODEL), case["text"], kind=kind, **languages).ids == want["ids"], kind
    code = reference["codes"][case["target_lang"]]
    assert tokenizer.encode("die Hunde", kind="prompt", target_lang=case["target_lang"])[0] == code
    assert tokenizer.encode(case["text"], source_lang=case["source_lang"]) == case["source_ids"]


def test_the_tokenizer_refuses_missing_unknown_or_superfluous_codes(nllb):
    tokenizer = nllb.tokenizer
    with pytest.raises(ordo.OptionError, match="source_lang: this model translates between languages") as error:
        tokenizer.encode("the dogs")
    assert error.value.keyword == "source_lang"
    with pytest.raises(ordo.OptionError, match="target_lang: this model translates between languages"):
        tokenizer.encode("die Hunde", kind="target", source_lang="eng_Latn")
    with pytest.raises(ordo.OptionError, match="target_lang: this model translates between languages"):
        tokenizer.tokenize("die", kind="prompt")
    with pytest.raises(ordo.OptionError, match='source_lang: unknown language code "xyz_Latn"'):
        tokenizer.encode("the dogs", source_lang="xyz_Latn")
    with pytest.raises(ordo.OptionError, match="target_lang: this model has no language codes"):
        ordo.Translator().tokenizer.encode("Katzen", kind="target", target_lang="deu_Latn")
    with pytest.raises(ordo.OptionError, match="source_lang: this model has no language codes"):
        ordo.tokenize("german-llama", "Die Katze", source_lang="eng_Latn")
    # A model of one pair reads text as before.
    assert ordo.Translator().tokenizer.encode("cats chase dogs") == [133, 85, 123, 1]


def test_the_generator_continues_translations_as_the_cli(nllb):
    """Generator with source_lang and target_lang: the prompt follows the target's code,
    as `ordo generate --source-lang --target-lang` reads it."""
    reference = json.loads((MODEL / "reference.json").read_text(encoding="utf-8"))
    case = reference["translations"][0]
    languages = dict(source_lang=case["source_lang"], target_lang=case["target_lang"])
    generator = ordo.Generator(str(MODEL))
    length = len(case["ids"]) - 1  # the code is the prompt's
    (whole,) = generator.generate_batch([""], sources=[case["text"]], max_length=length, **languages)
    assert whole.error is None, whole.error
    assert whole.ids == case["ids"][1:]
    (want,) = cli_json("generate", "--model", str(MODEL), "--source-lang", case["source_lang"], "--target-lang",
                       case["target_lang"], "--max-length", str(length), "--source", case["text"], "die")
    got = generator.generate_batch(["die"], sources=[case["text"]], max_length=length, **languages)[0]
    assert want["prompt_ids"][0] == reference["codes"][case["target_lang"]]
    assert got.ids == want["generated_ids"]
    assert generator.generate("die", source=case["text"], max_length=length, **languages) == got.text
    tokens = list(generator.generate_tokens("die", source=case["text"], max_length=length, **languages))
    assert [t.id for t in tokens] == got.ids
    with pytest.raises(ordo.OptionError, match="target_lang: this model translates between languages"):
        generator.generate_batch(["die"], sources=[case["text"]], source_lang=case["source_lang"])
    with pytest.raises(ordo.OptionError, match="source_lang: this model translates between languages"):
        generator.generate_tokens("die", source=case["text"], target_lang=case["target_lang"])
    with pytest.raises(ordo.OptionError, match="target_lang: this model has no language codes"):
        ordo.Generator("german-llama").generate("Die", target_lang="deu_Latn")
