"""Two `ordo serve` replicas behind nginx, one stopped in the middle of a load.

    /usr/bin/python3 tests/deploy/two_replicas.py ORDO SOURCE_DIR     (CTest: deploy.nginx_two_replicas)

1. The oracle: `ordo translate --beam 4 --json` on the test's sentences.
2. Two replicas (`ordo serve --port 0 --threads 1`) and nginx on free loopback ports,
   nginx run as this user with everything under a temporary prefix (`-p DIR -c FILE`),
   with tools/deploy/nginx/ordo.conf as the repository has it: only its three ports
   are replaced (each must be found exactly once).
3. A load through nginx: REQUESTS requests, CLIENTS at a time, each a few sentences.
   Once replica A is decoding (its /metrics shows live sequences) and part of the load
   is answered, A gets SIGTERM.
4. Checks: every request answered 200 with every translation equal to the CLI's; A
   exited 0 (its drain finished); A answered at least one request after its SIGTERM
   (it was in flight); no request was answered by two replicas (nginx's log: at most
   one upstream status 200 per request); B answered after A was gone.
5. Then B stops too (exit 0), and nginx answers a request as ordo refuses one: 503 with
   Retry-After and a JSON error (tools/deploy/nginx/ordo.conf's @no_replica).
Every process is stopped at the end, whatever happens; every wait is bounded.
Python's standard library only.
"""

import concurrent.futures
import http.client
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

SOURCE = pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else pathlib.Path(__file__).resolve().parents[2])
sys.path.insert(0, str(SOURCE / "tools" / "deploy"))
from serve_process import ServeProcess, die_with_parent, free_port, ordo_binary  # noqa: E402

MODEL = SOURCE / "weights" / "sinusoidal"
CONFIG = SOURCE / "tools" / "deploy" / "nginx" / "ordo.conf"
SENTENCES = ["cats chase dogs", "the dog sees a cat", "birds sing", "the small cat sleeps", "dogs run",
             "the big dog sees a small cat.", "a cat chases the birds", "the teacher likes the dogs"]
REQUESTS = 160
CLIENTS = 12
SIGTERM_AFTER = 30      # answered requests before replica A is stopped
REQUEST_SECONDS = 120   # any one request through nginx
TOTAL_SECONDS = 240     # the whole load


