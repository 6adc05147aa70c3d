"""A pure-Python NFQUEUE delayer: hold each queued packet for a fixed time, then accept it.

Run inside a network namespace (``ip netns exec NS python nfqdelay.py QUEUE DELAY_S``)
after nothing but the standard library.  It binds netfilter queue QUEUE over a raw
``AF_NETLINK``/``NETLINK_NETFILTER`` socket in copy mode META (no payload), with GSO
packets queued whole, keeps a FIFO of (due time, packet id) and accepts every due
packet with one batch verdict (a batch verdict accepts all ids up to the one given;
ids rise in queueing order and every packet gets the same delay, so order holds).

It prints ``ready`` once bound, exits on SIGTERM/SIGINT after releasing what it
holds, and exits by itself when the process given by ``--watch PID`` is gone.
"""

from __future__ import annotations

import collections
import os
import select
import signal
import socket
import struct
import sys
import time

NETLINK_NETFILTER = 12
NETLINK_NO_ENOBUFS = 5
SOL_NETLINK = 270
SO_SNDBUFFORCE, SO_RCVBUFFORCE = 32, 33  # asm-generic values (x86, arm)
NLMSG_ERROR = 2
NLM_F_REQUEST, NLM_F_ACK = 1, 4
SUBSYS_QUEUE = 3
MSG_PACKET, MSG_VERDICT, MSG_CONFIG, MSG_VERDICT_BATCH = 0, 1, 2, 3
CFG_CMD, CFG_PARAMS, CFG_QUEUE_MAXLEN, CFG_MASK, CFG_FLAGS = 1, 2, 3, 4, 5
CMD_BIND, CMD_UNBIND = 1, 2
COPY_META = 1
F_GSO = 4
ATTR_PACKET_HDR, ATTR_VERDICT_HDR = 1, 2
NF_ACCEPT = 1
NLA_TYPE_MASK = 0x3FFF
WATCH_EVERY_S = 0.5


def nlattr(kind: int, payload: bytes) -> bytes:
    """One netlink attribute, padded to 4 bytes."""
    size = 4 + len(payload)
    return struct.pack("=HH", size, kind) + payload + b"\0" * (-size % 4)


def nlmsg(msg: int, queue: int, attrs: bytes, seq: int = 0, flags: int = NLM_F_REQUEST) -> bytes:
    """One nfnetlink queue message (nlmsghdr + nfgenmsg + attributes)."""
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(queue)) + attrs
    return struct.pack("=IHHII", 16 + len(body), (SUBSYS_QUEUE << 8) | msg, flags, seq, 0) + body


def config(queue: int, seq: int, *attrs: bytes) -> bytes:
    """A config request asking for an acknowledgement."""
    return nlmsg(MSG_CONFIG, queue, b"".join(attrs), seq, NLM_F_REQUEST | NLM_F_ACK)


def check_ack(sock: socket.socket, seq: int) -> None:
    """Read the acknowledgement of request seq; raise OSError if the kernel refused it."""
    while True:
        data = sock.recv(65536)
        for kind, mseq, body in messages(data):
            if kind == NLMSG_ERROR and mseq == seq:
                err = -struct.unpack_from("=i", body)[0]
                if err:
                    raise OSError(err, f"nfqueue config refused: {os.strerror(err)}")
                return


def messages(data: bytes):
    """Yield (type, seq, body) of each netlink message in one datagram."""
    off = 0
    while off + 16 <= len(data):
        size, kind, _flags, seq, _pid = struct.unpack_from("=IHHII", data, off)
        if size < 16:
            return
        yield kind, seq, data[off + 16:off + size]
        off += (size + 3) & ~3


def packet_id(body: bytes) -> int | None:
    """The packet id in a queued-packet message body (after its nfgenmsg), or None."""
    off = 4
    while off + 4 <= len(body):
        size, kind = struct.unpack_from("=HH", body, off)
        if size < 4:
            return None
        if kind & NLA_TYPE_MASK == ATTR_PACKET_HDR:
            return struct.unpack_from(">I", body, off + 4)[0]
        off += (size + 3) & ~3
    return None


