"""ordo.Translator: translation with an encoder-decoder model."""

from . import _keywords, _ordo


class Translator:
    """Translates text with an encoder-decoder model.

    >>> import ordo
    >>> translator = ordo.Translator()            # the shipped default model, "sinusoidal"
    >>> translator.translate("cats chase dogs")
    'Katzen jagen Hunde'
    >>> result = translator.translate_batch(["cats chase dogs"], beam_size=4, num_hypotheses=2)[0]
    >>> result.hypotheses, result.scores

    model_dir: a model directory, a shipped model's name (ordo.models()), or None for
        the default model ($ORDO_MODEL, else the shipped "sinusoidal").
    threads: ordo's compute threads, for the whole process; 0 keeps the current number
        (every core until set).
    compute_type: what the weight matrices run as, as `ordo translate --compute-type`
        takes it: "auto" (as the files store them), "f32", "f16", "bf16", "int8" or
        "int4", converted at load exactly as `ordo quantize --type` writes them
        (CTranslate2's "default", "float32", "float16" and "bfloat16" name the same
        types); anything else raises ordo.OptionError.
    group_size: weights per scale for "int8" (0: a scale per row, the default) and
        "int4" (a multiple of 32, default 32); None: the type's default.

    Calls release the GIL while they compute: several Python threads may share one
    Translator, and each gets what it would get alone. Ctrl-C (KeyboardInterrupt)
    stops a call within one decoder step; the Translator stays usable. Raises
    ordo.Error when the model cannot be loaded or is decoder-only (use ordo.Generator).
    """

    def __init__(self, model_dir=None, threads=0, compute_type="auto", group_size=None):
        self._impl = _ordo.Translator(model_dir, threads, compute_type, group_size)

    @property
    def model_dir(self):
        """The directory the model was loaded from (str)."""
        return self._impl.model_dir

    @property
    def language_codes(self):
        """A multilingual model's language codes (list of str; NLLB-200's "eng_Latn",
        ...), which source_lang and target_lang take; empty for a model of one pair."""
        return self._impl.language_codes

    @property
    def tokenizer(self):
        """The model's tokenizer (ordo.Tokenizer): encode, decode, pieces, tokenize."""
        return self._impl.tokenizer

    @_keywords.documented
    def translate_batch(self, texts, beam_size=None, num_hypotheses=1, length_penalty=None, max_length=None,
                        min_length=0, sampling=False, sampling_temperature=1.0, sampling_topk=0,
                        sampling_topp=1.0, seed=0, no_repeat_ngram_size=None, repetition_penalty=1.0,
                        max_batch_size=32, max_input_tokens=0, truncate=False, source_lang=None, target_lang=None):
        """Translates many texts; returns one ordo.TranslationResult per text, in order.

        Each result has .hypotheses (str, best first), .ids, .scores (sums of token
        log-probs), .normalized_scores, .token_logprobs and .finished. A text that
        fails (control characters, too long, ...) has .error set and the others go on;
        a blank text gives one empty hypothesis. Text i samples from (seed, i), as line
        i of `ordo translate --input` does.
        """
        texts = _keywords.check_texts("texts", texts)
        return self._impl.translate_batch(texts, _keywords.collect(locals()))

    @_keywords.documented
    def translate(self, text, beam_size=None, num_hypotheses=1, length_penalty=None, max_length=None, min_length=0,
                  sampling=False, sampling_temperature=1.0, sampling_topk=0, sampling_topp=1.0, seed=0,
                  no_repeat_ngram_size=None, repetition_penalty=1.0, max_batch_size=32, max_input_tokens=0,
                  truncate=False, source_lang=None, target_lang=None):
        """The best translation of one text (str). Raises ordo.Error when it cannot be
        translated (blank, control characters, too long)."""
        return self._impl.translate(text, _keywords.collect(locals()))

    @_keywords.documented
    def translate_ids_batch(self, sources, beam_size=None, num_hypotheses=1, length_penalty=None, max_length=None,
                            min_length=0, sampling=False, sampling_temperature=1.0, sampling_topk=0,
                            sampling_topp=1.0, seed=0, no_repeat_ngram_size=None, repetition_penalty=1.0,
                            max_batch_size=32, target_lang=None):
        """Translates token ids, for tokenizer-free use: `sources` is a list of id lists
        (eos included, used as given). Returns one ordo.TranslationResult per source;
        texts are filled in when the model has a tokenizer."""
        sources = [list(ids) for ids in sources]
        return self._impl.translate_ids_batch(sources, _keywords.collect(locals()))

    def score_batch(self, sources, targets, max_batch_size=32, max_input_tokens=0, truncate=False, source_lang=None,
                    target_lang=None):
        """log p(target | source) token by token for each pair sources[i] -> targets[i]
        (eos appended to the target). Returns one ordo.ScoreResult per pair, with
        .token_logprobs and their sum .logprob; a pair that cannot be scored has .error
        set (naming the side: "target: ...") and the others go on. Raises ordo.Error
        when the lists differ in length."""
        sources = _keywords.check_texts("sources", sources)
        targets = _keywords.check_texts("targets", targets)
        return self._impl.score_batch(sources, targets, _keywords.collect(locals()))

    def score(self, source, target, max_input_tokens=0, truncate=False, source_lang=None, target_lang=None):
        """log p(target | source) for one pair (ordo.ScoreResult). Raises ordo.Error
        when either text cannot be scored, naming the side."""
        return self._impl.score(source, target, _keywords.collect(locals()))

    def encode(self, texts, max_input_tokens=0, truncate=False, source_lang=None):
        """The encoder's output for each text: a list of NumPy float32 arrays
        [tokens, d_model], the source's eos included (a row per piece of
        tokenizer.tokenize(text)). Each array owns the values the encoder wrote,
        copied once out of the encoder. Raises ordo.Error for a text it cannot read."""
        texts = _keywords.check_texts("texts", texts)
        return self._impl.encode(texts, _keywords.collect(locals()))

    def attention(self, text, kind="cross", layer=0, target=None, max_input_tokens=0):
        """One layer's attention probabilities while the decoder reads `target` after
        `text` (None: the greedy translation of `text`), teacher-forced.

        kind: "encoder" (source x source), "decoder" (target x target, causal) or
        "cross" (target x source). Returns ordo.AttentionResult: .weights, a NumPy
        float32 array [heads, rows, columns], with the pieces of its .rows and
        .columns. Raises ordo.OptionError for a kind or layer the model lacks.
        """
        return self._impl.attention(text, kind, layer, target, _keywords.collect(locals()))
