#!/usr/bin/env python3
"""Real proxies in front of sluice servers: nginx (grpc_pass) and HAProxy
(h2 to h2), each started here on loopback from a generated config (no
system service), plaintext or TLS on the client side (the proxy terminates
TLS and speaks h2c to the servers).

  proxy_test.py --proxy nginx|haproxy [--tls] --greeter-server S
                --greeter-client C --interop-server IS --interop-client IC
                --certs-script scripts/gen-test-certs.sh

Checks: greeter calls and interop cases pass through the proxy; a proxy
restart in the middle of a run of sequential calls loses no call: with
wait-for-ready, every call ends OK (a call made while no proxy listens waits
for the new one instead of failing), and with fail-fast calls every call
ends OK or UNAVAILABLE, never another code. Exit 77 when the proxy is not
installed (scripts/install-deps.sh installs nginx-light and haproxy).
"""
import argparse
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77
def _die_with_parent():
    """Child side of Popen: SIGKILL when this script dies, even by SIGKILL
    (a ctest timeout), so no server or proxy outlives the test."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PDEATHSIG


def popen(args, **kw):
    return subprocess.Popen(args, preexec_fn=_die_with_parent, **kw)

INTEROP_CASES = "empty_unary,large_unary,client_streaming,server_streaming," \
                "ping_pong,empty_stream,custom_metadata,status_code_and_message"
procs = []


def log(msg):
    print(f"proxy: {msg}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, limit=30):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port} after {limit} s")


def start_server(path):
    p = popen([path, "--port", "0", "--threads", "1"],
                         stdout=subprocess.PIPE, text=True)
    procs.append(p)
    box = []

    def read():
        for line in p.stdout:
            if line.startswith("listening on ") and not box:
                box.append(int(line.split()[-1]))
    t = threading.Thread(target=read, daemon=True)
    t.start()
    end = time.monotonic() + 30
    while not box and time.monotonic() < end and p.poll() is None:
        time.sleep(0.05)
    if not box:
        raise RuntimeError(f"{path} did not say it listens")
    return box[0]


class Proxy:
    def __init__(self, kind, tls, d, routes):
        self.kind, self.tls, self.d, self.routes = kind, tls, d, routes
        self.p = None
        cfg = os.path.join(d, f"{kind}.conf")
        if kind == "nginx":
            servers = []
            for front, back in routes:
                lst = f"listen 127.0.0.1:{front} http2"
                if tls:
                    lst += (f" ssl;\n    ssl_certificate {d}/server.pem;\n"
                            f"    ssl_certificate_key {d}/server.key")
                scheme = "grpc"
                servers.append(f"""  server {{
    {lst};
    location / {{ grpc_pass {scheme}://127.0.0.1:{back};
                 grpc_read_timeout 60s; grpc_send_timeout 60s; }}
  }}""")
            text = f"""daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/nginx-error.log warn;
