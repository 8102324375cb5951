"""Generator.generate_tokens' iterator: the compiled generate_streamed runs on a worker
thread (without the GIL while it computes) and hands each token over a queue, so the
caller's loop gets a token as soon as it is chosen. Leaving the loop early (break,
an exception, Ctrl-C while waiting) stops the worker within one decoder step."""

import queue
import threading


class _Stopped(Exception):
    """Raised inside the worker's stop check once the consumer has gone."""


_DONE = object()


def tokens(run):
    """Yields what `run(on_token, stop)` passes to on_token, as it comes; re-raises what
    run raises. `stop` is called before every decoder step and raises once the
    iteration has ended."""
    handed = queue.Queue()
    ended = threading.Event()

    def stop():
        if ended.is_set():
            raise _Stopped()

    def work():
        try:
            run(handed.put, stop)
            handed.put(_DONE)
        except _Stopped:
            pass
        except BaseException as error:  # noqa: B902 - handed to the consumer, raised there
            handed.put(error)

    worker = threading.Thread(target=work, name="ordo.generate_tokens", daemon=True)
    worker.start()
    try:
        while True:
            item = handed.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        ended.set()
        worker.join()
