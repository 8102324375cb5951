"""An `ordo serve` process started for a script: its port, its exit, its cleanup.

Used by the two-replica test (tests/deploy/two_replicas.py) and the load benchmark
(tools/bench/serve_load.py); Python's standard library only. The server is started with
--port 0 and tells which port it took on its first line of stdout; it is ready when it
prints "ready:".
"""

import os
import queue
import signal
import socket
import subprocess
import threading


def die_with_parent():
    """For Popen's preexec_fn: the child gets SIGKILL when this process dies, so that a
    script killed by its caller (CTest's timeout) leaves no server or nginx behind."""
    import ctypes
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class ServeProcess:
    """`ordo serve ARGS --port 0` running; stop() (or leaving a `with`) always ends it."""

    def __init__(self, ordo, args, start_seconds=120.0, log_path=None):
        self.lines = queue.Queue()
        self.log = open(log_path, "w") if log_path else None
        self.process = subprocess.Popen(
            [ordo, "serve", "--port", "0", *args],
            stdout=subprocess.PIPE, stderr=self.log or subprocess.DEVNULL, text=True, preexec_fn=die_with_parent)
        threading.Thread(target=self._read, daemon=True).start()
        try:
            listening = self.next_line(start_seconds)
            marker = "listening on http://"
            if marker not in listening:
                raise RuntimeError(f"ordo serve did not start: {listening!r}")
            self.port = int(listening.split(marker)[1].split()[0].rsplit(":", 1)[1])
            ready = self.next_line(start_seconds)
            if "ready:" not in ready:
                raise RuntimeError(f"ordo serve did not get ready: {ready!r}")
        except BaseException:
            self.stop()
            raise

    def _read(self):
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)  # end of output

    def next_line(self, seconds):
        """The next line of stdout; raises when none comes within `seconds`."""
        try:
            line = self.lines.get(timeout=seconds)
        except queue.Empty:
            raise RuntimeError(f"ordo serve printed nothing for {seconds} s") from None
        if line is None:
            raise RuntimeError(f"ordo serve ended (exit {self.process.wait()}) before printing what was expected")
        return line

    def signal(self, number=signal.SIGTERM):
        if self.process.poll() is None:
            self.process.send_signal(number)

    def wait(self, seconds):
        """The exit status, or None when still running after `seconds`."""
        try:
            return self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, seconds=30.0):
        """SIGTERM, then SIGKILL past `seconds`; the exit status."""
        self.signal(signal.SIGTERM)
        status = self.wait(seconds)
        if status is None:
            self.process.kill()
            status = self.process.wait()
        if self.log:
            self.log.close()
            self.log = None
        return status

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


def free_port():
    """A loopback port free now (for a program that cannot take port 0 and report it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ordo_binary(argument=None):
    """The ordo binary: the argument, else $ORDO_CLI, else build/ordo under the source tree."""
    if argument:
        return argument
    if os.environ.get("ORDO_CLI"):
        return os.environ["ORDO_CLI"]
    return os.path.join(os.path.dirname(__file__), "..", "..", "build", "ordo")
