#!/usr/bin/env python3
"""Writes the seed corpus (corpus/<target>/) of the libFuzzer targets: valid and
nearly valid inputs of each decoder, so fuzzing starts past the first checks.
Run it again after changing a wire format; the files are committed."""
import os
import struct

here = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(here, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def remote_buffer(address, rkey, length, version=1):
    return struct.pack(">B3xIQQ", version, rkey, address, length)


write("remote_buffer", "valid", remote_buffer(0x7F0000001000, 0x1234, 65536))
write("remote_buffer", "valid_long", remote_buffer(1, 2, 3) + b"\0" * 8)
write("remote_buffer", "truncated", remote_buffer(1, 2, 3)[:20])
write("remote_buffer", "bad_version", remote_buffer(1, 2, 3, version=2))



def qp_endpoint(link, qpn, psn, lid, port, mtu_code, gid, rr, depth, version=1):
    return (b"QP" + struct.pack(">BBIIHBB", version, link, qpn, psn, lid, port, mtu_code) + gid +
            struct.pack(">BB", rr, depth) + b"\0" * 6)


ROCE_GID = bytes(10) + b"\xff\xff" + bytes([10, 0, 0, 1])
write("queue_pair_endpoint", "roce", qp_endpoint(2, 0x11, 0x123456, 0, 1, 3, ROCE_GID, 16, 16))
write("queue_pair_endpoint", "infiniband", qp_endpoint(1, 0xabcdef, 7, 5, 1, 5, bytes(16), 1, 1))
write("queue_pair_endpoint", "bad_version",
      qp_endpoint(2, 0x11, 1, 0, 1, 3, ROCE_GID, 1, 1, version=2))
write("queue_pair_endpoint", "truncated", qp_endpoint(2, 0x11, 1, 0, 1, 3, ROCE_GID, 1, 1)[:39])

MAGIC = 0x52444654


def header(t, version=4):
    return struct.pack(">IBBH", MAGIC, version, t, 0)


write("file_protocol", "hello", header(1) + struct.pack(">IHH", 1 << 20, 8, 0))
write("file_protocol", "hello_ack",
      header(2) + struct.pack(">IHHQIIQ", 1 << 20, 4, 0, 0x7F0000000000, 0x99, 65536, 4 << 20))
for name, kind, flags, mode, size, text in [("file_begin", 1, 0, 0o644, 1000, "dir/file.txt"),
                                            ("file_begin_resume", 1, 1, 0o644, 1000, "f.bin"),
                                            ("dir_begin", 2, 0, 0o755, 0, "dir"),
                                            ("bad_name", 1, 0, 0o644, 1, "../etc/passwd")]:
    raw = text.encode()
    write("file_protocol", name,
          header(3) + struct.pack(">IBBHIQ", 7, kind, flags, len(raw), mode, size) + raw)
write("file_protocol", "file_end", header(4) + struct.pack(">IIQ", 7, 0xE3069283, 1000))
write("file_protocol", "credit", header(5) + struct.pack(">II", 42, 0))
write("file_protocol", "status", header(6) + struct.pack(">IHHII", 7, 4, 0, 12, 0))
write("file_protocol", "resume_point", header(9) + struct.pack(">IIQ", 7, 0xE3069283, 65536))
write("file_protocol", "resume_from", header(10) + struct.pack(">IIQ", 7, 0, 65536))
write("file_protocol", "version_3_hello", header(1, version=3) + struct.pack(">IHH", 1 << 20, 8, 0))


def record(kind, mode, name, data=b"", crc=0):
    raw = name.encode()
    return struct.pack(">BBHIII", kind, 0, len(raw), mode, len(data), crc) + raw + data


write("file_protocol", "file_batch",
      header(11) + struct.pack(">IHH", 7, 3, 0) + record(2, 0o755, "dir") +
      record(1, 0o644, "dir/a.txt", b"hello", 0x9A71BB4C) + record(1, 0o600, "empty"))
write("file_protocol", "bad_magic", struct.pack(">IBBH", 0x12345678, 1, 1, 0) + b"\0" * 8)

params = b"RB" + struct.pack("<BBBBHIII", 1, 1, 1, 1, 16, 4096, 64, 0)
write("bench_wire", "send_bandwidth", params)
write("bench_wire", "write_latency_raw",
      b"RB" + struct.pack("<BBBBHIII", 1, 2, 2, 2, 1, 64, 0, 0) +
      struct.pack("<QIQ", 0x7F0000001000, 0x55, 4096))
write("bench_wire", "bad_version", b"RB" + struct.pack("<BBBBHIII", 9, 1, 1, 0, 1, 1, 0, 0))

write("flow_rule", "mac", "01:80:c2:00:00:0e")
write("flow_rule", "mac_dashes", "52-54-00-12-34-56")
write("flow_rule", "ipv4", "192.0.2.1")
# count 1; a rule with dst_mac, ethertype, udp dst_port; then a tagged UDP frame.
rule = struct.pack(">H", 1 | 4 | 64 | 256) + bytes.fromhex("ffffffffffff") + \
    struct.pack(">H", 0x0800) + b"\x01" + struct.pack(">H", 4791)
frame = bytes.fromhex("ffffffffffff525400123456") + struct.pack(">H", 0x0800) + \
    bytes.fromhex("450000200000000040110000c0000201c0000202") + struct.pack(">HHHH", 1234, 4791, 12, 0)
write("flow_rule", "udp_rule_frame", b"\x01" + rule + b"\x01" + struct.pack(">H", 5) + frame)
write("flow_rule", "any_rule_frame", b"\x01" + struct.pack(">H", 0) + b"\x00" + frame)

write("raw_ping_options", "request",
      "request\0--interface\0veth0\0--ip\0192.0.2.1\0--to\0192.0.2.2\0--count\0003\0"
      "--interval\0000.2\0--timeout\0001\0--backend\0packet")
write("raw_ping_options", "responder",
      "responder\0--interface\0veth1\0--ip\0192.0.2.2\0--mac\00052:54:00:12:34:56")

write("address", "ipv4", b"\x1d\x2f" + b"192.0.2.1")
write("address", "ipv6_scope", b"\x1d\x2f" + b"fe80::1%1")
write("address", "ipv6", b"\x00\x00" + b"2001:db8::7")
write("address", "sockaddr_in", struct.pack("<H", 2) + struct.pack(">H4s", 7471, bytes([192, 0, 2, 1])))

write("cm_private_data", "bench_params", bytes([len(params)]) + params)
write("cm_private_data", "remote_buffer", b"\x18" + remote_buffer(0x1000, 7, 4096))
write("cm_private_data", "full", b"\xff" + bytes(range(255)))


def stream_record(flags, imm, body=b""):
    """One message (or local turn) of fuzz_stream_protocol: flags, size, immediate, body."""
    return struct.pack("<BBI", flags, len(body), imm) + body


def stream_ad(ring, address=0x7F0000002000, rkey=0x99):
    return struct.pack("<IIQII", 3 << 28 | 1, ring, address, rkey, 0)


AD = stream_record(0, 0, stream_ad(8192))
write("stream_protocol", "advertise_write_read",
      AD + stream_record(1 | 2, 100) + stream_record(4 | 8, 100) + stream_record(1, 1 << 28 | 100))
write("stream_protocol", "iwarp_words",
      AD + stream_record(0, 0, struct.pack("<I", 64)) + stream_record(0, 0, struct.pack("<I", 2 << 28)))
write("stream_protocol", "past_credit", AD + stream_record(1 | 2, 8192) + stream_record(1 | 2, 1))
write("stream_protocol", "bad_advertisement", stream_record(0, 0, stream_ad(100)))


def stream_ad_v2(ring, send, address=0x7F0000002000, rkey=0x99):
    """Version 2: the ring, then the send buffer a reader pulls from."""
    return struct.pack("<IIQIIIQI", 3 << 28 | 2, ring, address, rkey, 0, send, address + ring, rkey + 1)


AD2 = stream_record(0, 0, stream_ad_v2(8192, 4096))
write("stream_protocol", "pull_then_write",
      AD2 + stream_record(1, 4 << 28 | 1000) + stream_record(1 | 2, 500) + stream_record(4 | 16, 0)
      + stream_record(4 | 32, 3000) + stream_record(1, 5 << 28 | 3000))
write("stream_protocol", "pull_past_send_buffer", AD2 + stream_record(1, 4 << 28 | 5000))


def rpc_frame(kind, call_id, word=0, deadline=0, payload=b""):
    """One frame of the RPC layer (lib/rpc/rpc_wire.hpp)."""
    return b"RP" + struct.pack("<BBIQII", kind, 0, len(payload), call_id, word, deadline) + payload


def fnv1a(name):
    h = 2166136261
    for c in name.encode():
        h = ((h ^ c) * 16777619) & 0xFFFFFFFF
    return h


# fuzz_rpc_connection: the first byte picks the side (odd: the server, fed a client's bytes;
# even: the client, two bytes of calls and cancellations, then a server's replies).
HELLO = rpc_frame(1, 1 << 20, 1)
write("rpc_connection", "server_calls", b"\x01" + HELLO +
      rpc_frame(2, 1, fnv1a("echo"), 1000, b"hello") + rpc_frame(2, 2, fnv1a("yield"), 0, b"x" * 20) +
      rpc_frame(5, 2) + rpc_frame(2, 3, fnv1a("fail")) + rpc_frame(2, 4, 12345))
write("rpc_connection", "server_limits", b"\x01" + HELLO +
      b"".join(rpc_frame(2, i, fnv1a("yield"), 5, b"y") for i in range(1, 12)))
write("rpc_connection", "server_bad_version", b"\x01" + rpc_frame(1, 1, 2))


def call_id(index, generation=1):
    return generation << 32 | index


write("rpc_connection", "client_replies", b"\x00\x03\x00" +
      rpc_frame(3, call_id(1), payload=b"one") + rpc_frame(4, call_id(0), 7, payload=b"failed") +
      rpc_frame(3, call_id(2), payload=b"two" * 100))
write("rpc_connection", "client_cancels", b"\x00\x05\x0b" +
      rpc_frame(3, call_id(0)) + rpc_frame(3, call_id(0)) + rpc_frame(3, call_id(4, 2)) +
      rpc_frame(3, call_id(3), payload=b"z" * 2000))
