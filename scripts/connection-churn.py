#!/usr/bin/env python3
"""Connection churn against a running broker: opens N connections, optionally
sends one ApiVersions request on each and reads the answer, closes them all,
and repeats; prints the broker's resident memory (VmRSS) at the start, with
the connections open and after they are closed, each cycle.

    target/release/weir serve --data-dir /tmp/churn --listen 127.0.0.1:9092 &
    python3 scripts/connection-churn.py --pid $! --port 9092 \
        --connections 5000 --cycles 10 [--request]

The script raises its own open-file limit to the hard limit (the broker
raises its own). Standard library only.
"""
import argparse
import resource
import socket
import struct
import time


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def api_versions(correlation_id):
    """An ApiVersions v3 request frame (header v2, compact strings)."""
    client_id = b"churn"
    header = struct.pack(">hhih", 18, 3, correlation_id, len(client_id)) + client_id + b"\x00"
    name, version = b"churn", b"1.0"
    body = bytes([len(name) + 1]) + name + bytes([len(version) + 1]) + version + b"\x00"
    return struct.pack(">i", len(header + body)) + header + body


def read_exactly(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError("the broker closed the connection")
        data += chunk
    return data


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pid", type=int, required=True, help="the broker's process id")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9092)
    parser.add_argument("--connections", type=int, default=5000)
    parser.add_argument("--cycles", type=int, default=10)
    parser.add_argument("--request", action="store_true", help="send one ApiVersions on each connection")
    parser.add_argument("--settle", type=float, default=2.0, help="seconds before each RSS reading")
    parser.add_argument("--after", type=float, default=15.0, help="seconds before the last reading")
    args = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    time.sleep(args.settle)
    baseline = rss_mib(args.pid)
    peak = baseline
    print(f"baseline {baseline:.1f} MiB", flush=True)
    for cycle in range(1, args.cycles + 1):
        sockets = [socket.create_connection((args.host, args.port)) for _ in range(args.connections)]
        if args.request:
            for i, sock in enumerate(sockets):
                sock.sendall(api_versions(i))
            for sock in sockets:
                (size,) = struct.unpack(">i", read_exactly(sock, 4))
                read_exactly(sock, size)
        time.sleep(args.settle)
        opened = rss_mib(args.pid)
        for sock in sockets:
            sock.close()
        time.sleep(args.settle)
        closed = rss_mib(args.pid)
        peak = max(peak, opened, closed)
        print(f"cycle {cycle:2}: open {opened:6.1f} MiB, closed {closed:6.1f} MiB", flush=True)
    time.sleep(args.after)
    print(f"peak {peak:.1f} MiB; {args.after:.0f} s after the last cycle {rss_mib(args.pid):.1f} MiB", flush=True)


if __name__ == "__main__":
    main()
