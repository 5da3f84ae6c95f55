#!/usr/bin/env python3
"""Disaster-recovery drill: lose a region, fail over to its mirror, fail back.

Usage (as root: it makes network namespaces):

    sudo python3 tests/interop/dr_drill.py --delay-ms 30 --seconds 120
    sudo python3 tests/interop/dr_drill.py --short      # the CI form (run.sh)

Options: --weir PATH (default: $WEIR_BIN, else target/release/weir),
--delay-ms N (delay each way between the regions, 30), --seconds N
(traffic before the disaster, 60; 10 with --short), --rate N (records/s of
the idempotent producer, 2000; 500 with --short; the transactional producer
writes a tenth of that), --report PATH (the figures as JSON), --short, --keep
(leave the data directory and print its path).

Two regions, A and B, are network namespaces, each holding a three-node weir
cluster on one address (ports 9092/9192/9292, controllers 9093/9193/9293,
HTTP 9644/9744/9844), joined by a veth pair with a `tc netem` delay on both
ends, so each way. On a kernel without netem (CONFIG_NET_SCH_NETEM) each
region instead holds every packet from the other in a netfilter queue
(NFQUEUE, served by this script) for the same time; the output says which.
Every client runs in the namespace of the region it talks to. Brokers keep
their data under a temporary directory, which outlives their SIGKILL.

1. On A: topics `orders` (6 partitions) and `payments` (3), replication
   factor 3, min.insync.replicas=2. On B: mirror `dr` of both, with the
   offsets of the groups `drill-.*`.
2. In A: an idempotent producer (acks=all) to `orders`, a transactional
   producer to `payments`, a read_committed consumer in group `drill-orders`
   committing every second; each logs what it did as JSON lines.
3. After the traffic, every broker of A is killed with SIGKILL at once.
   On B: `weir mirror failover dr`; the same clients start again in B.
4. A is restarted from its data directories; the drill measures RPO
   (records acknowledged on A missing on B), the records the consumer read
   twice, RTO (kill to the first acknowledged produce and to the first
   consumed record on B), and checks the logs below the failover cut.
5. Failback: on A, mirror `back` of B's topics; A's logs must become B's,
   record for record; `weir mirror failover back` makes A writable again.

Each check prints `PASS: dr-drill <what>` or `FAIL: dr-drill <what>: reason`;
the exit status is 1 if any failed. RPO, duplicates and RTO are figures, not
checks: mirroring is asynchronous (RPO fails only past every record
acknowledged in the last 10 s before the kill, plus a margin: the mirror was
not keeping up). The failover is started the moment A dies, so RTO here
leaves out the time to notice the loss and decide; the consumer's includes
the group's initial rebalance delay (3 s). A failback that the binary
cannot do (A's mirror never takes its topics) fails with "failback: not
supported by this binary". A summary table ends the output; --report
writes the figures and the time of each phase as JSON. Everything started
is stopped and the namespaces removed on exit, Ctrl-C and failure included;
a drill killed outright has its namespaces and processes removed by the
next one.
"""

import argparse
import collections
import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import packet_delay  # noqa: E402  (next to this script)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

TOPICS = {"orders": 6, "payments": 3}
GROUP = "drill-orders"
TXN_SIZE = 5  # records per transaction
NODES = (1, 2, 3)
# Each region's brokers share its one address, on the ports of README's
# three-node example.
KAFKA_PORT = {1: 9092, 2: 9192, 3: 9292}
CONTROLLER_PORT = {1: 9093, 2: 9193, 3: 9293}
HTTP_PORT = {1: 9644, 2: 9744, 3: 9844}
REGION_IP = {"a": "10.201.0.1", "b": "10.201.0.2"}
# Mirror topic states that mean "cut and writable"; the HTTP answer names
# it `failed-over`.
STOPPED_STATES = ("failed-over",)
# The netfilter queue of the packet delay, in each region's namespace.
DELAY_QUEUE = 7201
# How long A's mirror may take to claim its existing topics before the
# drill concludes the binary cannot fail back.
FAILBACK_CLAIM_S = 30


# ---------------------------------------------------------------- roles
#
# The clients are this script again, started with `--role KIND JSON` inside
# a region's namespace; each writes JSON lines of its events to a file.


def now():
    return time.time()


class Stop:
    """Set by SIGTERM/SIGINT: the client's loop ends at its next turn."""

    def __init__(self):
        self.requested = False
        signal.signal(signal.SIGTERM, self._set)
        signal.signal(signal.SIGINT, self._set)

    def _set(self, _signum, _frame):
        self.requested = True


def event_log(path):
    # Line-buffered: every event is written at once, so a client killed
    # with SIGKILL loses at most a line in progress.
    return open(path, "a", buffering=1, encoding="utf-8")


def finish(out, code=0):
    out.flush()
    out.close()
    # librdkafka's destructors may wait for brokers that are gone.
    os._exit(code)


def role_idempotent(cfg):
    from confluent_kafka import KafkaException, Producer

    out = event_log(cfg["out"])
    stop = Stop()
    producer = Producer(
        {
            "bootstrap.servers": cfg["bootstrap"],
            "client.id": f"drill-idem-{cfg['region']}",
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 60000,
        }
    )
    out.write(json.dumps({"ev": "start", "t": now()}) + "\n")
    errors = [0]

    def delivered(ident, err, msg):
        if err is None:
            out.write(json.dumps({"ev": "ack", "t": now(), "p": msg.partition(), "o": msg.offset(), "id": ident}) + "\n")
        else:
            errors[0] += 1
            if errors[0] <= 20:
                out.write(json.dumps({"ev": "nack", "t": now(), "id": ident, "err": str(err)}) + "\n")

    rate = cfg["rate"]
    started = time.monotonic()
    seq = 0
    while not stop.requested:
        due = int((time.monotonic() - started) * rate)
        while seq < due and not stop.requested:
            ident = f"idem-{cfg['region']}-{seq}"
            value = json.dumps({"id": ident, "customer": seq % 97, "amount": seq % 1000}).encode()
            try:
                producer.produce(
                    cfg["topic"],
                    key=f"customer-{seq % 97}".encode(),
                    value=value,
                    headers=[("drill-id", ident.encode()), ("region", cfg["region"].encode())],
                    on_delivery=lambda err, msg, ident=ident: delivered(ident, err, msg),
                )
            except BufferError:
                break
            except KafkaException as e:
                out.write(json.dumps({"ev": "error", "t": now(), "err": str(e)}) + "\n")
                break
            seq += 1
        producer.poll(0.005)
    if cfg.get("drain"):
        left = producer.flush(30)
        out.write(json.dumps({"ev": "end", "t": now(), "sent": seq, "undelivered": left}) + "\n")
    finish(out)


