"""ordo.Translator against the CLI on the shipped models: texts, ids and scores equal
to what `ordo translate/score --json` prints for the same input and options."""

import json
import math
import shutil

import numpy as np
import pytest

import ordo
from conftest import WEIGHTS, cli, cli_json, test_sentences

SENTENCES = test_sentences(40)


def test_translate_is_the_readmes_example(translator):
    assert translator.translate("cats chase dogs") == "Katzen jagen Hunde"


def test_the_default_model_is_sinusoidal():
    default = ordo.Translator()
    assert default.model_dir.endswith("sinusoidal")
    assert default.translate("dogs chase cats") == "Hunde jagen Katzen"


# marian's generation_config.json sets 4 beams and bans its pad token: without a keyword
# the Translator applies them, as the CLI does without a flag.
@pytest.mark.parametrize("model", ["sinusoidal", "alibi", "learned", "rope", "sinusoidal-split", "t5_relative", "none",
                                   "marian", "t5"])
def test_translate_batch_equals_the_cli_on_every_shipped_translation_model(model):
    translator = ordo.Translator(model)
    got = translator.translate_batch(SENTENCES)
    want = cli_json("translate", "--model", model, input_text="\n".join(SENTENCES) + "\n")
    assert len(got) == len(want) == len(SENTENCES)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.error is None, (i, g.error)
        assert g.source == w["source"] and g.source_ids == w["source_ids"], i
        assert g.hypotheses == [w["translation"]], i
        assert g.ids == [w["target_ids"]], i
        assert g.scores[0] == pytest.approx(w["score"], rel=1e-6, abs=1e-6), i
        assert g.finished == [w["finished"]], i
        assert math.fsum(g.token_logprobs[0]) == pytest.approx(g.scores[0], abs=1e-4), i


def test_beam_search_n_best_equals_the_cli(translator):
    sentences = SENTENCES[:12]
    got = translator.translate_batch(sentences, beam_size=4, num_hypotheses=3, length_penalty=0.6)
    want = cli_json("translate", "--model", "sinusoidal", "--beam", "4", "--n-best", "3", "--length-penalty", "0.6",
                    input_text="\n".join(sentences) + "\n")
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.hypotheses == [h["translation"] for h in w["hypotheses"]], i
        assert g.ids == [h["target_ids"] for h in w["hypotheses"]], i
        assert g.scores == pytest.approx([h["score"] for h in w["hypotheses"]], rel=1e-6, abs=1e-6), i
        assert g.normalized_scores == pytest.approx([h["normalized_score"] for h in w["hypotheses"]], rel=1e-6), i
        assert g.token_logprobs == [pytest.approx(h["token_logprobs"], rel=1e-6, abs=1e-6) for h in w["hypotheses"]]


def test_sampling_equals_the_cli_line_by_line(translator):
    sentences = SENTENCES[:16]
    keywords = dict(sampling=True, sampling_temperature=0.8, sampling_topp=0.9, sampling_topk=20, seed=7,
                    max_batch_size=5)
    got = translator.translate_batch(sentences, **keywords)
    want = cli_json("translate", "--model", "sinusoidal", "--sample", "--temperature", "0.8", "--top-p", "0.9",
                    "--top-k", "20", "--seed", "7", "--batch-size", "5", input_text="\n".join(sentences) + "\n")
    assert [g.ids[0] for g in got] == [w["target_ids"] for w in want]
    # Sentence i draws from (seed, i): another batch size gives the same draws.
    again = translator.translate_batch(sentences, **{**keywords, "max_batch_size": 3})
    assert [g.ids for g in again] == [g.ids for g in got]


