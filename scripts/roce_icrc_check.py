#!/usr/bin/env python3
"""Recompute the ICRC of every RoCEv2 frame in a pcap, independently of marrow.

InfiniBand Architecture Specification vol. 1, Annex A17.8: CRC-32 (zlib's)
over 8 bytes of 0xff, the IPv4 header with TOS, TTL and checksum set to
0xff, the UDP header with checksum 0xffff, the BTH with byte 4 set to 0xff,
and everything after the BTH up to the ICRC, which is the last 4 bytes of
the IP datagram, least significant byte first.

usage: roce_icrc_check.py FILE.pcap   (Ethernet link type; micro or nano-
second timestamps). Prints one line per bad frame and a summary; exits 1 if
any RoCEv2 frame's ICRC differs, 2 if the file is not a pcap.
"""
import struct
import sys
import zlib


def frames(data: bytes):
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        end = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        end = ">"
    else:
        raise ValueError("not a pcap file")
    linktype = struct.unpack(end + "I", data[20:24])[0]
    if linktype != 1:
        raise ValueError(f"link type {linktype}, not Ethernet")
    off = 24
    n = 0
    while off + 16 <= len(data):
        incl = struct.unpack(end + "I", data[off + 8:off + 12])[0]
        n += 1
        yield n, data[off + 16:off + 16 + incl]
        off += 16 + incl


def icrc_of(frame: bytes):
    """(found, computed) for a RoCEv2 frame, or None for any other frame."""
    if len(frame) < 14 + 20 + 8 + 12 + 4 or frame[12:14] != b"\x08\x00":
        return None
    ip = bytearray(frame[14:34])
    if ip[0] != 0x45 or ip[9] != 17:
        return None
    tot = struct.unpack(">H", ip[2:4])[0]
    udp = bytearray(frame[34:42])
    if struct.unpack(">H", udp[2:4])[0] != 4791:
        return None
    datagram_end = 14 + tot
    transport = bytearray(frame[42:datagram_end - 4])
    found = struct.unpack("<I", frame[datagram_end - 4:datagram_end])[0]
    ip[1] = 0xFF
    ip[8] = 0xFF
    ip[10:12] = b"\xff\xff"
    udp[6:8] = b"\xff\xff"
    transport[4] = 0xFF
    computed = zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(transport)) & 0xFFFFFFFF
    return found, computed


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        data = open(argv[1], "rb").read()
        checked = bad = 0
        for n, f in frames(data):
            r = icrc_of(f)
            if r is None:
                continue
            checked += 1
            if r[0] != r[1]:
                bad += 1
                print(f"frame {n}: ICRC {r[0]:#010x} on the wire, {r[1]:#010x} computed")
    except ValueError as e:
        print(f"error: {argv[1]}: {e}", file=sys.stderr)
        return 2
    print(f"{checked} RoCEv2 frames, {checked - bad} ICRC ok, {bad} bad")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