def open_queue(queue: int, maxlen: int) -> socket.socket:
    """A netlink socket bound to the queue: META copy, GSO packets whole, big buffers."""
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    sock.bind((0, 0))
    for opt in (SO_RCVBUFFORCE, SO_SNDBUFFORCE):
        try:
            sock.setsockopt(socket.SOL_SOCKET, opt, 8 << 20)
        except OSError:  # not privileged: keep the default size
            pass
    sock.setsockopt(SOL_NETLINK, NETLINK_NO_ENOBUFS, 1)
    sock.send(config(queue, 1, nlattr(CFG_CMD, struct.pack(">BxH", CMD_BIND, 0))))
    check_ack(sock, 1)
    sock.send(config(queue, 2, nlattr(CFG_PARAMS, struct.pack(">IB", 0, COPY_META))))
    check_ack(sock, 2)
    sock.send(config(queue, 3, nlattr(CFG_QUEUE_MAXLEN, struct.pack(">I", maxlen)),
                     nlattr(CFG_FLAGS, struct.pack(">I", F_GSO)),
                     nlattr(CFG_MASK, struct.pack(">I", F_GSO))))
    check_ack(sock, 3)
    sock.setblocking(False)
    return sock


def accept_upto(sock: socket.socket, queue: int, pid: int) -> None:
    """Accept every queued packet with an id up to pid (one batch verdict)."""
    hdr = nlattr(ATTR_VERDICT_HDR, struct.pack(">II", NF_ACCEPT, pid))
    sock.send(nlmsg(MSG_VERDICT_BATCH, queue, hdr))


class Delayer:
    """The FIFO of held packets and the loop that releases them when due."""

    def __init__(self, sock: socket.socket, queue: int, delay_s: float, watch: int = 0):
        self.sock, self.queue, self.delay = sock, queue, delay_s
        self.watch = watch
        self.held: collections.deque = collections.deque()
        self.stopping = False
        self.early = 0.0  # how much sooner to wake than due: the timers' mean lateness

    def receive(self) -> None:
        """Read every pending queued-packet message and note its due time."""
        while True:
            try:
                data = self.sock.recv(1 << 16)
            except BlockingIOError:
                return
            due = time.monotonic() + self.delay
            for kind, _seq, body in messages(data):
                if kind == (SUBSYS_QUEUE << 8) | MSG_PACKET:
                    pid = packet_id(body)
                    if pid is not None:
                        self.held.append((due, pid))

    def release(self, now: float) -> None:
        """Accept the packets due by now + early (all of them once stopping)."""
        last = None
        held = self.held
        now += self.early
        while held and (self.stopping or held[0][0] <= now):
            last = held.popleft()[1]
        if last is not None:
            accept_upto(self.sock, self.queue, last)

    def watched_gone(self) -> bool:
        """Whether the watched process has exited (never, with no watch)."""
        if not self.watch:
            return False
        try:
            os.kill(self.watch, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    def wait(self, now: float) -> bool:
        """Sleep until the socket is readable or the next packet is due; True if readable."""
        if not self.held:
            return bool(select.select([self.sock], [], [], WATCH_EVERY_S)[0])
        target = self.held[0][0] - self.early
        timeout = min(max(0.0, target - now), WATCH_EVERY_S)
        if select.select([self.sock], [], [], timeout)[0]:
            return True
        if timeout > 0:  # woke by the timer: learn how late timers fire here
            late = time.monotonic() - target
            self.early = min(max(0.0, 0.9 * self.early + 0.1 * late), self.delay / 2)
        return False

    def run(self) -> None:
        """Receive and release until stopped, then release whatever is held."""
        next_watch = time.monotonic() + WATCH_EVERY_S
        while not self.stopping:
            if self.wait(time.monotonic()):
                self.receive()
            now = time.monotonic()
            self.release(now)
            if now >= next_watch:
                next_watch = now + WATCH_EVERY_S
                self.stopping = self.stopping or self.watched_gone()
        self.stopping = True
        self.release(time.monotonic())


def main(argv: list[str]) -> int:
    """Entry point: nfqdelay.py QUEUE DELAY_S [--maxlen N] [--watch PID] [--tag TAG]."""
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("queue", type=int)
    parser.add_argument("delay_s", type=float)
    parser.add_argument("--maxlen", type=int, default=16384)
    parser.add_argument("--watch", type=int, default=0, help="exit when this pid is gone")
    parser.add_argument("--tag", default="", help="a name to find this process by (unused)")
    args = parser.parse_args(argv)
    delayer = Delayer(open_queue(args.queue, args.maxlen), args.queue, args.delay_s, args.watch)

    def stop(_signum, _frame):
        delayer.stopping = True
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("ready", flush=True)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    delayer.run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
