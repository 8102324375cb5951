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
