#!/usr/bin/env python3
"""Broken networks: a sluice client and server in two Linux network
namespaces joined by a veth pair, with faults made inside the server's
namespace (nftables rules; a tc tbf qdisc for rate limits).

  netns_test.py --case blackhole|loss|tbf|keepalive \
                --server GREETER_SERVER --client GREETER_CLIENT

Every case creates its own namespaces (names carry the pid, so cases run in
parallel) and deletes them, with the processes it started, on any exit.
Exit 77 (skipped) when namespaces cannot be made here (not root, no
CAP_SYS_ADMIN, no `ip`/`nft`/`tc`). Checks are on counts and states; the only
time checks are a lower bound that physics guarantees (a call cannot fail
with DEADLINE_EXCEEDED before its deadline, bytes cannot pass a rate limiter
faster than its rate) and generous upper bounds (several times the expected
value) that only catch a hang.
"""
import argparse
import ctypes
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time

SKIP = 77
def _die_with_parent():
    """Child side of Popen: SIGKILL when this script dies, even by SIGKILL
    (a ctest timeout), so no server or proxy outlives the test."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PDEATHSIG


def popen(args, **kw):
    return subprocess.Popen(args, preexec_fn=_die_with_parent, **kw)

PID = os.getpid()
NS_S, NS_C = f"slns{PID}s", f"slns{PID}c"
VETH_S, VETH_C = f"sv{PID}"[:15], f"cv{PID}"[:15]
ADDR_S, ADDR_C = "10.231.0.1", "10.231.0.2"
procs = []


def log(msg):
    print(f"netns: {msg}", flush=True)


def sh(*args, check=True, ns=None):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r


def cleanup():
    for p in procs:
        if p.poll() is None:
            p.kill()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    for ns in (NS_S, NS_C):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True,
                       timeout=30)


def setup():
    for tool in ("ip", "nft", "tc"):
        if not shutil.which(tool):
            log(f"SKIP: `{tool}` not found (scripts/install-deps.sh installs "
                "iproute2 and nftables)")
            sys.exit(SKIP)
    r = subprocess.run(["ip", "netns", "add", NS_S], capture_output=True,
                       text=True, timeout=30)
    if r.returncode != 0:
        log(f"SKIP: `ip netns add` not permitted here ({r.stderr.strip()}); "
            "these tests need root")
        sys.exit(SKIP)
    sh("ip", "netns", "add", NS_C)
    sh("ip", "link", "add", VETH_S, "type", "veth", "peer", "name", VETH_C)
    sh("ip", "link", "set", VETH_S, "netns", NS_S)
    sh("ip", "link", "set", VETH_C, "netns", NS_C)
    for ns, dev, addr in ((NS_S, VETH_S, ADDR_S), (NS_C, VETH_C, ADDR_C)):
        sh("ip", "addr", "add", f"{addr}/24", "dev", dev, ns=ns)
        sh("ip", "link", "set", dev, "up", ns=ns)
        sh("ip", "link", "set", "lo", "up", ns=ns)
    # The rules live in the server's namespace; both chains start empty.
    r = sh("nft", "add table inet sltest", ns=NS_S, check=False)
    if r.returncode != 0:
        log(f"SKIP: nftables not usable in this kernel ({r.stderr.strip()})")
        cleanup()
        sys.exit(SKIP)
    for chain, hook in (("in", "input"), ("out", "output")):
        sh("nft", f"add chain inet sltest {chain} "
           f"{{ type filter hook {hook} priority 0; policy accept; }}", ns=NS_S)


def nft_rules(rule):
    """Puts `rule` (e.g. "drop") into both chains, after a rule counting
    every packet, or empties them (None)."""
    for chain in ("in", "out"):
        sh("nft", f"flush chain inet sltest {chain}", ns=NS_S)
        if rule:
            sh("nft", f"add rule inet sltest {chain} counter", ns=NS_S)
            sh("nft", f"add rule inet sltest {chain} {rule}", ns=NS_S)


def nft_counts():
    """(packets seen, packets the second rule matched), both chains."""
    seen = hit = 0
    for chain in ("in", "out"):
        out = sh("nft", f"list chain inet sltest {chain}", ns=NS_S).stdout
        counts = [int(ln.split("packets")[1].split()[0])
                  for ln in out.splitlines() if "packets" in ln]
        seen, hit = seen + counts[0], hit + counts[1]
    return seen, hit


def reader(stream, tag, q):
    for line in stream:
        q.put((time.monotonic(), tag, line.rstrip("\n")))
    q.put((time.monotonic(), tag, None))


def start_server(path, extra=()):
    p = popen(["ip", "netns", "exec", NS_S, path, "--host", ADDR_S,
                          "--port", "0", "--threads", "1", *extra],
                         stdout=subprocess.PIPE, text=True)
    procs.append(p)
    q = queue.Queue()
    threading.Thread(target=reader, args=(p.stdout, "out", q),
                     daemon=True).start()
    end = time.monotonic() + 30
    while time.monotonic() < end:
        try:
            _, _, line = q.get(timeout=1)
        except queue.Empty:
            continue
        if line is None:
            break
        if line.startswith("listening on "):
            return int(line.split()[-1])
    raise RuntimeError("the server did not say it listens")


def start_client(path, port, args):
    p = popen(["ip", "netns", "exec", NS_C, path, "--target",
                          f"{ADDR_S}:{port}", *args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    procs.append(p)
    q = queue.Queue()
    threading.Thread(target=reader, args=(p.stdout, "out", q),
                     daemon=True).start()
    threading.Thread(target=reader, args=(p.stderr, "err", q),
                     daemon=True).start()
    return p, q


class Results:
    """Call outcomes of one greeter_client --count run, as they arrive."""

    def __init__(self, q):
        self.q, self.events, self.eof = q, [], 0

    def wait(self, pred, limit, what):
        end = time.monotonic() + limit
        while not pred():
            left = end - time.monotonic()
            if left <= 0 or self.eof == 2:
                raise AssertionError(f"timed out ({limit} s) waiting for "
                                     f"{what}; outcomes: {self.codes()}")
            try:
                t, tag, line = self.q.get(timeout=min(left, 1))
            except queue.Empty:
                continue
            if line is None:
                self.eof += 1
            elif tag == "out" and line.startswith("Hello "):
                self.events.append((t, "OK"))
            elif tag == "err" and ":" in line:
                self.events.append((t, line.split(":")[0]))
                log(f"client: {line}")

    def codes(self):
        return [c for _, c in self.events]

    def count(self, code):
        return self.codes().count(code)


def case_blackhole(a):
    port = start_server(a.server)
    p, q = start_client(a.client, port, ["--name", "bh", "--count", "1000",
                                         "--timeout-ms", "2000",
                                         "--linger-ms", "100"])
    r = Results(q)
    r.wait(lambda: r.count("OK") >= 3, 30, "3 calls OK before the blackhole")
    # A call in the middle when the blackhole begins: the server answers it
    # only after 3 s, by then nothing gets through; its deadline is 5 s.
    # (Whether its request got through before the blackhole or not, it must
    # fail DEADLINE_EXCEEDED, and not before its deadline.)
    p2, q2 = start_client(a.client, port, ["--name", "sleep:3000",
                                           "--timeout-ms", "5000"])
    r2 = Results(q2)
    t_mid = time.monotonic()
    time.sleep(0.5)
    nft_rules("drop")
    t_on = time.monotonic()
    log("blackhole on")
    r.wait(lambda: r.count("DEADLINE_EXCEEDED") >= 3, 60,
           "3 calls failing DEADLINE_EXCEEDED under the blackhole")
    bad = [c for c in r.codes() if c not in ("OK", "DEADLINE_EXCEEDED")]
    assert not bad, f"unexpected outcomes under the blackhole: {bad}"
    de = [t for t, c in r.events if c == "DEADLINE_EXCEEDED"]
    # A call fails at its deadline, not before: consecutive failures are at
    # least a deadline (2 s, less timer slack) apart.
    gaps = [b - a_ for a_, b in zip(de, de[1:])]
    assert all(g >= 1.8 for g in gaps), f"failures too close: {gaps}"
    r2.wait(lambda: r2.eof == 2, 60, "the call in the middle to end")
    p2.wait(timeout=10)
    assert r2.codes() == ["DEADLINE_EXCEEDED"], r2.codes()
    mid = r2.events[0][0] - t_mid
    assert mid >= 4.5, f"the call in the middle failed after {mid:.1f} s"
    log(f"the call in the middle: DEADLINE_EXCEEDED after {mid:.1f} s")
    nft_rules(None)
    n_ok = r.count("OK")
    log("blackhole off")
    # TCP retransmits (backed off while the blackhole lasted) bring the
    # connection back; new calls on the same channel succeed again.
    r.wait(lambda: r.count("OK") >= n_ok + 3, 60,
           "3 calls OK after the blackhole is removed")
    log(f"outcomes: {r.codes()} (blackhole {time.monotonic() - t_on:.1f} s)")


def case_keepalive(a):
    port = start_server(a.server, ["--keepalive-min-time-ms", "500",
                                   "--max-ping-strikes", "0"])
    p, q = start_client(a.client, port, ["--name", "ka", "--count", "1000",
                                         "--keepalive-time-ms", "1000",
                                         "--keepalive-timeout-ms", "1000",
                                         "--linger-ms", "100"])
    r = Results(q)
    r.wait(lambda: r.count("OK") >= 3, 30, "3 calls OK before the blackhole")
    nft_rules("drop")
    t_on = time.monotonic()
    log("blackhole on (calls have no deadline)")
    r.wait(lambda: r.count("UNAVAILABLE") >= 1, 30,
           "a call without deadline failing UNAVAILABLE by keepalive")
    took = r.events[-1][0] - t_on
    # keepalive time + timeout is 2 s; 30 s above only catches a hang.
    log(f"UNAVAILABLE {took:.1f} s after the blackhole began")
    bad = [c for c in r.codes() if c not in ("OK", "UNAVAILABLE")]
    assert not bad, f"unexpected outcomes: {bad}"
    nft_rules(None)
    n_ok = r.count("OK")
    log("blackhole off")
    r.wait(lambda: r.count("OK") >= n_ok + 3, 60,
           "3 calls OK after the blackhole is removed (a new connection)")
    log(f"outcomes: {r.codes()}")


def run_to_end(p, r, limit, what):
    r.wait(lambda: r.eof == 2, limit, what)
    p.wait(timeout=10)


def case_loss(a):
    port = start_server(a.server)
    nft_rules("numgen random mod 100 < 10 counter drop")
    log("10 % random loss each way")
    n = 40  # ~250 packets: P(none dropped) = 0.9^250, never in practice
    p, q = start_client(a.client, port, ["--name", "x" * 20000, "--count",
                                         str(n), "--timeout-ms", "60000"])
    r = Results(q)
    run_to_end(p, r, 240, "the calls under random loss")
    seen, dropped = nft_counts()
    log(f"outcomes: OK={r.count('OK')} of {n}; {dropped} of {seen} packets "
        "dropped")
    assert r.count("OK") == n and p.returncode == 0, r.codes()
    assert dropped > 0, "the loss rule dropped nothing"


def case_tbf(a):
    port = start_server(a.server)
    rate_bps = 2_000_000
    for ns, dev in ((NS_S, VETH_S), (NS_C, VETH_C)):
        r = sh("tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate",
               f"{rate_bps // 1000}kbit", "burst", "16kb", "latency",
               "500ms", ns=ns, check=False)
        if r.returncode != 0:
            log(f"SKIP: no tbf qdisc in this kernel ({r.stderr.strip()})")
            cleanup()
            sys.exit(SKIP)
    n, size = 10, 50000
    p, q = start_client(a.client, port, ["--name", "y" * size, "--count",
                                         str(n), "--timeout-ms", "120000"])
    t0 = time.monotonic()
    r = Results(q)
    run_to_end(p, r, 240, "the calls under the rate limit")
    took = time.monotonic() - t0
    floor = n * size * 8 / rate_bps  # each direction carries n * size bytes
    log(f"{n} calls of {size} bytes each way in {took:.2f} s "
        f"(the rate allows no less than {floor:.2f} s)")
    assert r.count("OK") == n and p.returncode == 0, r.codes()
    assert took >= floor * 0.5, f"faster than the rate limit: {took:.2f} s"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", required=True,
                    choices=["blackhole", "loss", "tbf", "keepalive"])
    ap.add_argument("--server", required=True)
    ap.add_argument("--client", required=True)
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        setup()
        globals()["case_" + a.case](a)
    except (AssertionError, RuntimeError, subprocess.TimeoutExpired) as e:
        log(f"FAIL: {e}")
        return 1
    finally:
        cleanup()
    log("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