def role_transactional(cfg):
    from confluent_kafka import KafkaException, Producer

    out = event_log(cfg["out"])
    stop = Stop()
    producer = Producer(
        {
            "bootstrap.servers": cfg["bootstrap"],
            "client.id": f"drill-txn-{cfg['region']}",
            "transactional.id": "drill-payments",
            "acks": "all",
            "linger.ms": 5,
        }
    )
    out.write(json.dumps({"ev": "start", "t": now()}) + "\n")
    while not stop.requested:
        try:
            producer.init_transactions(30)
            break
        except KafkaException as e:
            out.write(json.dumps({"ev": "error", "t": now(), "err": f"init_transactions: {e}"}) + "\n")
            if e.args[0].fatal():
                finish(out, 1)
            time.sleep(0.5)
    rate = cfg["rate"]
    started = time.monotonic()
    txn = 0
    while not stop.requested:
        ids = [f"txn-{cfg['region']}-{txn}-{i}" for i in range(TXN_SIZE)]
        try:
            producer.begin_transaction()
            for i, ident in enumerate(ids):
                producer.produce(
                    cfg["topic"],
                    key=f"account-{(txn + i) % 31}".encode(),
                    value=json.dumps({"id": ident, "txn": txn}).encode(),
                    headers=[("drill-id", ident.encode()), ("region", cfg["region"].encode())],
                )
            for attempt in range(3):
                try:
                    producer.commit_transaction(30)
                    break
                except KafkaException as e:
                    # A commit that timed out may be retried: it may
                    # have gone through.
                    if not e.args[0].retriable() or attempt == 2:
                        raise
            out.write(json.dumps({"ev": "commit", "t": now(), "txn": txn, "ids": ids}) + "\n")
        except KafkaException as e:
            error = e.args[0]
            out.write(json.dumps({"ev": "error", "t": now(), "txn": txn, "err": str(e)}) + "\n")
            if error.fatal():
                finish(out, 1)
            with contextlib.suppress(KafkaException):
                producer.abort_transaction(30)
        txn += 1
        # Paced so that the records come at `rate` per second on average.
        ahead = txn * TXN_SIZE / rate - (time.monotonic() - started)
        if ahead > 0:
            time.sleep(ahead)
    out.write(json.dumps({"ev": "end", "t": now(), "transactions": txn}) + "\n")
    finish(out)


def role_consumer(cfg):
    from confluent_kafka import Consumer, KafkaException

    out = event_log(cfg["out"])
    stop = Stop()
    consumer = Consumer(
        {
            "bootstrap.servers": cfg["bootstrap"],
            "client.id": f"drill-consumer-{cfg['region']}",
            "group.id": GROUP,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )

    def assigned(c, partitions):
        # Where the group starts: the committed offsets, copied by the
        # mirror when this runs on the destination.
        try:
            committed = c.committed(partitions, timeout=15)
            offsets = {tp.partition: tp.offset for tp in committed}
        except KafkaException as e:
            offsets = {"error": str(e)}
        out.write(json.dumps({"ev": "assign", "t": now(), "committed": offsets}) + "\n")

    consumer.subscribe([cfg["topic"]], on_assign=assigned)
    out.write(json.dumps({"ev": "start", "t": now()}) + "\n")
    last_commit = time.monotonic()
    pending = False

    def commit():
        try:
            done = consumer.commit(asynchronous=False)
            out.write(json.dumps({"ev": "commit", "t": now(), "offsets": {tp.partition: tp.offset for tp in done or []}}) + "\n")
        except KafkaException as e:
            out.write(json.dumps({"ev": "commit-error", "t": now(), "err": str(e)}) + "\n")

    while not stop.requested:
        for msg in consumer.consume(500, 0.2):
            if msg.error():
                continue
            ident = dict(msg.headers() or []).get("drill-id", b"").decode()
            out.write(json.dumps({"ev": "rec", "t": now(), "p": msg.partition(), "o": msg.offset(), "id": ident}) + "\n")
            pending = True
        if pending and time.monotonic() - last_commit >= 1.0:
            commit()
            pending = False
            last_commit = time.monotonic()
    if cfg.get("drain"):
        if pending:
            commit()
        consumer.close()
    out.write(json.dumps({"ev": "end", "t": now()}) + "\n")
    finish(out)


def role_dump(cfg):
    """Every record of the topics, read to their end, one JSON line each."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    out = event_log(cfg["out"])
    consumer = Consumer(
        {
            "bootstrap.servers": cfg["bootstrap"],
            "group.id": f"drill-dump-{os.getpid()}",
            "enable.auto.commit": False,
            "isolation.level": cfg["isolation"],
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    deadline = time.monotonic() + cfg.get("timeout", 120)
    partitions = []
    while not partitions and time.monotonic() < deadline:
        metadata = consumer.list_topics(timeout=10)
        found = {t: metadata.topics[t] for t in cfg["topics"] if t in metadata.topics and not metadata.topics[t].error}
        if len(found) == len(cfg["topics"]):
            partitions = [(t, p) for t, tm in found.items() for p in sorted(tm.partitions)]
        else:
            time.sleep(0.5)
    consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in partitions])
    remaining = set(partitions)
    count = 0
    while remaining and time.monotonic() < deadline:
        for msg in consumer.consume(1000, 1.0):
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    remaining.discard((msg.topic(), msg.partition()))
                continue
            ts_type, ts = msg.timestamp()
            headers = [[k, (v or b"").hex()] for k, v in (msg.headers() or [])]
            ident = dict(msg.headers() or []).get("drill-id", b"").decode()
            key = msg.key()
            out.write(
                json.dumps(
                    {
                        "topic": msg.topic(),
                        "p": msg.partition(),
                        "o": msg.offset(),
                        "k": key.hex() if key is not None else None,
                        "v": (msg.value() or b"").hex(),
                        "h": headers,
                        "ts": [ts_type, ts],
                        "id": ident,
                    }
                )
                + "\n"
            )
            count += 1
    ends = {}
    for t, p in partitions:
        low, high = consumer.get_watermark_offsets(TopicPartition(t, p), timeout=10, cached=False)
        ends[f"{t}/{p}"] = high
    out.write(
        json.dumps(
            {"ev": "done", "records": count, "partitions": len(partitions), "unfinished": sorted(f"{t}/{p}" for t, p in remaining), "ends": ends}
        )
        + "\n"
    )
    finish(out, 0 if not remaining and partitions else 1)


def role_leaders(cfg):
    """Exits 0 once every partition of the topics has a leader that answers
    (ListOffsets): the cluster serves them, whatever its metadata said
    before."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": cfg["bootstrap"], "group.id": f"drill-probe-{os.getpid()}"})
    deadline = time.monotonic() + cfg.get("timeout", 90)
    why = "no answer"
    while time.monotonic() < deadline:
        try:
            metadata = consumer.list_topics(timeout=5)
            partitions = [(t, p) for t in cfg["topics"] if t in metadata.topics for p, pm in metadata.topics[t].partitions.items() if pm.leader >= 0]
            if len(partitions) == cfg["partitions"]:
                for t, p in partitions:
                    consumer.get_watermark_offsets(TopicPartition(t, p), timeout=5, cached=False)
                os._exit(0)
            why = f"{len(partitions)} of {cfg['partitions']} partitions with a leader"
        except KafkaException as e:
            why = str(e)
        time.sleep(0.3)
    print(why, flush=True)
    os._exit(1)


