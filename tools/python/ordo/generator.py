"""ordo.Generator: continuing text with a language model."""

from . import _keywords, _ordo, _stream


class Generator:
    """Continues prompts: a decoder-only model (LLaMA layout, e.g. the shipped
    "german-llama") continues the prompt itself; an encoder-decoder model continues a
    forced start of the translation of a source (the `sources` / `source` keywords).

    >>> import ordo
    >>> generator = ordo.Generator("german-llama")
    >>> for token in generator.generate_tokens("Die Katze"):
    ...     print(token.text, end="", flush=True)
    >>> generator.score("Die Katze jagt den Hund.").logprob

    model_dir: a model directory, a shipped model's name, or None for the default
        language model ($ORDO_MODEL, else the shipped "german-llama").
    threads, compute_type, group_size: as ordo.Translator takes them.

    Calls release the GIL while they compute; Ctrl-C stops one within a decoder step.
    """

    def __init__(self, model_dir=None, threads=0, compute_type="auto", group_size=None):
        self._impl = _ordo.Generator(model_dir, threads, compute_type, group_size)

    @property
    def model_dir(self):
        """The directory the model was loaded from (str)."""
        return self._impl.model_dir

    @property
    def tokenizer(self):
        """The model's tokenizer (ordo.Tokenizer)."""
        return self._impl.tokenizer

    @_keywords.documented
    def generate_batch(self, prompts, max_length=None, beam_size=None, num_hypotheses=1, length_penalty=None,
                       min_length=0, sampling=False, sampling_temperature=1.0, sampling_topk=0,
                       sampling_topp=1.0, seed=0, no_repeat_ngram_size=None, repetition_penalty=1.0,
                       max_batch_size=32, max_input_tokens=0, truncate=False, add_bos=True, sources=None,
                       source_lang=None, target_lang=None):
        """Continues many prompts; returns one ordo.GenerationResult per prompt, in order,
        with the best continuation's .text (without the prompt), .ids and .score, and
        all of them in .sequences. A prompt that fails has .error set and the others go
        on. Prompt i samples from (seed, i), as line i of `ordo generate --input` does.

        add_bos: put the model's bos token first (as LLaMA models expect).
        sources: for an encoder-decoder model, the text each prompt continues the
            translation of (one per prompt); None for a decoder-only model. A
            multilingual model's sources are read as source_lang, and each prompt
            follows target_lang's code (.ids of the prompt start with it).
        max_length 0 is 128 new tokens, never beyond the model's positions.
        """
        prompts = _keywords.check_texts("prompts", prompts)
        sources = [] if sources is None else _keywords.check_texts("sources", sources)
        return self._impl.generate_batch(prompts, sources, _keywords.collect(locals()))

    @_keywords.documented
    def generate(self, prompt, max_length=None, beam_size=None, num_hypotheses=1, length_penalty=None, min_length=0,
                 sampling=False, sampling_temperature=1.0, sampling_topk=0, sampling_topp=1.0, seed=0,
                 no_repeat_ngram_size=None, repetition_penalty=1.0, max_input_tokens=0, truncate=False,
                 add_bos=True, source=None, source_lang=None, target_lang=None):
        """The best continuation of one prompt (str, without the prompt). Raises ordo.Error
        when the prompt cannot be continued."""
        return self._run(prompt, source, _keywords.collect(locals()), None, None).text

    @_keywords.documented
    def generate_tokens(self, prompt, max_length=None, beam_size=None, num_hypotheses=1, length_penalty=None,
                        min_length=0, sampling=False, sampling_temperature=1.0, sampling_topk=0,
                        sampling_topp=1.0, seed=0, no_repeat_ngram_size=None, repetition_penalty=1.0,
                        max_input_tokens=0, truncate=False, add_bos=True, source=None, source_lang=None,
                        target_lang=None):
        """Yields the tokens of the best continuation of `prompt` (ordo.Token: .id, .text,
        .logprob, .eos) as they are chosen, so that

            for token in generator.generate_tokens("Die Katze"):
                print(token.text, end="", flush=True)

        streams. The texts, joined, are the continuation's text; the last token of a
        finished continuation is eos (text ""). With beam_size > 1 no token is final
        before the search ends, and they all come then. Leaving the loop early stops the
        generation within one decoder step. Raises ordo.Error (from the loop) when the
        prompt cannot be continued.
        """
        options = _keywords.collect(locals())
        # Options are checked here, before the first next(): an error then belongs to
        # the call, not to the loop.
        self._impl.generate_batch([], [], options)
        return _stream.tokens(lambda on_token, stop: self._run(prompt, source, options, on_token, stop))

    def score(self, text, max_input_tokens=0, add_bos=True):
        """log p(text) token by token for a decoder-only model: bos first (add_bos), eos
        appended so that the end is scored too (ordo.ScoreResult). Raises ordo.Error
        when the text cannot be scored, and for an encoder-decoder model (use
        Translator.score)."""
        return self._impl.score(text, _keywords.collect(locals()))

    def attention(self, text, layer=0, max_input_tokens=0, add_bos=True):
        """One layer's self-attention while a decoder-only model reads `text` (bos first),
        as ordo.AttentionResult: .weights [heads, rows, columns] (NumPy float32), .rows
        and .columns the pieces."""
        return self._impl.attention(text, layer, _keywords.collect(locals()))

    def _run(self, prompt, source, options, on_token, stop):
        return self._impl.generate_streamed(prompt, "" if source is None else source, options, on_token, stop)
