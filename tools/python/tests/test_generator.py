"""ordo.Generator against the CLI (`ordo generate/score --json`), and the token stream."""

import threading

import pytest

import ordo
from conftest import cli_json
from ordo import _stream

PROMPTS = ["Die Katze", "Der Hund", "Ein kleiner Lehrer", "Die Maus sieht"]


def test_generate_batch_equals_the_cli(generator):
    got = generator.generate_batch(PROMPTS)
    want = cli_json("generate", "--model", "german-llama", input_text="\n".join(PROMPTS) + "\n")
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.error is None, g.error
        assert (g.prompt, g.prompt_ids) == (w["prompt"], w["prompt_ids"]), i
        assert g.text == w["text"] and g.ids == w["generated_ids"], i
        assert g.score == pytest.approx(w["score"], rel=1e-6, abs=1e-6), i
        assert g.finished == w["finished"] and g.sequences == [g.text], i


def test_sampled_and_beam_generation_equal_the_cli(generator):
    got = generator.generate_batch(PROMPTS, sampling=True, seed=3, sampling_topk=10)
    want = cli_json("generate", "--model", "german-llama", "--sample", "--seed", "3", "--top-k", "10",
                    input_text="\n".join(PROMPTS) + "\n")
    assert [g.ids for g in got] == [w["generated_ids"] for w in want]
    got = generator.generate_batch(PROMPTS[:2], beam_size=3, num_hypotheses=2, max_length=12)
    want = cli_json("generate", "--model", "german-llama", "--beam", "3", "--n-best", "2", "--max-length", "12",
                    input_text="\n".join(PROMPTS[:2]) + "\n")
    for g, w in zip(got, want):
        assert g.sequences == [h["text"] for h in w["hypotheses"]]
        assert g.sequences_ids == [h["generated_ids"] for h in w["hypotheses"]]


def test_generate_is_the_best_continuation(generator):
    assert generator.generate("Die Katze") == generator.generate_batch(["Die Katze"])[0].text
    assert ordo.Generator().model_dir.endswith("german-llama")  # the default language model


def test_an_encoder_decoder_model_continues_a_translation():
    generator = ordo.Generator("sinusoidal")
    (result,) = generator.generate_batch(["Katzen"], sources=["cats chase dogs"])
    assert result.text == " jagen Hunde"
    (want,) = cli_json("generate", "--model", "sinusoidal", "--source", "cats chase dogs", "Katzen")
    assert result.ids == want["generated_ids"]
    assert "".join(t.text for t in generator.generate_tokens("Katzen", source="cats chase dogs")) == " jagen Hunde"


@pytest.mark.parametrize("keywords", [{}, {"max_length": 4}, {"sampling": True, "seed": 5}, {"beam_size": 3}])
def test_generate_tokens_streams_the_best_continuation_in_order(generator, keywords):
    tokens = list(generator.generate_tokens("Die Katze", **keywords))
    (want,) = generator.generate_batch(["Die Katze"], **keywords)
    assert [t.id for t in tokens] == want.ids
    assert [t.logprob for t in tokens] == pytest.approx(want.token_logprobs, abs=0)
    assert "".join(t.text for t in tokens) == want.text
    assert [t.eos for t in tokens] == [want.finished and i == len(tokens) - 1 for i in range(len(tokens))]


def test_leaving_the_stream_early_stops_the_generation(generator):
    stream = generator.generate_tokens("Die Katze", max_length=100, min_length=100)
    first = next(stream)
    assert first.id == generator.generate_batch(["Die Katze"])[0].ids[0]
    stream.close()  # what leaving a for loop early does: the worker is stopped and joined
    assert not any(t.name == "ordo.generate_tokens" for t in threading.enumerate())


def test_the_stop_check_ends_a_generation_between_steps(generator):
    # What the stream's worker relies on: a stop check that raises ends the compiled
    # call before the next decoder step, with that exception.
    class Enough(Exception):
        pass

    seen, checks = [], []

    def stop():
        checks.append(len(seen))
        if len(checks) == 4:
            raise Enough()

    with pytest.raises(Enough):
        generator._impl.generate_streamed("Die Katze", "", {"min_length": 50}, seen.append, stop)
    assert checks == [0, 1, 2, 3] and len(seen) == 3  # one token per step, none after the stop


def test_the_stream_stops_its_producer_when_the_loop_ends():
    produced = []

    def endless(on_token, stop):
        for i in range(1_000_000):
            stop()
            produced.append(i)
            on_token(i)

    stream = _stream.tokens(endless)
    assert next(stream) == 0
    stream.close()
    assert len(produced) < 1_000_000


def test_a_stream_that_fails_raises_from_the_loop(generator):
    stream = generator.generate_tokens("bad \x1b text")
    with pytest.raises(ordo.Error, match="control character"):
        next(stream)
    with pytest.raises(ordo.OptionError, match="^beam_size: "):
        generator.generate_tokens("Die Katze", beam_size=0)  # options are checked at the call


def test_score_equals_the_cli(generator):
    text = "Die Katze jagt den Hund."
    (want,) = cli_json("score", "--model", "german-llama", "--target", text)
    got = generator.score(text)
    assert got.token_logprobs == pytest.approx(want["token_logprobs"], rel=1e-6, abs=1e-6)
    assert got.logprob == pytest.approx(want["logprob"], rel=1e-6, abs=1e-6)
    with pytest.raises(ordo.Error, match="encoder-decoder"):
        ordo.Generator("sinusoidal").score(text)


def test_attention_of_a_decoder_only_model(generator):
    got = generator.attention("Die Katze jagt", layer=2)
    assert got.kind == "decoder" and got.rows == got.columns
    assert got.rows == generator.tokenizer.tokenize("Die Katze jagt").pieces
    heads, rows, columns = got.weights.shape
    assert heads == 4 and rows == columns == len(got.rows)
    assert float(abs(got.weights[:, 0, 1:]).max()) == 0.0  # causal: the first token sees only itself
    with pytest.raises(ordo.OptionError, match=r"^layer: must be in \[0, 2\]"):
        generator.attention("Die Katze", layer=3)