events {{ worker_connections 256; }}
http {{
  access_log off;
  client_body_temp_path {d}/body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
  client_max_body_size 0;
{chr(10).join(servers)}
}}
"""
            self.cmd = ["nginx", "-p", d, "-c", cfg]
        else:
            if tls:
                with open(f"{d}/haproxy.pem", "w") as f:
                    for n in ("server.pem", "server.key"):
                        f.write(open(f"{d}/{n}").read())
            parts = ["global\n  maxconn 256\n",
                     "defaults\n  mode http\n  timeout connect 5s\n"
                     "  timeout client 60s\n  timeout server 60s\n"]
            for i, (front, back) in enumerate(routes):
                bind = (f"bind 127.0.0.1:{front} ssl crt {d}/haproxy.pem "
                        "alpn h2" if tls else
                        f"bind 127.0.0.1:{front} proto h2")
                parts.append(f"frontend f{i}\n  {bind}\n  default_backend b{i}\n"
                             f"backend b{i}\n  server s{i} 127.0.0.1:{back} "
                             "proto h2\n")
            text = "".join(parts)
            self.cmd = ["haproxy", "-db", "-f", cfg]
        with open(cfg, "w") as f:
            f.write(text)

    def start(self):
        self.p = popen(self.cmd, stdout=subprocess.DEVNULL,
                                  stderr=open(f"{self.d}/{self.kind}.out", "a"))
        procs.append(self.p)
        for front, _ in self.routes:
            wait_port(front)

    def stop(self):
        """Graceful stop (nginx SIGQUIT, HAProxy SIGUSR1): streams in flight
        end, idle connections close; then the process is gone."""
        self.p.send_signal(signal.SIGQUIT if self.kind == "nginx"
                           else signal.SIGUSR1)
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(timeout=10)
            raise RuntimeError(f"{self.kind} did not stop gracefully in 30 s")


def tls_args(a, d):
    if not a.tls:
        return []
    return ["--use_tls", "--tls_ca", f"{d}/ca.pem",
            "--server_host_override", "localhost"]


def run(cmd, limit=60):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
    return r.returncode, r.stdout, r.stderr


def summary(out):
    line = [l for l in out.splitlines() if l.startswith("calls=")][-1]
    return dict(kv.split("=") for kv in line.split())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proxy", required=True, choices=["nginx", "haproxy"])
    ap.add_argument("--tls", action="store_true")
    for f in ("greeter-server", "greeter-client", "interop-server",
              "interop-client", "certs-script"):
        ap.add_argument("--" + f, required=True)
    a = ap.parse_args()
    if not shutil.which(a.proxy):
        log(f"SKIP: {a.proxy} not installed (scripts/install-deps.sh)")
        return SKIP
    d = tempfile.mkdtemp(prefix=f"sluice-{a.proxy}-")
    try:
        subprocess.run(["sh", a.certs_script, d], check=True, timeout=60)
        g_port = start_server(a.greeter_server)
        i_port = start_server(a.interop_server)
        g_front, i_front = free_port(), free_port()
        proxy = Proxy(a.proxy, a.tls, d, [(g_front, g_port), (i_front, i_port)])
        proxy.start()
        tls = tls_args(a, d)
        target = ["--target", f"localhost:{g_front}"]

        rc, out, err = run([a.greeter_client, *target, *tls, "--name", "proxy",
                            "--metadata", "x-echo-a=1", "--print-metadata"])
        assert rc == 0 and out.strip() == "Hello proxy", (rc, out, err)
        assert "trailing x-echo-a=1" in err, err
        log("greeter through the proxy: OK (metadata both ways)")

        rc, out, err = run([a.interop_client, "--server_host", "localhost",
                            "--server_port", str(i_front), "--test_case",
                            INTEROP_CASES, *tls], limit=120)
        assert rc == 0, f"interop cases failed (rc {rc}):\n{out}\n{err}"
        log(f"interop cases through the proxy: OK ({INTEROP_CASES})")

        # Restart mid-load: sequential calls while the proxy goes away and
        # a new one takes the same port.
        for mode in ("wait-for-ready", "fail-fast"):
            n = 60
            extra = ["--wait-for-ready"] if mode == "wait-for-ready" else []
            c = popen([a.greeter_client, *target, *tls, "--name",
                                  "r", "--count", str(n), "--timeout-ms",
                                  "20000", "--linger-ms", "50", *extra],
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            procs.append(c)
            oks, errs = [0], []

            def count():
                for line in c.stdout:
                    if line.startswith("Hello "):
                        oks[0] += 1
                    elif line.startswith("calls="):
                        oks.append(line)

            def errors():
                errs.extend(c.stderr)
            t = threading.Thread(target=count, daemon=True)
            t.start()
            te = threading.Thread(target=errors, daemon=True)
            te.start()
            end = time.monotonic() + 60
            while oks[0] < 10 and time.monotonic() < end and c.poll() is None:
                time.sleep(0.02)
            assert oks[0] >= 10, f"{mode}: only {oks[0]} calls before restart"
            proxy.stop()
            time.sleep(0.3)  # calls go on while nothing listens
            proxy.start()
            c.wait(timeout=120)
            t.join(timeout=10)
            te.join(timeout=10)
            err = "".join(errs)
            s = dict(kv.split("=") for kv in oks[-1].split()) \
                if isinstance(oks[-1], str) else {}
            log(f"{mode} restart: {oks[-1].strip() if s else 'no summary'}")
            texts = sorted(set(l.split(":", 1)[1].strip()
                               for l in err.splitlines() if ":" in l))
            for tx in texts:
                log(f"  failure text: {tx}")
            # Failed before being sent: the only failure allowed is the
            # refused connection while no proxy listened. A call the proxy
            # took and then dropped would fail with another text (connection
            # lost, stream reset): that is a lost call.
            unsent = [tx for tx in texts if "failed to connect" in tx]
            assert unsent == texts, f"{mode}: calls failed after being " \
                f"sent: {texts}"
            assert s.get("calls") == str(n), (s, err)
            others = {k: v for k, v in s.items()
                      if k not in ("calls", "OK", "UNAVAILABLE")}
            assert not others, f"{mode}: codes other than OK/UNAVAILABLE: " \
                f"{others}\n{err}"
            if mode == "wait-for-ready":
                assert s.get("OK") == str(n), f"{mode}: {s}\n{err}"
                assert c.returncode == 0
    except (AssertionError, RuntimeError, subprocess.SubprocessError) as e:
        log(f"FAIL: {e}")
        for n in ("nginx-error.log", f"{a.proxy}.out"):
            if os.path.exists(f"{d}/{n}"):
                log(f"{n}:\n" + open(f"{d}/{n}").read()[-3000:])
        return 1
    finally:
        # nginx runs as one process (master_process off), so nothing of it
        # outlives the pid we hold; SIGTERM first, SIGKILL if it lingers.
        for p in procs:
            if p.poll() is None:
                p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        shutil.rmtree(d, ignore_errors=True)
    log("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
