#!/usr/bin/env python3
"""A fixed delay on packets without tc netem, for kernels built without it
(CONFIG_NET_SCH_NETEM): every packet an iptables rule sends to NFQUEUE
QUEUE is held for DELAY_MS, then let through, in arrival order.

    python3 tests/interop/packet_delay.py QUEUE DELAY_MS
    iptables -A INPUT -s PEER -j NFQUEUE --queue-num QUEUE

Prints `bound` once it serves the queue. Put the rule where packets come
in, not where they leave: a packet held on its way out still counts
against its TCP socket's small-queue budget, which caps a connection at a
few hundred KB/s. Used by dr_drill.py and scripts/bench-mirror.sh.
"""

import collections
import errno
import os
import sys
import time


def serve(queue, delay_ms):
    """Holds every packet of a netfilter queue for `delay_ms`, then lets it
    through: a fixed delay, in arrival order, like netem's. Speaks the
    nfnetlink_queue protocol directly; only packet ids travel (copy mode
    meta), and one batch verdict passes every packet due."""
    import select
    import socket
    import struct

    subsys_queue = 3 << 8
    msg_packet, msg_config, msg_verdict_batch = 0, 2, 3
    nlm_f_request, nlm_f_ack, nlmsg_error = 1, 4, 2
    delay = delay_ms / 1000

    def attr(kind, payload):
        length = 4 + len(payload)
        return struct.pack("=HH", length, kind) + payload + b"\0" * (-length % 4)

    def message(kind, attrs, flags):
        body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(queue)) + b"".join(attrs)
        return struct.pack("=IHHII", 16 + len(body), subsys_queue | kind, flags, 0, 0) + body

    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12)  # NETLINK_NETFILTER
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind((0, 0))

    def configure(attrs):
        sock.send(message(msg_config, attrs, nlm_f_request | nlm_f_ack))
        reply = sock.recv(65536)
        if struct.unpack_from("=H", reply, 4)[0] == nlmsg_error:
            error = struct.unpack_from("=i", reply, 16)[0]
            if error:
                raise OSError(-error, f"nfnetlink_queue: {os.strerror(-error)}")

    configure([attr(1, struct.pack("=BBH", 1, 0, 0))])  # NFQNL_CFG_CMD_BIND
    # Copy mode meta (ids, no payload); a long queue, so that nothing is
    # dropped while held.
    configure([attr(2, struct.pack("!IB", 0, 1)), attr(3, struct.pack("!I", 1 << 16))])
    print("bound", flush=True)
    held = collections.deque()  # (due, packet id), in arrival order
    while True:
        timeout = max(0.0, held[0][0] - time.monotonic()) if held else None
        readable, _, _ = select.select([sock], [], [], timeout)
        if readable:
            while True:
                try:
                    data = sock.recv(1 << 20, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    break
                except OSError as e:
                    # Notices lost to a full socket buffer: their packets
                    # go with the next batch verdict, which covers every
                    # lower id.
                    if e.errno == errno.ENOBUFS:
                        continue
                    raise
                due = time.monotonic() + delay
                at = 0
                while at + 16 <= len(data):
                    length, kind = struct.unpack_from("=IH", data, at)
                    if length < 16:
                        break
                    if kind == subsys_queue | msg_packet:
                        a = at + 20
                        while a + 4 <= at + length:
                            alen, atype = struct.unpack_from("=HH", data, a)
                            if alen < 4:
                                break
                            if atype & 0x7FFF == 1:  # NFQA_PACKET_HDR: the packet id first
                                held.append((due, struct.unpack_from("!I", data, a + 4)[0]))
                            a += (alen + 3) & ~3
                    at += (length + 3) & ~3
        current = time.monotonic()
        last = None
        while held and held[0][0] <= current:
            last = held.popleft()[1]
        if last is not None:
            # NF_ACCEPT for every queued packet up to this id.
            sock.send(message(msg_verdict_batch, [attr(2, struct.pack("!II", 1, last))], nlm_f_request))



if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    serve(int(sys.argv[1]), float(sys.argv[2]))