def role_produce_one(cfg):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cfg["bootstrap"], "acks": "all", "enable.idempotence": True, "message.timeout.ms": 30000})
    outcome = {}

    def delivered(err, msg):
        outcome["err"] = err
        outcome["msg"] = msg

    producer.produce(cfg["topic"], key=b"failback", value=cfg["value"].encode(), on_delivery=delivered)
    producer.flush(40)
    err = outcome.get("err", "no delivery report within 40 s")
    if err is None:
        print(json.dumps({"partition": outcome["msg"].partition(), "offset": outcome["msg"].offset()}))
        os._exit(0)
    print(json.dumps({"error": str(err)}))
    os._exit(1)


def role_delayer(cfg):
    packet_delay.serve(cfg["queue"], cfg["delay_ms"])


ROLES = {
    "idempotent": role_idempotent,
    "transactional": role_transactional,
    "consumer": role_consumer,
    "dump": role_dump,
    "produce-one": role_produce_one,
    "leaders": role_leaders,
    "delayer": role_delayer,
}


# ---------------------------------------------------------------- the drill


class DrillError(Exception):
    """Stops the drill: a step it cannot go on without failed."""


_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


@contextlib.contextmanager
def in_netns(name):
    """This thread in namespace `name` for a moment: sockets opened inside
    stay there, so the drill reads the brokers' HTTP ports without a
    process per request."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/var/run/netns/{name}", os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {name}")
        yield
    finally:
        if _libc.setns(home, CLONE_NEWNET) != 0:
            # Nothing after this could be trusted to run where it should.
            os.write(2, b"dr_drill: cannot return to the original network namespace\n")
            os._exit(3)
        os.close(target)
        os.close(home)


def run(cmd, check=True, timeout=60):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise DrillError(f"{' '.join(cmd)}: {(proc.stderr or proc.stdout).strip()[-400:]}")
    return proc


def read_events(path):
    """The JSON lines of a client's log; a torn last line is skipped."""
    events = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.endswith("\n"):
                    with contextlib.suppress(ValueError):
                        events.append(json.loads(line))
    except FileNotFoundError:
        pass
    return events


def tail(path, lines=8):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except FileNotFoundError:
        return ""