def fail(message):
    print(f"two_replicas: FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def nginx_binary():
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
    if not found:
        fail("nginx is not installed (Debian's package nginx: tools/scripts/install_deps.sh --test installs it)")
    return found


def oracle(ordo):
    """The CLI's translation of every sentence, beam 4."""
    run = subprocess.run([ordo, "translate", "--model", str(MODEL), "--beam", "4", "--json", *SENTENCES],
                         capture_output=True, text=True, timeout=REQUEST_SECONDS)
    if run.returncode != 0:
        fail(f"ordo translate: exit {run.returncode}: {run.stderr.strip()}")
    return [json.loads(line)["translation"] for line in run.stdout.splitlines()]


def nginx_config(directory, port, port_a, port_b):
    """The test's nginx.conf: paths under `directory`, the repository's ordo.conf included."""
    text = CONFIG.read_text()
    for old, new in (("127.0.0.1:8081", f"127.0.0.1:{port_a}"), ("127.0.0.1:8082", f"127.0.0.1:{port_b}"),
                     ("listen 127.0.0.1:8080", f"listen 127.0.0.1:{port}")):
        if text.count(old) != 1:
            fail(f"{CONFIG}: expected '{old}' exactly once (the test replaces it), found it {text.count(old)} times")
        text = text.replace(old, new)
    (directory / "ordo.conf").write_text(text)
    # As root, nginx's workers would switch to `nobody`, who cannot enter the private
    # temporary directory: they stay this user. As anyone else the directive is not written.
    user = "user root;\n" if os.geteuid() == 0 else ""
    temp = "\n".join(f"    {kind}_temp_path {directory / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    (directory / "nginx.conf").write_text(f"""{user}daemon off;
worker_processes 1;
pid {directory / 'nginx.pid'};
error_log {directory / 'error.log'} info;
events {{ worker_connections 256; }}
http {{
{temp}
    log_format replicas '$msec|$status|$request_uri|$upstream_addr|$upstream_status';
    access_log {directory / 'access.log'} replicas;
    include {directory / 'ordo.conf'};
}}
""")
    return directory / "nginx.conf"


def request(port, path, body=None, seconds=REQUEST_SECONDS):
    """(status, parsed JSON or None) of one request on its own connection."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=seconds)
    try:
        if body is None:
            connection.request("GET", path)
        else:
            connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        response = connection.getresponse()
        data = response.read()
        try:
            return response.status, json.loads(data)
        except ValueError:
            return response.status, data.decode("utf-8", "replace")
    finally:
        connection.close()


def live_sequences(port):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", "/metrics")
        for line in connection.getresponse().read().decode().splitlines():
            if line.startswith("ordo_live_sequences{"):
                return float(line.split()[-1])
    except OSError:
        return -1
    finally:
        connection.close()
    return -1


def wait_until(condition, seconds, what):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return
        time.sleep(0.05)
    fail(f"{what} within {seconds} s")


def main():
    ordo = ordo_binary(sys.argv[1] if len(sys.argv) > 1 else None)
    nginx = nginx_binary()
    want = oracle(ordo)
    directory = pathlib.Path(tempfile.mkdtemp(prefix="ordo-nginx."))
    processes = []
    nginx_process = None
    try:
        serve_args = ["--threads", "1", "--model", str(MODEL)]
        a = ServeProcess(ordo, serve_args, log_path=directory / "replica-a.log")
        processes.append(a)
        b = ServeProcess(ordo, serve_args, log_path=directory / "replica-b.log")
        processes.append(b)
        port = free_port()
        config = nginx_config(directory, port, a.port, b.port)
        nginx_process = subprocess.Popen([nginx, "-p", str(directory), "-c", str(config), "-e",
                                          str(directory / "error.log")],
                                         stdout=subprocess.DEVNULL, stderr=open(directory / "nginx.stderr", "w"),
                                         preexec_fn=die_with_parent)

        def nginx_answers():
            if nginx_process.poll() is not None:
                fail(f"nginx exited {nginx_process.returncode}: {(directory / 'nginx.stderr').read_text()}"
                     f"{(directory / 'error.log').read_text() if (directory / 'error.log').exists() else ''}")
            try:
                return request(port, "/health", seconds=5)[0] == 200
            except OSError:
                return False
        wait_until(nginx_answers, 30, "nginx did not answer /health")

        # The load: request i translates three sentences from i on, beam 4.
        bodies = [{"text": [SENTENCES[(i + k) % len(SENTENCES)] for k in range(3)], "beam_size": 4}
                  for i in range(REQUESTS)]
        answered = 0
        answered_lock = threading.Lock()
        enough = threading.Event()

        def send(i):
            nonlocal answered
            try:
                result = request(port, "/v1/translate", bodies[i])
            except OSError as e:
                result = (None, f"no answer: {e}")
            with answered_lock:
                answered += 1
                if answered >= SIGTERM_AFTER:
                    enough.set()
            return result

        started = time.monotonic()
        pool = concurrent.futures.ThreadPoolExecutor(CLIENTS)
        try:
            futures = [pool.submit(send, i) for i in range(REQUESTS)]
            if not enough.wait(TOTAL_SECONDS):
                fail(f"only {answered} of {REQUESTS} requests answered in {TOTAL_SECONDS} s")
            wait_until(lambda: live_sequences(a.port) > 0, 60, "replica A showed no request in flight")
            stopped_at = time.time()
            a.signal(signal.SIGTERM)
            try:
                results = [f.result(timeout=max(1.0, TOTAL_SECONDS - (time.monotonic() - started))) for f in futures]
            except concurrent.futures.TimeoutError:
                fail(f"the load did not end within {TOTAL_SECONDS} s")
        finally:
            # On a failure, requests not yet sent are dropped; those in flight end when
            # nginx and the replicas are stopped below.
            pool.shutdown(wait=False, cancel_futures=True)

        status_a = a.wait(60)
        if status_a != 0:
            fail(f"replica A exited {status_a} after SIGTERM, not 0 (log: {(directory / 'replica-a.log').read_text()})")

        wrong = []
        for i, (status, answer) in enumerate(results):
            if status != 200:
                wrong.append(f"request {i}: status {status}: {answer}")
                continue
            got = [t.get("text", t.get("error")) for t in answer["translations"]]
            expected = [want[(i + k) % len(SENTENCES)] for k in range(3)]
            if got != expected:
                wrong.append(f"request {i}: {got} instead of the CLI's {expected}")
        if wrong:
            fail(f"{len(wrong)} of {REQUESTS} requests got no complete, correct answer:\n  " + "\n  ".join(wrong[:10]))

        # Every replica gone: nginx answers as ordo refuses (503, Retry-After, a JSON error).
        status_b = b.stop()
        if status_b != 0:
            fail(f"replica B exited {status_b} after SIGTERM, not 0")
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_SECONDS)
        connection.request("POST", "/v1/translate", json.dumps({"text": "cats"}), {"Content-Type": "application/json"})
        response = connection.getresponse()
        body = response.read()
        connection.close()
        if response.status != 503 or response.getheader("Retry-After") != "1":
            fail(f"with no replica left, nginx answered {response.status} (Retry-After: "
                 f"{response.getheader('Retry-After')}), not 503 with Retry-After: 1: {body[:200]!r}")
        try:
            json.loads(body)["error"]["message"]
        except (ValueError, KeyError, TypeError):
            fail(f"with no replica left, nginx's 503 is not ordo's JSON error: {body[:200]!r}")

        # nginx's log: one line per request, which replicas it tried and what they said.
        nginx_process.send_signal(signal.SIGQUIT)  # graceful: the log is complete when it exits
        nginx_process.wait(30)
        lines = (directory / "access.log").read_text().splitlines()
        a_address, b_address = f"127.0.0.1:{a.port}", f"127.0.0.1:{b.port}"
        by_a_after_sigterm = retried = by_b_after = twice = 0
        for line in lines:
            stamp, _, path, addresses, statuses = line.split("|")
            if path != "/v1/translate":
                continue
            # $upstream_addr and $upstream_status: one entry per replica tried, ", " between.
            addresses, statuses = addresses.split(", "), statuses.split(", ")
            twice += statuses.count("200") > 1
            retried += len(addresses) > 1
            after = float(stamp) > stopped_at
            by_a_after_sigterm += after and addresses[-1] == a_address and statuses[-1] == "200"
            by_b_after += after and addresses[-1] == b_address and statuses[-1] == "200"
        if twice:
            fail(f"{twice} requests were answered 200 by two replicas (nginx's log: {directory / 'access.log'})")
        if by_a_after_sigterm == 0:
            fail("replica A answered nothing after its SIGTERM: no request was in flight, so the drain was not tested")
        if by_b_after == 0:
            fail("replica B answered nothing after A was stopped")
        print(f"two_replicas: {REQUESTS} requests, {CLIENTS} at a time, all answered as the CLI does; "
              f"replica A stopped after {SIGTERM_AFTER}: it finished {by_a_after_sigterm} in flight and exited 0; "
              f"{retried} went to a second replica; {len(lines)} lines in nginx's log")
    finally:
        if nginx_process and nginx_process.poll() is None:
            nginx_process.terminate()
            try:
                nginx_process.wait(10)
            except subprocess.TimeoutExpired:
                nginx_process.kill()
                nginx_process.wait()
        for p in processes:
            p.stop()
        if os.environ.get("ORDO_KEEP_TEMP"):
            print(f"two_replicas: files kept in {directory}", file=sys.stderr)
        else:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