def test_constraints_equal_the_cli(translator):
    sentences = SENTENCES[:10]
    got = translator.translate_batch(sentences, min_length=8, max_length=12, no_repeat_ngram_size=2,
                                     repetition_penalty=1.3)
    want = cli_json("translate", "--model", "sinusoidal", "--min-length", "8", "--max-length", "12",
                    "--no-repeat-ngram-size", "2", "--repetition-penalty", "1.3", input_text="\n".join(sentences) + "\n")
    assert [g.ids[0] for g in got] == [w["target_ids"] for w in want]
    assert all(8 <= len(g.ids[0]) <= 12 for g in got)


def test_translate_ids_batch_equals_the_cli(translator):
    got = translator.translate_ids_batch([[133, 85, 123, 1], [123, 85, 133, 1]])
    assert got[0].ids[0] == [int(x) for x in cli("translate", "--source-ids", "133 85 123 1").split()]
    assert got[0].hypotheses[0] == "Katzen jagen Hunde"
    assert got[1].hypotheses[0] == "Hunde jagen Katzen"
    assert got[0].source == "cats chase dogs"


def test_blank_and_failing_texts_do_not_stop_the_batch(translator):
    got = translator.translate_batch(["cats chase dogs", "", "bad \x1b[31m text", "dogs chase cats"])
    assert got[0].hypotheses == ["Katzen jagen Hunde"]
    assert got[1].error is None and got[1].hypotheses == [""]
    assert got[2].hypotheses == [] and "control character U+001B" in got[2].error
    assert got[3].hypotheses == ["Hunde jagen Katzen"]
    with pytest.raises(ordo.Error, match="control character"):
        translator.translate("bad \x1b[31m text")


# compute_type converts the weights at load exactly as the CLI's --compute-type does
# (CTranslate2's names for the same types included): scores equal to the last bit. The
# shipped models are F16, which f32 holds exactly: only bf16, int8 and int4 round the
# weights, and only they score otherwise than the model as stored.
@pytest.mark.parametrize("compute_type, flag, group_size", [
    ("int8", "int8", None), ("int4", "int4", None), ("int8", "int8", 8), ("int4", "int4", 64),
    ("float16", "f16", None), ("bf16", "bf16", None), ("default", "auto", None), ("float32", "f32", None)])
def test_compute_types_equal_the_clis(compute_type, flag, group_size):
    translator = ordo.Translator("sinusoidal", compute_type=compute_type, group_size=group_size)
    flags = ["--compute-type", flag] + ([] if group_size is None else ["--group-size", str(group_size)])
    source, target = "the big dog sees a small cat.", "der große Hund sieht eine kleine Katze."
    (want,) = cli_json("score", "--model", "sinusoidal", *flags, "--source", source, "--target", target)
    got = translator.score(source, target)
    assert got.token_logprobs == want["token_logprobs"]
    (stored,) = cli_json("score", "--model", "sinusoidal", "--source", source, "--target", target)
    assert (got.token_logprobs != stored["token_logprobs"]) == (flag in ("bf16", "int8", "int4"))
    want = cli_json("translate", "--model", "sinusoidal", *flags, input_text="\n".join(SENTENCES) + "\n")
    assert [r.hypotheses[0] for r in translator.translate_batch(SENTENCES)] == [w["translation"] for w in want]
    generator = ordo.Generator("german-llama", compute_type=compute_type, group_size=group_size)
    (want,) = cli_json("score", "--model", "german-llama", *flags, "--target", "Die Katze jagt den Hund.")
    assert generator.score("Die Katze jagt den Hund.").token_logprobs == want["token_logprobs"]