class Drill:
    def __init__(self, args):
        self.args = args
        self.weir = args.weir
        self.pid = os.getpid()
        self.ns = {r: f"wdr-{self.pid}-{r}" for r in ("a", "b")}
        self.work = tempfile.mkdtemp(prefix="weir-dr-drill.", dir=os.environ.get("TMPDIR", "/tmp"))
        self.procs = []  # (label, Popen): everything this drill started
        self.brokers = {"a": {}, "b": {}}
        self.clients = {}
        self.delayers = {}
        self.passed = 0
        self.failed = []
        self.phases = collections.OrderedDict()
        self.figures = collections.OrderedDict()
        self.namespaces_made = []
        self.t_start = now()

    # ------------------------------------------------------------ output

    def note(self, text):
        print(f"NOTE: {text}", flush=True)

    def ok(self, what, detail=""):
        self.passed += 1
        print(f"PASS: dr-drill {what}" + (f" ({detail})" if detail else ""), flush=True)

    def fail(self, what, reason):
        self.failed.append(f"{what}: {reason}")
        print(f"FAIL: dr-drill {what}: {reason}", flush=True)

    @contextlib.contextmanager
    def phase(self, name):
        started = now()
        try:
            yield
        finally:
            self.phases[name] = round(now() - started, 2)

    # ------------------------------------------------------------ network

    def remove_stale(self):
        """Namespaces of drills whose process is gone (killed before it
        could clean up)."""
        listing = run(["ip", "netns", "list"], check=False).stdout
        for line in listing.splitlines():
            name = line.split()[0] if line.split() else ""
            parts = name.split("-")
            if len(parts) == 3 and parts[0] == "wdr" and parts[1].isdigit() and not os.path.exists(f"/proc/{parts[1]}"):
                # What that drill started still runs in there: brokers,
                # clients, the delay queue.
                for pid in run(["ip", "netns", "pids", name], check=False).stdout.split():
                    with contextlib.suppress(ProcessLookupError, ValueError):
                        os.kill(int(pid), signal.SIGKILL)
                run(["ip", "netns", "del", name], check=False)

    def make_network(self):
        self.remove_stale()
        a, b = self.ns["a"], self.ns["b"]
        for ns in (a, b):
            run(["ip", "netns", "add", ns])
            self.namespaces_made.append(ns)
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
        # Made inside A with its peer moved to B at once: no interface
        # name is ever taken in this machine's own namespace.
        run(["ip", "-n", a, "link", "add", "region-b", "type", "veth", "peer", "name", "region-a", "netns", b])
        for ns, dev, ip in ((a, "region-b", REGION_IP["a"]), (b, "region-a", REGION_IP["b"])):
            run(["ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", dev])
            run(["ip", "-n", ns, "link", "set", dev, "up"])
        delay = self.args.delay_ms
        how = "no delay"
        if delay > 0:
            netem = [
                run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "netem", "delay", f"{delay}ms", "limit", "100000"], check=False)
                for ns, dev in ((a, "region-b"), (b, "region-a"))
            ]
            if all(p.returncode == 0 for p in netem):
                how = f"tc netem delay {delay} ms on each end of the veth pair"
            elif any("qdisc kind is unknown" in p.stderr for p in netem):
                if shutil.which("iptables") is None:
                    raise DrillError("this kernel has no netem qdisc, and the iptables command for the drill's own delay is missing")
                self.delay_with_queues(delay)
                how = (
                    f"this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM), so each region holds every packet from the other "
                    f"for {delay} ms in an NFQUEUE before taking it in"
                )
            else:
                raise DrillError(f"tc netem: {' '.join(p.stderr.strip() for p in netem)}")
        rtt = self.measure_rtt()
        self.note(
            f"regions A ({REGION_IP['a']}, namespace {a}) and B ({REGION_IP['b']}, namespace {b}) joined by a veth pair; "
            f"delay {delay} ms each way ({2 * delay} ms round trip; measured {rtt}): {how}"
        )
        self.figures["delay"] = {"ms_each_way": delay, "how": how, "measured_rtt": rtt}

    def delay_with_queues(self, delay):
        """The netem delay without netem: in each region, a queue holding
        every packet from the other region for `delay` ms. Done where
        packets come in, not where they leave: a packet held on its way
        out still counts against its TCP socket's small-queue budget, which
        would cap a connection at a few hundred KB/s."""
        for region, other in (("a", "b"), ("b", "a")):
            out = os.path.join(self.work, f"delay-{region}.out")
            with open(out, "w") as f:
                proc = self.spawn(
                    f"delay-{region}", region, [sys.executable, os.path.abspath(__file__), "--role", "delayer", json.dumps({"queue": DELAY_QUEUE, "delay_ms": delay})], f, subprocess.STDOUT
                )
            self.delayers[region] = proc
            deadline = time.monotonic() + 10
            while "bound" not in tail(out):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise DrillError(f"the packet delay queue of region {region.upper()} did not start: {tail(out).strip()}")
                time.sleep(0.05)
            run(["ip", "netns", "exec", self.ns[region], "iptables", "-A", "INPUT", "-s", REGION_IP[other], "-j", "NFQUEUE", "--queue-num", str(DELAY_QUEUE)])

    def check_delayers(self):
        for region, proc in self.delayers.items():
            if proc.poll() is not None:
                raise DrillError(f"the packet delay queue of region {region.upper()} exited ({proc.returncode}): {tail(os.path.join(self.work, f'delay-{region}.out')).strip()}")

    def measure_rtt(self):
        """A connection attempt from A to a closed port of B: refused one
        round trip later."""
        import socket

        best = None
        with in_netns(self.ns["a"]):
            for _ in range(3):
                s = socket.socket()
                s.settimeout(5)
                started = time.monotonic()
                try:
                    s.connect((REGION_IP["b"], 1))
                except ConnectionRefusedError:
                    elapsed = (time.monotonic() - started) * 1000
                    best = elapsed if best is None else min(best, elapsed)
                except OSError:
                    pass
                finally:
                    s.close()
        return f"{best:.1f} ms" if best is not None else "unknown"

    def teardown(self):
        for label, proc in reversed(self.procs):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
        for label, proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        for ns in self.namespaces_made:
            run(["ip", "netns", "del", ns], check=False)
        if self.args.keep:
            print(f"NOTE: data directory kept: {self.work}", flush=True)
        else:
            shutil.rmtree(self.work, ignore_errors=True)

    # ------------------------------------------------------------ processes

    def spawn(self, label, region, cmd, stdout, stderr):
        proc = subprocess.Popen(
            ["ip", "netns", "exec", self.ns[region], *cmd],
            stdout=stdout,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            # Its own session: a Ctrl-C at the terminal reaches the drill,
            # which stops everything in order, not each child on its own.
            start_new_session=True,
        )
        self.procs.append((label, proc))
        return proc

    def weir_cli(self, region, *args, check=True, timeout=60):
        cmd = ["ip", "netns", "exec", self.ns[region], self.weir, *args, "--bootstrap", self.bootstrap(region)]
        return run(cmd, check=check, timeout=timeout)

    def bootstrap(self, region):
        return ",".join(f"{REGION_IP[region]}:{KAFKA_PORT[n]}" for n in NODES)

    def http(self, region, node, path, timeout=3):
        url = f"http://{REGION_IP[region]}:{HTTP_PORT[node]}{path}"
        with in_netns(self.ns[region]):
            try:
                with urllib.request.urlopen(url, timeout=timeout) as r:
                    return json.loads(r.read())
            except urllib.error.HTTPError as e:
                if e.code == 404:
                    return None
                raise

    def try_http(self, region, node, path):
        try:
            return self.http(region, node, path)
        except (OSError, ValueError):
            return None

    # ------------------------------------------------------------ clusters

    def start_broker(self, region, node):
        ip = REGION_IP[region]
        voters = ",".join(f"{n}@{ip}:{CONTROLLER_PORT[n]}" for n in NODES)
        base = os.path.join(self.work, region)
        os.makedirs(base, exist_ok=True)
        # Stdout afresh, so that the ready line looked for is this start's;
        # the log goes on, after a line marking the restart.
        out = open(os.path.join(base, f"node-{node}.out"), "w")
        log = open(os.path.join(base, f"node-{node}.log"), "a")
        if node in self.brokers[region]:
            log.write(f"---- dr-drill: node {node} restarted from its data directory\n")
            log.flush()
        cmd = [
            self.weir, "serve",
            "--node-id", str(node),
            "--controllers", voters,
            "--controller-listen", f"{ip}:{CONTROLLER_PORT[node]}",
            "--listen", f"{ip}:{KAFKA_PORT[node]}",
            "--http-listen", f"{ip}:{HTTP_PORT[node]}",
            "--data-dir", os.path.join(base, f"node-{node}"),
            # The mirror creates B's topics with B's default factor.
            "--default-replication-factor", "3",
        ]  # fmt: skip
        proc = self.spawn(f"{region}-node-{node}", region, cmd, out, log)
        out.close()
        log.close()
        self.brokers[region][node] = proc

    def start_region(self, region):
        for node in NODES:
            self.start_broker(region, node)

    def wait_region(self, region, timeout=90):
        """Every broker printed its ready line, and the cluster sees three
        unfenced brokers."""
        deadline = time.monotonic() + timeout
        base = os.path.join(self.work, region)
        while time.monotonic() < deadline:
            for node, proc in self.brokers[region].items():
                if proc.poll() is not None:
                    raise DrillError(
                        f"region {region.upper()} node {node} exited with status {proc.returncode}: {tail(os.path.join(base, f'node-{node}.log'), 5).strip()}"
                    )
            ready = all("weir ready: " in tail(os.path.join(base, f"node-{n}.out"), 50) for n in NODES)
            if ready:
                view = self.try_http(region, 1, "/v1/cluster")
                if view and len([b for b in view.get("brokers", []) if not b.get("fenced")]) == 3:
                    return
            time.sleep(0.3)
        raise DrillError(f"region {region.upper()} did not start within {timeout} s: {tail(os.path.join(base, 'node-1.log'), 5).strip()}")

    def wait_partitions_led(self, region, timeout=90):
        """Every partition's leader answers a client (the metadata alone may
        still be what it was before the restart)."""
        cfg = {"bootstrap": self.bootstrap(region), "topics": sorted(TOPICS), "partitions": sum(TOPICS.values()), "timeout": timeout}
        proc = self.spawn(f"leaders-{region}", region, [sys.executable, os.path.abspath(__file__), "--role", "leaders", json.dumps(cfg)], subprocess.PIPE, subprocess.STDOUT)
        out, _ = proc.communicate(timeout=timeout + 30)
        if proc.returncode != 0:
            raise DrillError(f"region {region.upper()}'s partitions do not all answer {timeout} s after its restart: {out.decode().strip()[-300:]}")

    def kill_region(self, region):
        for proc in self.brokers[region].values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)

    def reap_region(self, region):
        for proc in self.brokers[region].values():
            proc.wait(timeout=30)

    # ------------------------------------------------------------ mirrors

    def mirror_state(self, region, name):
        """The mirror as its cluster sees it, with the progress of every
        partition, which each broker reports for those it leads."""
        view = None
        progress = {}
        for node in NODES:
            answer = self.try_http(region, node, f"/v1/mirrors/{name}")
            if answer is None:
                continue
            view = view or answer
            for p in answer.get("partitions", []):
                progress[(p["topic"], p["partition"])] = p
        topics = {}
        if view:
            for t in view.get("mirror_topics", []):
                topics[t["name"]] = t
        return topics, progress

    def wait_mirror(self, region, name, ready, timeout, what):
        deadline = time.monotonic() + timeout
        topics, progress = {}, {}
        while time.monotonic() < deadline:
            self.check_delayers()
            topics, progress = self.mirror_state(region, name)
            if ready(topics, progress):
                return topics, progress
            time.sleep(0.25)
        raise DrillError(f"{what} not within {timeout} s: topics {json.dumps(topics)}; partitions {summarize_progress(progress)}")

    def topic_id(self, region, topic):
        out = self.weir_cli(region, "topic", "describe", topic, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Topic ID:"):
                return line.split(":", 1)[1].strip()
        return None

    # ------------------------------------------------------------ clients

    def start_client(self, kind, region, **cfg):
        label = f"{region}-{kind}"
        path = os.path.join(self.work, "clients", f"{label}.jsonl")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        cfg.update({"out": path, "region": region, "bootstrap": self.bootstrap(region)})
        err = open(os.path.join(self.work, "clients", f"{label}.stderr"), "a")
        proc = self.spawn(label, region, [sys.executable, os.path.abspath(__file__), "--role", kind, json.dumps(cfg)], subprocess.DEVNULL, err)
        err.close()
        self.clients[label] = (proc, path)
        return path

    def start_traffic(self, region, drain):
        rate = self.args.rate
        self.start_client("consumer", region, topic="orders", drain=drain)
        self.start_client("idempotent", region, topic="orders", rate=rate, drain=drain)
        self.start_client("transactional", region, topic="payments", rate=max(rate / 10, 5))

    def stop_client(self, label, grace):
        proc, _ = self.clients[label]
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        return proc.returncode

    def client_alive(self, label):
        return self.clients[label][0].poll() is None

    def client_log(self, label):
        return read_events(self.clients[label][1])

    def client_trouble(self, label):
        errors = [e for e in self.client_log(label) if e.get("ev") in ("error", "nack", "commit-error")]
        stderr = tail(os.path.join(self.work, "clients", f"{label}.stderr"), 3).strip()
        return f"last errors {json.dumps(errors[-3:])}; stderr: {stderr[-300:]}"

    def dump(self, region, isolation, label, timeout=120):
        """Starts reading both topics of `region` to their end; wait with
        `collect`."""
        path = os.path.join(self.work, "dumps", f"{label}.jsonl")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        cfg = {"out": path, "bootstrap": self.bootstrap(region), "topics": sorted(TOPICS), "isolation": isolation, "timeout": timeout}
        err = open(path + ".stderr", "w")
        proc = self.spawn(f"dump-{label}", region, [sys.executable, os.path.abspath(__file__), "--role", "dump", json.dumps(cfg)], subprocess.DEVNULL, err)
        err.close()
        return proc, path, label

    def collect(self, started, timeout=150):
        proc, path, label = started
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        events = read_events(path)
        done = events[-1] if events and events[-1].get("ev") == "done" else None
        if proc.returncode != 0 or done is None:
            raise DrillError(
                f"reading {label} to its end failed (status {proc.returncode}; {done and 'unfinished ' + str(done['unfinished'])}; {tail(path + '.stderr', 3).strip()[-300:]})"
            )
        records = {}
        for e in events[:-1]:
            records[(e["topic"], e["p"], e["o"])] = e
        return records, done

    def produce_one(self, region, topic, value):
        cfg = {"bootstrap": self.bootstrap(region), "topic": topic, "value": value}
        proc = self.spawn(f"produce-{region}", region, [sys.executable, os.path.abspath(__file__), "--role", "produce-one", json.dumps(cfg)], subprocess.PIPE, subprocess.PIPE)
        out, err = proc.communicate(timeout=60)
        return proc.returncode, (out.decode().strip() or err.decode().strip()[-300:])

    # ------------------------------------------------------------ the steps

    def run(self):
        args = self.args
        self.note(f"weir: {self.weir}; data under {self.work}")
        self.note(f"{args.seconds} s of traffic at {args.rate} records/s (orders, idempotent) and {max(args.rate / 10, 5):g} records/s (payments, transactions of {TXN_SIZE})")
        with self.phase("network"):
            self.make_network()

        with self.phase("clusters start"):
            self.start_region("a")
            self.start_region("b")
            self.wait_region("a")
            self.wait_region("b")
        self.note(f"clusters up in {self.phases['clusters start']} s: A {self.bootstrap('a')}, B {self.bootstrap('b')}")

        with self.phase("mirror setup"):
            for topic, partitions in TOPICS.items():
                deadline = time.monotonic() + 60
                while True:
                    made = self.weir_cli("a", "topic", "create", topic, "-p", str(partitions), "-r", "3", "-c", "min.insync.replicas=2", check=False)
                    if made.returncode == 0:
                        break
                    if time.monotonic() > deadline:
                        raise DrillError(f"creating {topic} on A: {made.stderr.strip()}")
                    time.sleep(0.5)
            self.weir_cli("b", "mirror", "create", "dr", "--source-bootstrap", self.bootstrap("a"), "--topics", "orders|payments", "--groups", "drill-.*")
            total = sum(TOPICS.values())

            def mirroring(topics, progress):
                return all(topics.get(t, {}).get("state") == "mirroring" for t in TOPICS) and len(
                    [p for p in progress.values() if p["state"] == "mirroring" and p["source_end_offset"] is not None]
                ) == total

            try:
                self.wait_mirror("b", "dr", mirroring, 60, "B's mirror topics mirroring")
                ids_a = {t: self.topic_id("a", t) for t in TOPICS}
                ids_b = {t: self.topic_id("b", t) for t in TOPICS}
                if ids_a == ids_b and all(ids_a.values()):
                    self.ok("mirror created the topics", f"orders and payments on B with A's topic ids, every partition mirroring, in {now() - self.t_start:.1f} s")
                else:
                    self.fail("mirror created the topics", f"topic ids differ: A {ids_a}, B {ids_b}")
            except DrillError as e:
                self.fail("mirror created the topics", str(e))
                raise

        # ---- traffic in A
        with self.phase("traffic on A"):
            self.start_traffic("a", drain=False)
            started = time.monotonic()
            next_report = started + 5
            while time.monotonic() - started < args.seconds:
                time.sleep(0.5)
                self.check_delayers()
                for label in ("a-idempotent", "a-transactional", "a-consumer"):
                    if not self.client_alive(label):
                        raise DrillError(f"{label} exited early: {self.client_trouble(label)}")
                if time.monotonic() >= next_report:
                    next_report += 10
                    _, progress = self.mirror_state("b", "dr")
                    acks = sum(1 for e in self.client_log("a-idempotent") if e.get("ev") == "ack")
                    self.note(f"{time.monotonic() - started:.0f} s: {acks} orders acknowledged on A; mirror lag {summarize_progress(progress)}")
            _, progress = self.mirror_state("b", "dr")
            self.figures["mirror_lag_at_kill"] = {f"{t}/{p}": v.get("lag_records") for (t, p), v in sorted(progress.items())}

        # ---- the disaster
        t_kill = now()
        self.kill_region("a")
        # A's clients go down with their region, at once: waiting for one
        # blocked in a commit to a broker that is gone would delay the
        # failover. Their logs are written line by line, so nothing
        # acknowledged before is lost.
        a_clients = ("a-idempotent", "a-transactional", "a-consumer")
        for label in a_clients:
            with contextlib.suppress(ProcessLookupError):
                self.clients[label][0].kill()
        self.reap_region("a")
        self.figures["kill_time"] = t_kill
        self.note(f"killed A's three brokers with SIGKILL at {time.strftime('%H:%M:%S', time.localtime(t_kill))}; A's clients stopped")

        # ---- failover on B
        with self.phase("failover"):
            failover = self.weir_cli("b", "mirror", "failover", "dr", check=False)
            if failover.returncode != 0:
                self.fail("failover made the topics writable", f"weir mirror failover: {failover.stderr.strip()}")
                raise DrillError("failover refused")
            stopped = lambda topics, _: all(topics.get(t, {}).get("state") in STOPPED_STATES for t in TOPICS)
            try:
                topics, _ = self.wait_mirror("b", "dr", stopped, 60, "B's topics failed over")
            except DrillError as e:
                self.fail("failover made the topics writable", str(e))
                raise
            t_stopped = now()
            for label in a_clients:
                self.clients[label][0].wait(timeout=30)
            cut = {}
            for t in TOPICS:
                for entry in topics[t].get("last_mirrored_offsets", []):
                    cut[(t, entry["partition"])] = entry["offset"]
            self.figures["failover_s"] = round(t_stopped - t_kill, 2)
            self.note(f"failed over {t_stopped - t_kill:.1f} s after the kill; last mirrored offsets {', '.join(f'{t}/{p}={o}' for (t, p), o in sorted(cut.items()))}")

        # ---- traffic in B
        with self.phase("traffic on B"):
            self.start_traffic("b", drain=True)
            deadline = time.monotonic() + 60
            acked = committed = False
            while time.monotonic() < deadline and not (acked and committed):
                time.sleep(0.2)
                acked = acked or any(e.get("ev") == "ack" for e in self.client_log("b-idempotent"))
                committed = committed or any(e.get("ev") == "commit" for e in self.client_log("b-transactional"))
            if acked and committed:
                self.ok("failover made the topics writable", f"both topics {topics['orders']['state']}; first acknowledged produce on B {self.first('b-idempotent', 'ack') - t_kill:.1f} s after the kill")
            else:
                self.fail(
                    "failover made the topics writable",
                    f"no {'acknowledged produce to orders' if not acked else 'committed transaction on payments'} on B within 60 s: "
                    + self.client_trouble("b-idempotent" if not acked else "b-transactional"),
                )
            time.sleep(5 if args.short else 10)
            for label in ("b-idempotent", "b-transactional"):
                self.stop_client(label, grace=40)

        # ---- B read completely; the consumer catches up first
        with self.phase("verify on B"):
            b_committed, b_done = self.collect(self.dump("b", "read_committed", "b-committed"))
            self.wait_consumer_caught_up(b_committed)
            self.stop_client("b-consumer", grace=20)

        # ---- A back from its data directories
        with self.phase("restart A"):
            self.start_region("a")
            self.wait_region("a")
            self.wait_partitions_led("a")
        self.note(f"A restarted from its data directories in {self.phases['restart A']} s")

        with self.phase("verify A against B"):
            a_raw_started = self.dump("a", "read_uncommitted", "a-after-restart")
            b_raw_started = self.dump("b", "read_uncommitted", "b-all")
            a_raw, a_done = self.collect(a_raw_started)
            b_raw, b_done = self.collect(b_raw_started)
            self.check_below_cut(a_raw, b_raw, cut)
            self.report_rpo(b_committed, t_kill)
            self.report_consumer(b_committed)
            self.check_no_duplicate_ids(b_committed)
            self.report_rto(t_kill)

        # ---- failback
        with self.phase("failback"):
            self.failback(b_raw, cut)

    def first(self, label, ev):
        times = [e["t"] for e in self.client_log(label) if e.get("ev") == ev]
        return min(times) if times else None

    def wait_consumer_caught_up(self, b_committed, timeout=60):
        """Until the consumer on B has read each partition's last record."""
        last = {}
        for (t, p, o) in b_committed:
            if t == "orders":
                last[p] = max(last.get(p, -1), o)
        deadline = time.monotonic() + timeout
        read = {}
        while time.monotonic() < deadline:
            read = {}
            for e in self.client_log("b-consumer"):
                if e.get("ev") == "rec":
                    read[e["p"]] = max(read.get(e["p"], -1), e["o"])
            if all(read.get(p, -1) >= o for p, o in last.items()):
                return
            if not self.client_alive("b-consumer"):
                break
            time.sleep(0.5)
        self.note(f"the consumer on B did not reach the end of orders within {timeout} s: read up to {read}, end {last}")

    def check_below_cut(self, a_raw, b_raw, cut):
        what = "offsets and records identical below the cut"
        compared = 0
        problems = []
        by_partition = {"A": collections.defaultdict(dict), "B": collections.defaultdict(dict)}
        for side, records in (("A", a_raw), ("B", b_raw)):
            for (t, p, o), r in records.items():
                if o < cut.get((t, p), 0):
                    by_partition[side][(t, p)][o] = r
        for t, p in sorted(cut):
            a_part = by_partition["A"][(t, p)]
            b_part = by_partition["B"][(t, p)]
            only_a = sorted(set(a_part) - set(b_part))
            only_b = sorted(set(b_part) - set(a_part))
            if only_a or only_b:
                problems.append(f"{t}/{p}: offsets only on A {only_a[:5]}{'...' if len(only_a) > 5 else ''} ({len(only_a)}), only on B {only_b[:5]} ({len(only_b)})")
            for o in sorted(set(a_part) & set(b_part)):
                ra, rb = a_part[o], b_part[o]
                diff = [f for f in ("k", "v", "h", "ts") if ra[f] != rb[f]]
                if diff:
                    problems.append(f"{t}/{p}@{o}: {', '.join(diff)} differ (A {json.dumps({f: ra[f] for f in diff})}, B {json.dumps({f: rb[f] for f in diff})})")
                compared += 1
        self.figures["records_compared_below_cut"] = compared
        if not cut:
            self.fail(what, "the failover reported no last mirrored offsets")
        elif problems:
            self.fail(what, f"{len(problems)} differences; first: {'; '.join(problems[:3])}")
        elif compared == 0:
            self.fail(what, "nothing below the cut to compare")
        else:
            self.ok(what, f"{compared} records at the same offsets with the same keys, values, headers and timestamps on A and B")

    def acknowledged_on_a(self):
        """Every record acknowledged on A, by id, with the time of its
        acknowledgement."""
        acked = {}
        for e in self.client_log("a-idempotent"):
            if e.get("ev") == "ack":
                acked[e["id"]] = e["t"]
        for e in self.client_log("a-transactional"):
            if e.get("ev") == "commit":
                for ident in e["ids"]:
                    acked[ident] = e["t"]
        return acked

    def report_rpo(self, b_committed, t_kill):
        acked = self.acknowledged_on_a()
        on_b = {r["id"] for r in b_committed.values()}
        lost = [i for i in acked if i not in on_b]
        lost_orders = [i for i in lost if i.startswith("idem-")]
        # Acknowledgements logged just after the kill were sent before it.
        last10 = sum(1 for t in acked.values() if t >= t_kill - 10)
        margin = max(200, last10 // 10)
        self.figures["acknowledged_on_a"] = len(acked)
        self.figures["rpo_records"] = len(lost)
        self.figures["rpo_orders"] = len(lost_orders)
        self.figures["rpo_payments"] = len(lost) - len(lost_orders)
        lost_times = [acked[i] for i in lost]
        self.figures["rpo_seconds"] = round(t_kill - min(lost_times), 2) if lost_times else 0.0
        self.figures["acknowledged_last_10s"] = last10
        self.note(
            f"RPO: {len(lost)} of {len(acked)} records acknowledged on A are missing on B ({len(lost_orders)} orders, {len(lost) - len(lost_orders)} payments); "
            f"the oldest was acknowledged {self.figures['rpo_seconds']} s before the kill"
        )
        what = "mirror kept up (RPO within the last 10 s of acknowledged records)"
        if len(lost) > last10 + margin:
            self.fail(what, f"{len(lost)} records lost, more than the {last10} acknowledged in the last 10 s before the kill plus a margin of {margin}")
        else:
            self.ok(what, f"{len(lost)} lost <= {last10} + {margin}")

    def report_consumer(self, b_committed):
        a_read = collections.Counter(e["id"] for e in self.client_log("a-consumer") if e.get("ev") == "rec")
        b_events = self.client_log("b-consumer")
        b_read = collections.Counter(e["id"] for e in b_events if e.get("ev") == "rec")
        twice = sum(1 for i in b_read if i in a_read)
        self.figures["consumer_read_on_a"] = len(a_read)
        self.figures["consumer_read_on_b"] = sum(b_read.values())
        self.figures["consumer_read_twice"] = twice
        self.figures["consumer_read_twice_within_a"] = sum(c - 1 for c in a_read.values() if c > 1)
        self.figures["consumer_read_twice_within_b"] = sum(c - 1 for c in b_read.values() if c > 1)
        self.note(f"consumer: {len(a_read)} records read on A, {sum(b_read.values())} on B, {twice} of them read on A before the kill and again on B")

        what = "consumer missed nothing on B"
        assigns = [e for e in b_events if e.get("ev") == "assign"]
        if not assigns or "error" in assigns[0]["committed"]:
            self.fail(what, f"the consumer on B logged no committed offsets at its assignment: {assigns[:1]}")
            return
        start = {int(p): o for p, o in assigns[0]["committed"].items()}
        self.figures["group_offsets_copied"] = {str(p): o for p, o in sorted(start.items())}
        seen = {(e["p"], e["o"]) for e in b_events if e.get("ev") == "rec"}
        missed = []
        for (t, p, o) in sorted(b_committed):
            # A negative offset: nothing was copied, the group starts at the
            # log start (auto.offset.reset=earliest).
            if t == "orders" and o >= max(start.get(p, 0), 0) and (p, o) not in seen:
                missed.append((p, o))
        if missed:
            self.fail(what, f"{len(missed)} records on B at or past the copied offsets were never read; first {missed[:5]}")
        else:
            copied = ", ".join(f"{p}:{o if o >= 0 else 'none'}" for p, o in sorted(start.items()))
            self.ok(what, f"every record of orders from the copied offsets ({copied}) on was read")

    def check_no_duplicate_ids(self, b_committed):
        what = "no id twice in B's log"
        counts = collections.Counter(r["id"] for r in b_committed.values())
        twice = {i: c for i, c in counts.items() if c > 1}
        self.figures["records_on_b"] = len(b_committed)
        self.figures["ids_twice_on_b"] = len(twice)
        if twice:
            self.fail(what, f"{len(twice)} ids appear more than once, e.g. {sorted(twice)[:5]}")
        else:
            self.ok(what, f"{len(counts)} distinct ids in {len(b_committed)} records")

    def report_rto(self, t_kill):
        firsts = {
            "produce": self.first("b-idempotent", "ack"),
            "transaction": self.first("b-transactional", "commit"),
            "consume": self.first("b-consumer", "rec"),
        }
        for name, t in firsts.items():
            self.figures[f"rto_{name}_s"] = round(t - t_kill, 2) if t else None
        self.note(
            f"RTO: first produce acknowledged on B {self.figures['rto_produce_s']} s after the kill, first transaction committed {self.figures['rto_transaction_s']} s, "
            f"first record consumed {self.figures['rto_consume_s']} s"
        )

    def failback(self, b_raw, cut):
        what_logs = "failback identical logs"
        what_writable = "writable again"
        started = now()
        made = self.weir_cli("a", "mirror", "create", "back", "--source-bootstrap", self.bootstrap("b"), "--topics", "orders|payments", "--groups", "drill-.*", check=False)
        if made.returncode != 0:
            self.fail(what_logs, f"weir mirror create back on A: {made.stderr.strip()}")
            self.fail(what_writable, "not reached: the failback mirror was not created")
            return
        claimed = lambda topics, _: all(t in topics for t in TOPICS)
        try:
            topics, _ = self.wait_mirror("a", "back", claimed, FAILBACK_CLAIM_S, "A's mirror taking its topics back")
        except DrillError as e:
            self.fail(what_logs, f"A's mirror `back` did not take orders and payments back within {FAILBACK_CLAIM_S} s: {e}")
            self.fail(what_writable, "not reached: the topics were not taken back")
            return
        total = sum(TOPICS.values())

        def caught_up(topics, progress):
            if not all(topics.get(t, {}).get("state") == "mirroring" for t in TOPICS):
                return False
            done = [
                p for p in progress.values()
                if p["state"] == "mirroring" and p["source_end_offset"] is not None and p["lag_records"] == 0 and p["mirrored_offset"] == p["source_end_offset"]
            ]  # fmt: skip
            return len(done) == total

        try:
            topics, _ = self.wait_mirror("a", "back", caught_up, 120, "A's mirror `back` mirroring both topics at lag 0")
        except DrillError as e:
            self.fail(what_logs, str(e))
            self.fail(what_writable, "not reached: the failback mirror did not catch up")
            return
        self.figures["failback_caught_up_s"] = round(now() - started, 2)
        # Where A's partitions were cut: B's last mirrored offsets, unless A
        # lost records in its outage that B still has (then lower).
        parted = {}
        for t, view in topics.items():
            for entry in view.get("failback_offsets", []):
                parted[f"{t}/{entry['partition']}"] = entry["offset"]
        self.figures["failback_offsets"] = parted
        expected = {f"{t}/{p}": o for (t, p), o in cut.items()}
        if parted and parted != expected:
            self.note(f"A's failback cut its partitions at {parted}, B's failover at {expected}")
        a_all, _ = self.collect(self.dump("a", "read_uncommitted", "a-after-failback"))
        differences = []
        for key in sorted(set(a_all) | set(b_raw)):
            ra, rb = a_all.get(key), b_raw.get(key)
            if ra is None or rb is None:
                differences.append(f"{key[0]}/{key[1]}@{key[2]} only on {'B' if ra is None else 'A'}")
            elif any(ra[f] != rb[f] for f in ("k", "v", "h", "ts")):
                differences.append(f"{key[0]}/{key[1]}@{key[2]} differs")
        if differences:
            self.fail(what_logs, f"{len(differences)} differences between A and B; first: {'; '.join(differences[:5])}")
        else:
            self.ok(what_logs, f"{len(a_all)} records identical on A and B, {now() - started:.1f} s after `weir mirror create back`")
        failover = self.weir_cli("a", "mirror", "failover", "back", check=False)
        if failover.returncode != 0:
            self.fail(what_writable, f"weir mirror failover back: {failover.stderr.strip()}")
            return
        try:
            self.wait_mirror("a", "back", lambda topics, _: all(topics.get(t, {}).get("state") in STOPPED_STATES for t in TOPICS), 60, "A's topics failed over")
        except DrillError as e:
            self.fail(what_writable, str(e))
            return
        status, answer = self.produce_one("a", "orders", "written on A after the failback")
        if status == 0:
            self.figures["failback_s"] = round(now() - started, 2)
            self.ok(what_writable, f"a record produced to orders on A ({answer}); failback took {self.figures['failback_s']} s")
        else:
            self.fail(what_writable, f"producing to orders on A after `weir mirror failover back`: {answer}")

    # ------------------------------------------------------------ report

    def summary(self):
        rows = [(f"phase: {name}", f"{seconds:.1f} s") for name, seconds in self.phases.items()]
        f = self.figures

        def show(key, unit=""):
            value = f.get(key)
            return "-" if value is None else f"{value}{unit}"

        rows += [
            ("records acknowledged on A", show("acknowledged_on_a")),
            ("RPO records (orders/payments)", f"{show('rpo_records')} ({show('rpo_orders')}/{show('rpo_payments')})"),
            ("RPO window", show("rpo_seconds", " s")),
            ("records read twice by the consumer", show("consumer_read_twice")),
            ("RTO, first produce on B", show("rto_produce_s", " s")),
            ("RTO, first transaction on B", show("rto_transaction_s", " s")),
            ("RTO, first record consumed on B", show("rto_consume_s", " s")),
            ("kill to failed over", show("failover_s", " s")),
            ("records compared below the cut", show("records_compared_below_cut")),
            ("failback", show("failback_s", " s") if "failback_s" in f else str(f.get("failback", "-"))),
        ]
        width = max(len(r[0]) for r in rows)
        print(f"\ndr-drill summary (delay {self.args.delay_ms} ms each way, {self.args.seconds:g} s at {self.args.rate} records/s)")
        for name, value in rows:
            print(f"  {name:<{width}}  {value}")
        print(f"dr-drill: {self.passed} checks passed, {len(self.failed)} failed in {now() - self.t_start:.0f} s", flush=True)

    def write_report(self):
        if not self.args.report:
            return
        report = {
            "delay_ms_each_way": self.args.delay_ms,
            "seconds": self.args.seconds,
            "rate": self.args.rate,
            "short": self.args.short,
            "weir": self.weir,
            "phases_s": self.phases,
            "figures": self.figures,
            "passed": self.passed,
            "failed": self.failed,
        }
        with open(self.args.report, "w", encoding="utf-8") as out:
            json.dump(report, out, indent=2)
            out.write("\n")


def summarize_progress(progress):
    if not progress:
        return "none reported"
    lags = [p.get("lag_records") for p in progress.values()]
    states = collections.Counter(p.get("state") for p in progress.values())
    return f"{len(progress)} partitions, lag max {max((l for l in lags if l is not None), default='?')} records, states {dict(states)}"


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--role":
        ROLES[sys.argv[2]](json.loads(sys.argv[3]))
        return 0

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--weir", default=os.environ.get("WEIR_BIN") or os.path.join(ROOT, "target", "release", "weir"), help="the weir binary ($WEIR_BIN, else target/release/weir)"
    )
    parser.add_argument("--delay-ms", type=int, default=30, help="delay between the regions, each way (30)")
    parser.add_argument("--seconds", type=float, default=None, help="traffic before the disaster (60; 10 with --short)")
    parser.add_argument("--rate", type=int, default=None, help="records/s of the idempotent producer (2000; 500 with --short)")
    parser.add_argument("--report", help="write the figures to this JSON file")
    parser.add_argument("--short", action="store_true", help="the CI form: 10 s of traffic at a lower rate")
    parser.add_argument("--keep", action="store_true", help="leave the data directory and print its path")
    args = parser.parse_args()
    if args.seconds is None:
        args.seconds = 10 if args.short else 60
    if args.rate is None:
        args.rate = 500 if args.short else 2000

    if os.geteuid() != 0:
        print("FAIL: dr-drill needs root: it makes network namespaces, veth pairs and netem qdiscs (run it with sudo)", flush=True)
        return 1
    if not os.access(args.weir, os.X_OK):
        print(f"FAIL: dr-drill weir binary present: {args.weir} not found; build it with: cargo build --release -p weir --bin weir", flush=True)
        return 1
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            print(f"FAIL: dr-drill needs the {tool} command (iproute2)", flush=True)
            return 1
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        print("FAIL: dr-drill needs the python package confluent-kafka", flush=True)
        return 1

    drill = Drill(args)

    def interrupted(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, interrupted)
    # Ctrl-C stops the drill even when started from a shell that had it
    # ignored (a background job); a hangup only when not deliberately
    # ignored (nohup).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGHUP) != signal.SIG_IGN:
        signal.signal(signal.SIGHUP, interrupted)
    try:
        drill.run()
    except DrillError as e:
        drill.fail("drill", str(e))
    except KeyboardInterrupt:
        drill.fail("drill", "interrupted")
    except SystemExit as e:
        drill.fail("drill", f"stopped by signal {e.code - 128 if isinstance(e.code, int) else e.code}")
    finally:
        # A second Ctrl-C must not leave the namespaces behind.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        for region in ("a", "b"):
            for node in NODES:
                log = os.path.join(drill.work, region, f"node-{node}.log")
                if "panicked at" in tail(log, 100000):
                    drill.fail("brokers' logs have no panic", f"region {region.upper()} node {node}: {tail(log, 3).strip()[-300:]}")
        drill.summary()
        drill.write_report()
        drill.teardown()
    return 1 if drill.failed else 0


if __name__ == "__main__":
    sys.exit(main())
