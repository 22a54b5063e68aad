"""Random TLP headers packed by cocotbext-pcie's Tlp class (MIT, PyPI), an
implementation nobody here wrote. Prints one JSON object per header: the
fields it was given and the header dwords cocotbext-pcie packed from them.
Usage: tlp_cocotb.py SEED COUNT"""
import json
import random
import struct
import sys

from cocotbext.pcie.core.tlp import Tlp, TlpType, TlpAttr, TlpAt, TlpTc, CplStatus
from cocotbext.pcie.core.utils import PcieId

PACKABLE = [t for t in TlpType if not t.name.startswith(("MSG", "PREFIX"))]


def main():
    rng = random.Random(int(sys.argv[1]))
    for _ in range(int(sys.argv[2])):
        t = rng.choice(PACKABLE)
        tlp = Tlp()
        tlp.fmt_type = t
        tlp.tc = TlpTc(rng.randrange(8))
        tlp.ln = rng.random() < 0.5
        tlp.th = rng.random() < 0.5
        tlp.td = rng.random() < 0.5
        tlp.ep = rng.random() < 0.5
        tlp.attr = TlpAttr(rng.randrange(8))
        tlp.at = TlpAt(rng.randrange(3))
        tlp.length = rng.randrange(1024)
        tlp.tag = rng.randrange(1024)
        tlp.requester_id = PcieId.from_int(rng.randrange(1 << 16))
        tlp.completer_id = PcieId.from_int(rng.randrange(1 << 16))
        tlp.first_be = rng.randrange(16)
        tlp.last_be = rng.randrange(16)
        four = t.value[0] in (1, 3)
        if "CFG" in t.name:
            tlp.address = rng.randrange(1 << 12) & 0xffc
        elif four:
            tlp.address = rng.randrange(1 << 64) & ~3
        else:
            tlp.address = rng.randrange(1 << 32) & ~3
        tlp.ph = rng.randrange(4)
        tlp.status = rng.choice(list(CplStatus))
        tlp.bcm = rng.random() < 0.5
        tlp.byte_count = rng.randrange(4096)
        tlp.lower_address = rng.randrange(128)
        hdr = bytes(tlp.pack_header())
        dws = list(struct.unpack(">%dL" % (len(hdr) // 4), hdr))
        print(json.dumps({
            "name": t.name, "fmt": int(tlp.fmt), "type": int(tlp.type), "tc": int(tlp.tc),
            "ln": tlp.ln, "th": tlp.th, "td": tlp.td, "ep": tlp.ep, "attr": int(tlp.attr),
            "at": int(tlp.at), "length": tlp.length, "tag": tlp.tag,
            "requester_id": int(tlp.requester_id), "completer_id": int(tlp.completer_id),
            "first_be": tlp.first_be, "last_be": tlp.last_be, "address": tlp.address,
            "ph": tlp.ph, "status": int(tlp.status), "bcm": tlp.bcm,
            "byte_count": tlp.byte_count, "lower_address": tlp.lower_address, "dws": dws,
        }))


if __name__ == "__main__":
    main()
