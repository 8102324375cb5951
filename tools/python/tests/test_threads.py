"""Threads and the GIL: calls release the GIL while they compute, and Python threads
sharing one Translator or Generator get exactly what serial calls get."""

import threading

import ordo
from conftest import test_sentences

SENTENCES = test_sentences(120)


def run_in_threads(jobs):
    """Runs every job on its own thread at once; their results, in job order."""
    results = [None] * len(jobs)
    errors = []
    start = threading.Barrier(len(jobs))

    def work(i, job):
        try:
            start.wait()
            results[i] = job()
        except BaseException as error:  # reported below, with the job's index
            errors.append((i, error))

    threads = [threading.Thread(target=work, args=(i, job)) for i, job in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


def summary(results):
    return [(r.error, r.hypotheses, r.ids, r.scores, r.token_logprobs) for r in results]


def test_threads_sharing_a_translator_get_what_serial_calls_get(translator):
    # Each thread its own job: other texts, options, batch sizes; sampled ones too.
    jobs = [
        lambda: translator.translate_batch(SENTENCES[0:60]),
        lambda: translator.translate_batch(SENTENCES[30:120], beam_size=4, num_hypotheses=2),
        lambda: translator.translate_batch(SENTENCES[60:120], sampling=True, seed=11, max_batch_size=7),
        lambda: translator.translate_batch(SENTENCES[0:120], max_batch_size=16),
        lambda: translator.translate_batch(SENTENCES[10:50], sampling=True, seed=11, sampling_topk=5),
        lambda: translator.translate_batch(SENTENCES[0:60]),
    ]
    serial = [summary(job()) for job in jobs]
    for _ in range(2):
        assert [summary(r) for r in run_in_threads(jobs)] == serial


def test_threads_sharing_a_generator_get_what_serial_calls_get(generator):
    prompts = ["Die Katze", "Der Hund", "Die Maus", "Ein Lehrer"]
    jobs = [
        lambda: [(g.ids, g.score) for g in generator.generate_batch(prompts)],
        lambda: [(g.ids, g.score) for g in generator.generate_batch(prompts, sampling=True, seed=4)],
        lambda: [t.id for t in generator.generate_tokens("Die Katze", sampling=True, seed=9)],
        lambda: generator.score("Die Katze jagt den Hund.").token_logprobs,
    ]
    serial = [job() for job in jobs]
    assert run_in_threads(jobs) == serial


def test_a_call_lets_other_python_threads_run(translator):
    # While one thread translates, this one keeps running Python: it could not if the
    # call held the GIL. Counted in steps of this loop, not in seconds.
    long_input = SENTENCES * 10
    inside = threading.Event()
    finished = threading.Event()

    def translate():
        inside.set()
        translator.translate_batch(long_input)
        finished.set()

    worker = threading.Thread(target=translate)
    worker.start()
    inside.wait()
    steps_while_translating = 0
    while not finished.wait(0.005):
        steps_while_translating += 1
    worker.join()
    assert steps_while_translating >= 3
