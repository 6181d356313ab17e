"""The delay between the lab's clusters where the kernel has no ``netem``: a userspace queue.

The lab's iptables rules send packets routed from one cluster bridge to another to NFQUEUE
``<queue>`` (``--queue-bypass``: with no reader they pass undelayed, never dropped); this daemon
reads the queue's packet ids over ``nfnetlink_queue`` (metadata only, no payload copied) and
accepts each ``delay`` after it arrived. The delay is the same for every packet, so due packets
are always the oldest ones and one batch verdict (``NFQNL_MSG_VERDICT_BATCH``: every id up to
the given one) releases them together; a packet whose notification was lost (socket buffer
full) goes with the next batch. The kernel queue fails open when full.

Run by `lab up` as ``python -m lab.delay --queue N --delay-ms MS --pidfile P``: it writes its
pid file once the queue is bound (so `up` knows it works) and, on SIGTERM, releases what it
holds and exits. Standard library only.
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import select
import signal
import socket
import struct
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

NETLINK_NETFILTER = 12
SOL_NETLINK = 270
NETLINK_NO_ENOBUFS = 5
NLM_F_REQUEST = 0x1
NLM_F_ACK = 0x4
NLMSG_ERROR = 2
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET = 0
NFQNL_MSG_CONFIG = 2
NFQNL_MSG_VERDICT_BATCH = 3
NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQA_CFG_CMD = 1
NFQA_CFG_PARAMS = 2
NFQA_CFG_QUEUE_MAXLEN = 3
NFQA_CFG_MASK = 4
NFQA_CFG_FLAGS = 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NFQA_CFG_F_FAIL_OPEN = 0x1
NF_ACCEPT = 1
NLA_TYPE_MASK = 0x3FFF
QUEUE_MAXLEN = 16384
RECV_BYTES = 1 << 16
RCVBUF_BYTES = 8 << 20
DRAIN_MAX = 256  # datagrams read per wake-up, so releasing never waits long
_NLMSG = struct.Struct("=IHHII")
_NLA = struct.Struct("=HH")


def _align(n: int) -> int:
    return (n + 3) & ~3


def attribute(kind: int, payload: bytes) -> bytes:
    length = _NLA.size + len(payload)
    return _NLA.pack(length, kind) + payload + b"\0" * (_align(length) - length)


def queue_message(msg: int, queue: int, attributes: Sequence[bytes], flags: int = NLM_F_REQUEST,
                  seq: int = 0) -> bytes:
    """One nfnetlink message of the queue subsystem (pure)."""
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(queue)) + b"".join(attributes)
    return _NLMSG.pack(_NLMSG.size + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg, flags, seq,
                       0) + body


def config_messages(queue: int) -> list[bytes]:
    """Bind ``queue``, copy metadata only, a long queue that fails open (each acknowledged)."""
    flags = NLM_F_REQUEST | NLM_F_ACK
    bind = attribute(NFQA_CFG_CMD, struct.pack("!BBH", NFQNL_CFG_CMD_BIND, 0, socket.AF_UNSPEC))
    params = attribute(NFQA_CFG_PARAMS, struct.pack("!IB", 0, NFQNL_COPY_META))
    maxlen = attribute(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", QUEUE_MAXLEN))
    fail_open = [attribute(NFQA_CFG_MASK, struct.pack("!I", NFQA_CFG_F_FAIL_OPEN)),
                 attribute(NFQA_CFG_FLAGS, struct.pack("!I", NFQA_CFG_F_FAIL_OPEN))]
    return [queue_message(NFQNL_MSG_CONFIG, queue, [bind], flags, seq=1),
            queue_message(NFQNL_MSG_CONFIG, queue, [params, maxlen, *fail_open], flags, seq=2)]


def accept_upto(queue: int, packet_id: int) -> bytes:
    """Accept every queued packet whose id is at most ``packet_id``."""
    header = attribute(NFQA_VERDICT_HDR, struct.pack("!II", NF_ACCEPT, packet_id))
    return queue_message(NFQNL_MSG_VERDICT_BATCH, queue, [header])


def _messages(data: bytes) -> Iterator[tuple[int, bytes]]:
    offset = 0
    while offset + _NLMSG.size <= len(data):
        length, kind, _flags, _seq, _pid = _NLMSG.unpack_from(data, offset)
        if length < _NLMSG.size or offset + length > len(data):
            return
        yield kind, data[offset + _NLMSG.size:offset + length]
        offset += _align(length)


def packet_ids(data: bytes) -> list[int]:
    """Ids of the queued packets announced in one datagram (pure)."""
    ids: list[int] = []
    for kind, body in _messages(data):
        if kind != (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            continue
        offset = 4  # nfgenmsg
        while offset + _NLA.size <= len(body):
            length, attr_kind = _NLA.unpack_from(body, offset)
            if length < _NLA.size:
                break
            if attr_kind & NLA_TYPE_MASK == NFQA_PACKET_HDR and length >= _NLA.size + 4:
                ids.append(struct.unpack_from("!I", body, offset + _NLA.size)[0])
            offset += _align(length)
    return ids


def ack_errors(data: bytes) -> list[int]:
    """The error codes (negative errno, 0 for success) of the acknowledgements in ``data``."""
    return [struct.unpack_from("=i", body)[0] for kind, body in _messages(data)
            if kind == NLMSG_ERROR and len(body) >= 4]


class Delayer:
    """Holds each queued packet ``delay_s``, then accepts it."""

    def __init__(self, queue: int, delay_s: float) -> None:
        self.queue = queue
        self.delay_s = delay_s
        self.pending: collections.deque[tuple[float, int]] = collections.deque()
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.stopping = False

    def bind(self) -> None:
        self.sock.setsockopt(socket.SOL_SOCKET, 33, RCVBUF_BYTES)  # SO_RCVBUFFORCE
        self.sock.setsockopt(SOL_NETLINK, NETLINK_NO_ENOBUFS, 1)
        self.sock.bind((0, 0))
        for message in config_messages(self.queue):
            self.sock.send(message)
            errors = ack_errors(self.sock.recv(RECV_BYTES))
            if any(errors):
                raise OSError(-min(errors), f"nfnetlink_queue refused queue {self.queue}: "
                                            f"{os.strerror(-min(errors))}")
        self.sock.setblocking(False)

    def _receive(self) -> None:
        for _ in range(DRAIN_MAX):
            try:
                data = self.sock.recv(RECV_BYTES)
            except (BlockingIOError, InterruptedError):
                return
            due = time.monotonic() + self.delay_s
            self.pending.extend((due, packet_id) for packet_id in packet_ids(data))

    def _release(self, everything: bool = False) -> None:
        now, last = time.monotonic(), None
        while self.pending and (everything or self.pending[0][0] <= now):
            last = self.pending.popleft()[1]
        if last is not None:
            self.sock.setblocking(True)
            self.sock.send(accept_upto(self.queue, last))
            self.sock.setblocking(False)

    def run(self) -> None:
        poller = select.poll()
        poller.register(self.sock, select.POLLIN)
        while not self.stopping:
            wait_s = self.pending[0][0] - time.monotonic() if self.pending else 1.0
            if poller.poll(max(0, math.ceil(wait_s * 1000))):
                self._receive()
            self._release()
        self._release(everything=True)
        self.sock.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.delay")
    parser.add_argument("--queue", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, required=True)
    parser.add_argument("--pidfile", type=Path, required=True)
    args = parser.parse_args(argv)
    delayer = Delayer(args.queue, args.delay_ms / 1000)

    def stop(_signum: int, _frame: object) -> None:
        delayer.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        delayer.bind()
    except OSError as exc:
        print(f"lab.delay: {exc}", file=sys.stderr)
        return 1
    args.pidfile.write_text(f"{os.getpid()}\n")
    print(f"lab.delay: queue {args.queue}, {args.delay_ms:g} ms", flush=True)
    try:
        delayer.run()
    finally:
        args.pidfile.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
