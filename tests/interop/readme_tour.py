"""The README's five-minute tour, run as written.

Usage: python3 tests/interop/readme_tour.py WEIR_BIN

Starts `weir serve` with no arguments in a fresh directory, as the tour's
first command does (so on 127.0.0.1:9092, 9093 and 9644, which must be
free), checks its ready line against the one the README shows, then runs
every other command of the tour's `sh` blocks one by one with `weir` on the
PATH, each of which must exit 0. Before the transactions block it runs what
that block's text asks for: a producer with transactional.id=orders-writer
(confluent-kafka). The broker is stopped with SIGTERM at the end and must
exit 0.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interop_util import Checks, expect  # noqa: E402

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")


def tour_blocks():
    """The `sh` blocks of the tour section, each with the paragraph before it."""
    text = open(README, encoding="utf-8").read()
    start = text.index("## A five-minute tour")
    end = text.index("\n## ", start + 1)
    section = text[start:end]
    blocks = []
    for match in re.finditer(r"```sh\n(.*?)```", section, re.S):
        before = section[: match.start()].rstrip().rsplit("\n\n", 1)[-1]
        blocks.append((before, match.group(1)))
    return blocks


def commands(block):
    """A block's commands: one per non-empty line."""
    return [line for line in block.splitlines() if line.strip()]


def run_transactional_producer():
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": "127.0.0.1:9092", "transactional.id": "orders-writer"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("orders", key=b"carol", value=b"order 4")
    producer.commit_transaction(30)


def main():
    if len(sys.argv) != 2:
        print("usage: readme_tour.py WEIR_BIN", file=sys.stderr)
        sys.exit(64)
    weir = os.path.abspath(sys.argv[1])
    checks = Checks("readme_tour", 180)
    blocks = tour_blocks()
    first = blocks[0][1]
    expect_ready = next(line for line in first.splitlines() if line.startswith("weir ready:"))
    work = tempfile.mkdtemp(prefix="weir-tour.")
    env = dict(os.environ, PATH=os.path.dirname(weir) + os.pathsep + os.environ["PATH"])
    env.pop("WEIR_BOOTSTRAP", None)
    log = open(os.path.join(work, "broker.log"), "w")
    broker = subprocess.Popen([weir, "serve"], cwd=work, stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        ready = broker.stdout.readline().strip()

        def ready_as_shown():
            expect(
                ready.startswith(expect_ready),
                f"the broker said {ready!r}; the README shows {expect_ready!r}"
                " (is port 9092, 9093 or 9644 taken?)",
            )

        checks.run("weir serve starts as the tour shows", ready_as_shown)
        if checks.failed:
            print(open(os.path.join(work, "broker.log")).read()[-2000:])
            return
        for before, block in blocks[1:]:
            if "transactional.id=orders-writer" in before:
                checks.run("a producer with transactional.id=orders-writer", run_transactional_producer)
            for command in commands(block):

                def run_command(command=command):
                    done = subprocess.run(
                        ["bash", "-c", command],
                        cwd=work,
                        env=env,
                        capture_output=True,
                        text=True,
                        timeout=60,
                    )
                    expect(
                        done.returncode == 0,
                        f"exit {done.returncode}: {done.stderr.strip()[-400:]}",
                    )

                checks.run(f"tour: {command.split('  #')[0].strip()}", run_command)
        broker.send_signal(signal.SIGTERM)
        try:
            code = broker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            code = None
        checks.run("the broker stops on SIGTERM", lambda: expect(code == 0, f"exit {code}"))
    finally:
        if broker.poll() is None:
            broker.kill()
            broker.wait()
        shutil.rmtree(work, ignore_errors=True)
    checks.finish()


if __name__ == "__main__":
    main()
