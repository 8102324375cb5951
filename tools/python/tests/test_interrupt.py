"""Ctrl-C: SIGINT sent to a process inside a long translate_batch raises
KeyboardInterrupt there within a decoder step, not at the end of the input, and the
Translator is still usable after it. The child runs an input far longer than the
bounded waits below: one that ran to its end would time out and fail."""

import os
import signal
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import sys, time
    import ordo
    translator = ordo.Translator("sinusoidal")
    lines = [line.split("\\t")[0] for line in open(sys.argv[1], encoding="utf-8")] * 100  # 200,000 sentences
    translator.translate_batch(lines[:64])  # warm: the model and buffers are ready
    print("translating", flush=True)
    try:
        translator.translate_batch(lines)
        print("finished", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    print(translator.translate("cats chase dogs"), flush=True)
""")


def test_sigint_mid_translate_batch_raises_keyboard_interrupt(tmp_path):
    from conftest import TEST_TSV

    child = subprocess.Popen([sys.executable, "-c", CHILD, str(TEST_TSV)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        assert child.stdout.readline().strip() == "translating"
        # Let it get into decoding: tokenizing also checks for Ctrl-C, but the point
        # is the decoder's steps. Far less than the input takes either way.
        try:
            child.wait(timeout=3)
        except subprocess.TimeoutExpired:
            pass
        assert child.poll() is None, "the child ended before it was interrupted"
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)  # the rest of the input would take minutes
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, err
    assert out.splitlines() == ["interrupted", "Katzen jagen Hunde"], (out, err)
