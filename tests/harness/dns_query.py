"""One A query to the nodes' CoreDNS, answered as the server has it: a client that caches nothing
itself (the host's resolver would keep answers and denials of its own)."""

from __future__ import annotations

import socket
import struct

from attrs import frozen

from tests.harness.nodes import HOST_IP

NOERROR, NXDOMAIN = 0, 3


@frozen
class Answer:
    rcode: int  # NOERROR, NXDOMAIN, ...
    ttl: int | None  # of the first answer; None when there is none
    address: str | None  # the first answer's IPv4 address


def dns_query(name: str, port: int = 53) -> Answer:
    qname = b"".join(bytes([len(part)]) + part.encode() for part in name.rstrip(".").split(".")) + b"\0"
    query = struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + qname + struct.pack("!HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(2)
        sock.sendto(query, (HOST_IP, port))
        reply = sock.recv(4096)
    flags, answers = struct.unpack("!H", reply[2:4])[0], struct.unpack("!H", reply[6:8])[0]
    if not answers:
        return Answer(flags & 0xF, None, None)
    at = 12 + len(qname) + 4  # past the header and the question: the answer's name
    if reply[at] & 0xC0 == 0xC0:  # a pointer to the question's name
        at += 2
    else:  # the name in full (CoreDNS does not always compress)
        while reply[at]:
            at += 1 + reply[at]
        at += 1
    ttl = struct.unpack("!I", reply[at + 4 : at + 8])[0]  # past type and class
    # Past the TTL and the data's length: an A record's four bytes.
    address = socket.inet_ntoa(reply[at + 10 : at + 14])
    return Answer(flags & 0xF, ttl, address)