def test_score_batch_equals_the_cli(translator):
    pairs = [("cats chase dogs", "Katzen jagen Hunde"), ("the big dog sees a small cat.", "der große Hund sieht")]
    got = translator.score_batch([s for s, _ in pairs], [t for _, t in pairs])
    for (source, target), g in zip(pairs, got):
        (want,) = cli_json("score", "--model", "sinusoidal", "--source", source, "--target", target)
        assert g.error is None
        assert g.token_logprobs == pytest.approx(want["token_logprobs"], rel=1e-6, abs=1e-6)
        assert g.logprob == pytest.approx(want["logprob"], rel=1e-6, abs=1e-6)
        assert g.ids == translator.tokenizer.encode(target, kind="target")
        # Alone, a pair is not padded: the same sum within float32's last bits.
        assert translator.score(source, target).logprob == pytest.approx(g.logprob, abs=1e-5)
    failed = translator.score_batch(["cats chase dogs", "cats"], ["", "Katzen"])
    assert failed[0].error.startswith("target: ") and failed[1].error is None
    with pytest.raises(ordo.Error, match="2 sources for 1 targets"):
        translator.score_batch(["a", "b"], ["c"])


def test_encode_is_the_encoders_output_as_compare_pools_it(translator):
    a, b = translator.encode(["cats chase dogs", "dogs chase cats"])
    d_model = json.loads((WEIGHTS / "sinusoidal" / "config.json").read_text())["d_model"]
    assert a.dtype == np.float32 and a.shape == (4, d_model) and b.shape == (4, d_model)
    assert a.base is not None  # a view of the values the encoder wrote, not a copy of them
    # `ordo compare` prints the cosine of the mean-pooled encoder outputs.
    line = next(l for l in cli("compare", "--model", "sinusoidal", "cats chase dogs", "dogs chase cats").splitlines()
                if l.startswith("sinusoidal"))
    want = float(line.split()[-2])
    pa, pb = a.astype(np.float64).mean(axis=0), b.astype(np.float64).mean(axis=0)
    assert float(pa @ pb / np.linalg.norm(pa) / np.linalg.norm(pb)) == pytest.approx(want, abs=1e-6)


def test_attention_equals_the_clis_csv(translator, tmp_path):
    got = translator.attention("cats chase dogs", kind="cross", layer=0)
    assert got.weights.dtype == np.float32 and got.weights.ndim == 3
    heads, rows, columns = got.weights.shape
    assert (rows, columns) == (len(got.rows), len(got.columns))
    assert got.columns == translator.tokenizer.tokenize("cats chase dogs").pieces
    np.testing.assert_allclose(got.weights.sum(axis=2), 1.0, atol=1e-5)
    out = tmp_path / "cross.csv"
    cli("viz", "attention", "--model", "sinusoidal", "cats chase dogs", "--kind", "cross", "--layer", "0",
        "--head", "3", "--out", str(out))
    table = [line.split(",") for line in out.read_text(encoding="utf-8").splitlines()]
    numbers = np.array([[float(x) for x in row[-columns:]] for row in table[-rows:]])
    np.testing.assert_allclose(got.weights[3], numbers, atol=1e-5)
    as_array = np.asarray(got)  # the result is the array, with its tokens
    assert np.shares_memory(as_array, got.weights) and np.array_equal(as_array, got.weights)
    encoder = translator.attention("cats chase dogs", kind="encoder", layer=1)
    assert encoder.rows == encoder.columns == got.columns


def copy_with_generation_config(source, directory, generation_config):
    """A copy of model directory `source` with `generation_config` as its generation_config.json."""
    shutil.copytree(source, directory)
    (directory / "generation_config.json").write_text(json.dumps(generation_config), encoding="utf-8")
    return str(directory)


