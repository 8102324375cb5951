"""Errors and their types: ordo.Error (a RuntimeError) with the C++ message, and
ordo.OptionError (an Error and a ValueError) naming the keyword the caller typed."""

import pytest

import ordo


def test_the_exception_hierarchy():
    assert issubclass(ordo.Error, RuntimeError)
    assert issubclass(ordo.OptionError, ordo.Error) and issubclass(ordo.OptionError, ValueError)
    assert ordo.Error.__module__ == "ordo" and ordo.OptionError.__module__ == "ordo"


@pytest.mark.parametrize("keywords, keyword, says", [
    ({"beam_size": 0}, "beam_size", "must be at least 1"),
    ({"num_hypotheses": 3}, "num_hypotheses", "more than the beam size"),
    ({"sampling": True, "beam_size": 2}, "sampling", "cannot be combined"),
    ({"sampling_temperature": 0.0}, "sampling_temperature", "must be a positive number"),
    ({"sampling_topk": -1}, "sampling_topk", "must be >= 0"),
    ({"sampling_topp": 1.5}, "sampling_topp", "must be in (0, 1]"),
    ({"repetition_penalty": 0.0}, "repetition_penalty", "must be in [0.01, 100]"),
    ({"max_batch_size": 0}, "max_batch_size", "must be"),
    ({"max_length": 5000}, "max_length", "limit of 4096"),
    ({"min_length": 9, "max_length": 4}, "min_length", "more than the maximum length"),
    ({"length_penalty": float("nan")}, "length_penalty", "finite"),
    ({"seed": -1}, "seed", "must be in [0, 2**64 - 1]"),
    ({"beam_size": 2**40}, "beam_size", "must be in ["),
    ({"max_input_tokens": 100000}, "max_input_tokens", "more than this model reads"),
])
def test_bad_keyword_values_raise_option_error_naming_the_keyword(translator, keywords, keyword, says):
    with pytest.raises(ordo.OptionError) as raised:
        translator.translate_batch(["cats chase dogs"], **keywords)
    assert str(raised.value).startswith(keyword + ": "), str(raised.value)
    assert says in str(raised.value)
    assert raised.value.keyword == keyword


@pytest.mark.parametrize("keywords", [{"beam_size": "4"}, {"beam_size": 2.0}, {"sampling": 1}, {"seed": True},
                                      {"sampling_topp": "0.9"}])
def test_values_of_the_wrong_type_raise_type_error_naming_the_keyword(translator, keywords):
    (keyword,) = keywords
    with pytest.raises(TypeError, match=f"^{keyword}: expected"):
        translator.translate_batch(["cats chase dogs"], **keywords)


def test_unknown_keywords_and_single_strings_are_type_errors(translator):
    with pytest.raises(TypeError):
        translator.translate_batch(["cats"], beam=4)
    with pytest.raises(TypeError, match="texts: expected a list of str"):
        translator.translate_batch("cats chase dogs")


@pytest.mark.parametrize("compute_type", ["int8_float16", "int16", "INT8", "float64", ""])
def test_compute_types_ordo_lacks_are_refused_with_the_ones_it_has(compute_type):
    with pytest.raises(ordo.OptionError, match=r"^compute_type: .*use 'auto' .*'int8' or 'int4'") as raised:
        ordo.Translator("sinusoidal", compute_type=compute_type)
    assert raised.value.keyword == "compute_type"


@pytest.mark.parametrize("keywords, problem", [
    ({"compute_type": "int8", "group_size": -1}, r"must be in \[0, 16777216\], got -1"),
    ({"compute_type": "int4", "group_size": 2**31}, r"must be in \[0, 16777216\]"),
    ({"group_size": 32}, "is set for auto"),
    ({"compute_type": "f16", "group_size": 32}, "is set for f16, which has no scales"),
    ({"compute_type": "default", "group_size": 32}, r"is set for compute_type='default' \(the weights as stored\)"),
    ({"compute_type": "float16", "group_size": 0}, "is set for compute_type='float16', which has no scales"),
    ({"compute_type": "int4", "group_size": 48}, "a positive multiple of 32"),
])
def test_group_sizes_the_compute_type_cannot_take_raise_option_error(keywords, problem):
    for cls, model in [(ordo.Translator, "sinusoidal"), (ordo.Generator, "german-llama")]:
        with pytest.raises(ordo.OptionError, match=f"^group_size: .*{problem}") as raised:
            cls(model, **keywords)
        assert raised.value.keyword == "group_size"
    for wrong in [True, "32", 32.0]:  # an int as every int keyword: True is not 1
        with pytest.raises(TypeError, match="^group_size: expected an int"):
            ordo.Translator("sinusoidal", compute_type="int8", group_size=wrong)
    # A size that fits the type but not the model's widths: the model's error, naming the tensor.
    with pytest.raises(ordo.Error, match="tensor .*cannot be int8 in groups of 7") as raised:
        ordo.Translator("sinusoidal", compute_type="int8", group_size=7)
    assert not isinstance(raised.value, ordo.OptionError)


def test_models_that_do_not_fit_the_class_raise_error():
    with pytest.raises(ordo.Error, match="decoder-only"):
        ordo.Translator("german-llama")
    with pytest.raises(ordo.Error, match="sinusoidal") as raised:  # lists the shipped names
        ordo.Translator("no-such-model")
    assert not isinstance(raised.value, ordo.OptionError)
    with pytest.raises(ordo.OptionError, match="^threads: "):
        ordo.Translator("sinusoidal", threads=-1)


@pytest.mark.parametrize("keyword, wrong, kind", [
    ("compute_type", None, "a str"), ("compute_type", 8, "a str"),
    ("threads", None, "an int"), ("threads", 2.0, "an int"), ("threads", True, "an int"),
])
def test_constructor_keywords_of_the_wrong_type_raise_type_error_naming_them(keyword, wrong, kind):
    # Before, pybind11's "incompatible constructor arguments" listing, naming none of them.
    for cls, model in [(ordo.Translator, "sinusoidal"), (ordo.Generator, "german-llama")]:
        with pytest.raises(TypeError, match=f"^{keyword}: expected {kind}, got {type(wrong).__name__}"):
            cls(model, **{keyword: wrong})


def test_integers_of_other_types_are_ints_where_a_keyword_takes_one():
    numpy = pytest.importorskip("numpy")
    translator = ordo.Translator("sinusoidal", threads=numpy.int64(1), compute_type="int8", group_size=numpy.int32(0))
    assert translator.translate("cats chase dogs", beam_size=numpy.int64(2)) == \
        ordo.Translator("sinusoidal", compute_type="int8").translate("cats chase dogs", beam_size=2)


def test_attention_names_a_kind_or_layer_the_model_lacks(translator):
    with pytest.raises(ordo.OptionError, match="^kind: must be 'encoder', 'decoder' or 'cross'"):
        translator.attention("cats chase dogs", kind="self")
    with pytest.raises(ordo.OptionError, match=r"^layer: must be in \[0, 1\]"):
        translator.attention("cats chase dogs", layer=7)


def test_tokenizer_errors(translator):
    with pytest.raises(ordo.Error, match="is not valid UTF-8|outside|vocabulary"):
        translator.tokenizer.decode([99999])
    with pytest.raises(ordo.OptionError, match="^kind: "):
        translator.tokenizer.encode("cats", kind="sauce")
