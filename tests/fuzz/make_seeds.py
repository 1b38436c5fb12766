#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (corpus/<target>/*): valid
frames and conversations of each protocol, so that fuzzing starts past the
first checks. Run from tests/fuzz/ when the protocols change; the output
is checked in."""
import os
import struct

SECRET = b"0123456789abcdef0123456789abcdef"
T = dict(HELLO=1, HELLO_ACK=2, MSG=3, RECV_REQ=4, DELIVER=5, PROBE=6, PROBE_REPLY=7,
         SYNC_ACK=8, BYE=9, BYE_ACK=10, ERROR=11, EVENT=12, EVENT_ACK=13, CANCEL=14,
         CANCEL_ACK=15, TRIM=16)


def frame(t, src=0, dst=0, tag=0, ctx=0, clock=0, flags=0, payload=b""):
    return struct.pack("<BBHiiiIIQ", 1, t, flags, src, dst, tag, ctx, len(payload),
                       clock) + payload


def hello(rank, world=2, inc=0, flags=0, secret=SECRET):
    return frame(T["HELLO"], rank, rank, flags=flags,
                 payload=struct.pack("<IIII", inc, world, 0, 0) + secret)


def write(target, name, data):
    os.makedirs(os.path.join("corpus", target), exist_ok=True)
    with open(os.path.join("corpus", target, name), "wb") as f:
        f.write(data)


# frame: 8 bytes of limits (world size, largest payload), then a frame.
lim = struct.pack("<II", 4, 1 << 20)
write("frame", "hello", lim + hello(1, 4))
write("frame", "msg", lim + frame(T["MSG"], 0, 1, 5, 0, 3, 1, b"abc"))
write("frame", "recv_any", lim + frame(T["RECV_REQ"], -1, 0, -1, 0, 7))
write("frame", "probe", lim + frame(T["PROBE"], 1, 0, 2, 0, 8, 2))
write("frame", "event", lim + frame(T["EVENT"], 0, 0, 1, 0, 0, 0, b"\0" * 8))
write("frame", "event_ack", lim + frame(T["EVENT_ACK"], 0, 0, clock=4, flags=8))
write("frame", "trim", lim + frame(T["TRIM"], 0, 0, clock=9, payload=b"\0" * 8))
write("frame", "error", lim + frame(T["ERROR"], tag=3, payload=b"bad"))
write("frame", "unknown_world", struct.pack("<II", 0, 64) + frame(T["BYE"], 3, 3))

# session: mode byte (1 hello, 2 rank 1 too, 4 cut-through), piece byte, stream.
conv = (frame(T["MSG"], 0, 1, 5, 0, 0, 0, b"x" * 10) +
        frame(T["MSG"], 0, 0, 6, 0, 1, 1, b"y" * 3) +
        frame(T["RECV_REQ"], 0, 0, 6, 0, 0) +
        frame(T["RECV_REQ"], -1, 0, -1, 0, 1) +
        frame(T["PROBE"], -1, 0, -1, 0, 2, 2) +
        frame(T["PROBE"], 1, 0, 9, 0, 3) +
        frame(T["CANCEL"], 0, 0, clock=1) +
        frame(T["EVENT"], 0, 0, 1, 0, 0, 0, b"\1" * 8) +
        frame(T["EVENT"], 0, 0, 3, 0, 1, 0, b"\1") +
        frame(T["EVENT_ACK"], 0, 0, clock=0, flags=8) +
        frame(T["TRIM"], 0, 0, clock=1, payload=struct.pack("<Q", 1)) +
        frame(T["MSG"], 0, 0, 6, 0, 0, 0, b"dup") +
        frame(T["BYE"], 0, 0))
write("session", "conversation", bytes([3, 0]) + conv)
write("session", "small_pieces", bytes([3, 7]) + conv)
write("session", "cut_through", bytes([7, 40]) +
      frame(T["MSG"], 0, 1, 1, 0, 0, 0, bytes(range(256)) * 2) +
      frame(T["RECV_REQ"], 1, 0, 1, 0, 0))
write("session", "unauthenticated", bytes([0, 0]) + hello(0) + conv)
write("session", "takeover", bytes([3, 0]) + hello(0, 2, 1, flags=0x10) + conv)
write("session", "garbage", bytes([1, 3]) + b"GET / HTTP/1.0\r\n\r\n")

# ckpt: a stream of checkpoint frames.
def ck(t, payload=b"", arg=0):
    return b"CK" + struct.pack("<BBIQ", 1, t, len(payload), arg) + payload


job = b"job.1"
write("ckpt", "upload", ck(1, SECRET) + ck(3, struct.pack("<IIQ", 2, 0, 5) + job) +
      ck(4, b"image") + ck(5, struct.pack("<QQ", 5, 0x1234)))
write("ckpt", "fetch", ck(1, SECRET) + ck(7, struct.pack("<II", 2, 0) + job))
write("ckpt", "answers", ck(2) + ck(6, arg=5) + ck(8, struct.pack("<QQQ", 5, 5, 9)) +
      ck(9, b"image") + ck(10) + ck(11, b"no", arg=11))

# ctrl_line: 2 bytes (job size, replicas), then report lines.
write("ctrl_line", "reports", bytes([3, 1]) + b"hello 1 0 0\nheartbeat 1 0 0\n"
      b"init 1 0 0 start\nrestored 1 2 0 3 4 5\ncrashed 1 0 0 11 99\n"
      b"finalized 1 0 0\nabort 1 -3\n")
write("ctrl_line", "replicas", bytes([7, 2]) + b"hello 3 4294967295 1\ninit 0 1 1 image\n")
write("ctrl_line", "hostile", bytes([3, 0]) + b"hello 4294967295 0 0\nhello -1 0 0\n"
      b"abort 0 2147483648\n")

# hosts: a byte (ranks to place), then a hosts file (or a --host list).
write("hosts", "file", bytes([8]) + b"# nodes\nn1 slots=2 addr=10.0.0.1\n"
      b"n2 slots=4 addr=10.0.0.2 roles=rank,cm\nsvc addr=10.0.0.3 roles=cm,ckpt\n")
write("hosts", "list", bytes([5]) + b"a,b:2,c:3")
write("hosts", "bad", bytes([1]) + b"a slots=2 slots=3\nb addr=1.2.3.300\n")

# units: one number, size, duration or address per input.
for name, text in [("long", b"-123"), ("size", b"64MiB"), ("duration", b"1.5ms"),
                   ("hostport", b"127.0.0.1:7000"), ("zeros", b"007")]:
    write("units", name, text)

# cmdline: argv[1..] separated by NUL bytes, given to every program's parser.
def argv(*words):
    return b"\0".join(w.encode() for w in words)


write("cmdline", "cmrun", argv("-n", "4", "--cms", "2", "--mode", "multiplexer", "--threads", "3",
                              "--timeout", "30s", "--log-mem", "64MiB", "--", "prog", "-x"))
write("cmdline", "cmrun_ft", argv("-np", "3", "--kill-every", "500ms", "--kill-rank", "1",
                                 "--kill-count", "2", "--kill-signal", "TERM", "--seed", "7",
                                 "--heartbeat-timeout=2s", "--status", "-vv", "prog"))
write("cmdline", "cmrun_hosts", argv("-n", "4", "--host", "a,b:2,c", "--launch", "ssh",
                                    "--kill-host", "b@200ms", "--map-by", "host",
                                    "--export", "FOO=1", "--control-addr", "10.0.0.1", "prog"))
write("cmdline", "cmrun_repl", argv("-n2", "--replicate", "2", "--kill-at", "1:200ms",
                                   "--kill-replica", "0", "--transport=direct", "prog"))
write("cmdline", "cmrun_ckpt", argv("-n", "2", "--ckpt-dir", "d", "--ckpt-every", "1s",
                                   "--spill-dir", ".", "--cut-through-min", "0", "prog"))
write("cmdline", "cmserver", argv("--mode", "specialized", "--threads", "4", "--listen",
                                 "127.0.0.1:0", "--no-unix", "--ready-fd", "3", "--report-fd",
                                 "4", "--max-message", "1M", "--world-size", "8", "-v"))
write("cmdline", "cmrun_cm_restart", argv("-n", "4", "--cms", "2", "--cm-restart",
                                         "--max-cm-restarts", "2", "--kill-cm-at", "1:300ms",
                                         "--kill-cm-every", "1s", "--kill-count", "3", "prog"))
write("cmdline", "cmserver_journal", argv("--unix", "unix:@cm-0", "--journal", "j",
                                         "--cut-through-min", "64K", "--secret-file", "s"))
write("cmdline", "ckptserver", argv("--dir", "d", "--keep", "3", "--level", "-5",
                                   "--max-image", "1G", "--reset-corrupt-store",
                                   "--secret-file", "s"))
write("cmdline", "npcm", argv("-l", "1", "-u", "4MiB", "-p", "0", "-o", "out", "-sraSzxq",
                             "-t", "0.05", "-T", "2"))
write("cmdline", "help", argv("--he"))