def test_generation_defaults_apply_unless_a_keyword_is_given(tmp_path):
    """generation_config.json's num_beams, max_length, length_penalty, no_repeat_ngram_size
    and bad_words_ids are a Translator's defaults: a call without keywords equals one with
    those values given by hand on a model without them, and a keyword given wins."""
    sentences = SENTENCES[:10]
    plain = copy_with_generation_config(WEIGHTS / "marian", tmp_path / "plain", {"bad_words_ids": [[317]]})
    greedy = ordo.Translator(plain).translate_batch(sentences)
    banned = greedy[0].ids[0][0]  # the first token of the first translation
    bad_words = [[317], [banned]]
    defaults = {"num_beams": 3, "max_length": 6, "length_penalty": 0.5, "no_repeat_ngram_size": 2,
                "bad_words_ids": bad_words, "decoder_start_token_id": 317, "eos_token_id": 0}
    with_defaults = copy_with_generation_config(WEIGHTS / "marian", tmp_path / "defaults", defaults)
    only_bans = copy_with_generation_config(WEIGHTS / "marian", tmp_path / "bans", {"bad_words_ids": bad_words})

    got = ordo.Translator(with_defaults).translate_batch(sentences, num_hypotheses=2)
    by_hand = ordo.Translator(only_bans).translate_batch(sentences, num_hypotheses=2, beam_size=3, max_length=5,
                                                          length_penalty=0.5, no_repeat_ngram_size=2)
    for i, (g, h) in enumerate(zip(got, by_hand)):
        assert g.error is None, (i, g.error)
        assert g.ids == h.ids and g.scores == h.scores, i
        assert all(len(ids) <= 5 and banned not in ids for ids in g.ids), i
    assert got[0].ids[0] != greedy[0].ids[0]  # the defaults changed the result
    # The CLI without flags decodes the same.
    want = cli_json("translate", "--model", with_defaults, input_text="\n".join(sentences) + "\n")
    assert [g.ids[0] for g in got] == [w["target_ids"] for w in want]
    # A keyword given wins, even at DecodingOptions' own default: greedy, as --beam 1.
    chosen = ordo.Translator(with_defaults).translate_batch(sentences, beam_size=1, max_length=0)
    want = cli_json("translate", "--model", with_defaults, "--beam", "1", "--max-length", "0",
                    input_text="\n".join(sentences) + "\n")
    assert [c.ids[0] for c in chosen] == [w["target_ids"] for w in want]
    assert all(banned not in c.ids[0] for c in chosen)  # bad_words_ids, which has no keyword, still applies
    assert [c.ids[0] for c in chosen] != [g.ids[0] for g in got]
    # The Generator continues translations under the same defaults, as `ordo generate`.
    generator = ordo.Generator(with_defaults)
    continued = generator.generate_batch([""], sources=sentences[:1])
    want = cli_json("generate", "--model", with_defaults, "--source", sentences[0])
    assert continued[0].ids == want[0]["generated_ids"] == got[0].ids[0]


def test_tokenize_equals_the_cli():
    for model, text, kind in [("sinusoidal", "cats chase dogs", None), ("sinusoidal", "Katzen jagen Hunde", "target"),
                              ("german-llama", "Die Katze", None)]:
        args = ["tokenize", "--model", model, text] + (["--as", kind] if kind else [])
        (want,) = cli_json(*args)
        got = ordo.tokenize(model, text, kind=kind)
        assert got.ids == want["ids"] and got.pieces == want["pieces"], (model, text)
    tokenizer = ordo.Translator("sinusoidal").tokenizer
    assert tokenizer.encode("cats chase dogs") == [133, 85, 123, 1]
    assert tokenizer.decode([122, 84, 12, 111, 1]) == "Katzen jagen Hunde"
    assert tokenizer.decode([133, 85, 123, 1], kind="source") == "cats chase dogs"


def test_cpu_kernels_are_the_ones_ordo_bench_reports():
    kernels = ordo.cpu_kernels()
    assert kernels in ("amx", "avx512", "avx2", "portable")
    report = cli_json("bench", "--model", str(WEIGHTS / "sinusoidal"), "--batch", "1", "--src-len", "3",
                      "--new-tokens", "1", "--threads", "1", "--repeats", "1", "--warmup", "0")[0]
    assert report["kernels"] == kernels


def test_models_lists_the_shipped_models():
    names = ordo.models()
    assert names == sorted(p.name for p in WEIGHTS.iterdir() if (p / "config.json").is_file())
    assert "german-llama" in names and "sinusoidal" in names
