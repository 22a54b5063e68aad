#!/usr/bin/env python3
"""Transcribe mlx5_ifc.h `struct mlx5_ifc_<name>_bits` layouts into the
hw-specs schema (hw-specs/README.md), as the PRM section of hw-specs/mlx5.toml.

mlx5_ifc.h declares every PRM bit as one `u8` array element, so a field's
offset in bits is its offsetof() and reserved fields are named
reserved_at_<bit offset> -- the schema's own rule. This script packs the bits
into big-endian 32-bit words (`dw_<byte offset>` with bit ranges, or one
be32/be64 when a field fills the word), splits reserved runs at word
boundaries (each piece named by its own bit offset), and keeps nested structs
and byte arrays as `bytes`. Its output is checked, field by field, against
gcc's offsetof() on the same headers (the harness tests/oracle/build.rs generates), so a
transcription error here cannot pass the tests.

usage: ifc_to_toml.py HEADER:TAG:STRUCT[:DIRECTION] ...   (TOML on stdout)
"""
import re
import sys

FIELD = re.compile(r"^\s*(?:u8|struct\s+mlx5_ifc_(\w+)_bits)\s+(\w+)((?:\[[^\]]*\])*)\s*;")


def parse(text, name):
    m = re.search(r"struct mlx5_ifc_%s_bits \{(.*?)\n\};" % name, text, re.S)
    if not m:
        sys.exit("no struct mlx5_ifc_%s_bits" % name)
    out, pos = [], 0
    for line in m.group(1).splitlines():
        f = FIELD.match(line)
        if not f:
            continue
        nested, fname, dims = f.group(1), f.group(2), f.group(3)
        if nested:
            width = struct_bits(text, nested)
            kind = "bytes"
        else:
            ds = [int(d, 0) for d in re.findall(r"\[([^\]]*)\]", dims) if d.strip()]
            if not ds or re.search(r"\[\s*\]|\[0\]", dims):
                continue  # flexible array (pas[], mtt[]): not part of the fixed layout
            width = 1
            for d in ds:
                width *= d
            kind = "bytes" if len(ds) > 1 else "scalar"
        out.append((fname, pos, width, kind))
        pos += width
    return out, pos


def struct_bits(text, name):
    return parse(text, name)[1]


# What the fields marrow's devx path sets mean (PRM; NVSHMEM ibgda.cpp sets the same).
DOCS = {
    "opcode": "command opcode (MLX5_CMD_OP_*)",
    "uid": "devx user id (0: filled by the kernel for devx commands)",
    "op_mod": "opcode modifier",
    "status": "command status (0: OK) in an output; CQ status in cqc",
    "syndrome": "firmware syndrome of a failed command",
    "cqe_sz": "CQE size: 0 = 64 bytes, 1 = 128 bytes",
    "cc": "collapsed CQ: every CQE is written to entry 0",
    "oi": "overrun ignore: the CQ may overrun (no CQ doorbell record updates needed)",
    "log_cq_size": "log2 of CQ entries",
    "uar_page": "UAR page index (mlx5dv_devx_uar.page_id)",
    "c_eqn_or_apu_element": "completion EQ number (mlx5dv_devx_query_eqn)",
    "log_page_size": "log2 of the buffer's page size, minus 12 (MLX5_ADAPTER_PAGE_SHIFT)",
    "dbr_umem_valid": "dbr_addr is an offset into the UMEM named by dbr_umem_id",
    "dbr_addr": "doorbell record address, or offset into the doorbell UMEM",
    "cq_umem_offset": "offset of the CQ ring in its UMEM (PRM; kernel mlx5_ifc.h reserves these bits)",
    "cq_umem_id": "UMEM holding the CQ ring (PRM; kernel mlx5_ifc.h reserves these bits)",
    "cq_umem_valid": "the CQ ring is the UMEM named by cq_umem_id",
    "cqn": "CQ number",
    "qpn": "QP number",
    "st": "service type: 0 = RC (MLX5_QPC_ST_RC)",
    "pm_state": "path migration state: 3 = migrated (MLX5_QPC_PM_STATE_MIGRATED)",
    "pd": "protection domain number",
    "mtu": "path MTU (IB encoding: 5 = 4096)",
    "log_msg_max": "log2 of the largest message",
    "log_rq_size": "log2 of RQ entries",
    "log_rq_stride": "log2 of RQ stride, minus 4",
    "no_sq": "the QP has no send queue",
    "log_sq_size": "log2 of SQ WQEBBs",
    "remote_qpn": "destination QP number",
    "primary_address_path": "struct ads: the primary path",
    "secondary_address_path": "struct ads: the alternate path",
    "retry_count": "transport retries",
    "rnr_retry": "RNR retries (7: infinite)",
    "next_send_psn": "first PSN to send",
    "cqn_snd": "send CQ number",
    "cqn_rcv": "receive CQ number",
    "log_sra_max": "log2 of outstanding RDMA reads/atomics as initiator",
    "log_rra_max": "log2 of outstanding RDMA reads/atomics as responder",
    "rre": "remote read enable",
    "rwe": "remote write enable",
    "rae": "remote atomic enable",
    "atomic_mode": "atomic mode (3: up to 8 bytes, MLX5_ATOMIC_MODE_UP_TO_8B... per PRM)",
    "min_rnr_nak": "RNR NAK timer code",
    "next_rcv_psn": "first PSN expected",
    "rq_type": "RQ type: 3 = zero-length RQ (MLX5_ZERO_LEN_RQ)",
    "dbr_umem_id": "UMEM holding the doorbell record (in cqc the kernel's mlx5_ifc.h reserves these bits; rdma-core's SwCqc names them)",
    "wq_umem_id": "UMEM holding the work queue",
    "wq_umem_valid": "the work queue is the UMEM named by wq_umem_id",
    "opt_param_mask": "optional parameters being modified",
    "qpc": "struct qpc: the QP context",
    "cq_context": "struct cqc: the CQ context",
    "pkey_index": "P_Key index",
    "grh": "a GRH is present (RoCE, or IB across subnets)",
    "rlid": "remote LID (IB)",
    "ack_timeout": "local ACK timeout code",
    "src_addr_index": "local GID index",
    "hop_limit": "GRH hop limit",
    "rgid_rip": "remote GID (16 bytes)",
    "vhca_port_num": "port number (multi-port devices)",
}

# Fields the kernel's mlx5_ifc.h leaves reserved that the devx path needs,
# placed as rdma-core's tests/mlx5_prm_structs.py CreateCqIn declares them.
PATCHES = {
    ("create_cq_in", "reserved_at_280"): [("cq_umem_offset", 0x280, 0x40, "scalar"), ("cq_umem_id", 0x2c0, 0x20, "scalar")],
    ("cqc", "reserved_at_20"): [("dbr_umem_id", 0x20, 0x20, "scalar")],
}
PY_NAMES = {"cq_umem_offset": "CreateCqIn e_mtt_pointer_or_cq_umem_offset", "cq_umem_id": "CreateCqIn cq_umem_id", "dbr_umem_id": "SwCqc dbr_umem_id"}

PATCHED = {(k[0], f[0]) for k, v in PATCHES.items() for f in v}


def toml_struct(name, fields, total, tag, direction):
    assert total % 32 == 0, (name, total)
    lines = [
        "[[struct]]",
        'name = "%s"' % name,
        "size = %d" % (total // 8),
        'direction = "%s"' % direction,
        'doc = "PRM %s, transcribed from mlx5_ifc.h struct mlx5_ifc_%s_bits by hw-specs/tools/ifc_to_toml.py"' % (name, name),
        'cite = "%s mlx5_ifc_%s_bits"' % (tag, name),
        "",
    ]
    # Split reserved runs at word boundaries; keep others whole.
    pieces = []
    patched = []
    for f in fields:
        patched += PATCHES.get((name, f[0]), [f])
    for (n, off, w, kind) in patched:
        if n.startswith("reserved_at_"):
            p = off
            while p < off + w:
                end = min(off + w, (p // 32 + 1) * 32)
                if p % 32 == 0 and off + w - p >= 32:
                    end = p + ((off + w - p) // 32) * 32
                pieces.append(("reserved_at_%x" % p, p, end - p, "reserved"))
                p = end
        else:
            pieces.append((n, off, w, kind))
    i = 0
    while i < len(pieces):
        n, off, w, kind = pieces[i]
        byte = off // 8
        if off % 32 == 0 and w >= 32:
            if kind == "reserved":
                lines += ["[[struct.field]]", 'name = "%s"' % n, "offset = %d" % byte, 'type = "bytes"', "len = %d" % (w // 8), "reserved = true", 'doc = "reserved"', 'cite = "%s %s"' % (tag, name), ""]
            elif kind == "scalar" and w == 32 and (name, n) in PATCHED:
                lines += ["[[struct.field]]", 'name = "%s"' % n, "offset = %d" % byte, 'type = "be32"', 'doc = "%s"' % DOCS.get(n, n), 'cite = "PY %s"' % PY_NAMES[n], ""]
            elif kind == "scalar" and w == 64 and (name, n) in PATCHED:
                lines += ["[[struct.field]]", 'name = "%s"' % n, "offset = %d" % byte, 'type = "be64"', 'doc = "%s"' % DOCS.get(n, n), 'cite = "PY %s"' % PY_NAMES[n], ""]
            elif kind == "scalar" and w == 32:
                lines += ["[[struct.field]]", 'name = "%s"' % n, "offset = %d" % byte, 'type = "be32"', 'doc = "%s"' % DOCS.get(n, n), 'cite = "%s %s.%s"' % (tag, name, n), ""]
            elif kind == "scalar" and w == 64 and off % 64 == 0:
                lines += ["[[struct.field]]", 'name = "%s"' % n, "offset = %d" % byte, 'type = "be64"', 'doc = "%s"' % DOCS.get(n, n), 'cite = "%s %s.%s"' % (tag, name, n), ""]
            else:
                assert w % 8 == 0, (name, n)
                lines += ["[[struct.field]]", 'name = "%s"' % n, "offset = %d" % byte, 'type = "bytes"', "len = %d" % (w // 8), 'doc = "%s (%d bits)"' % (DOCS.get(n, n), w), 'cite = "%s %s.%s"' % (tag, name, n), ""]
            i += 1
            continue
        # A word of bit ranges.
        assert off % 32 == 0, (name, n, hex(off))
        word, j = [], i
        while j < len(pieces) and pieces[j][1] < off + 32:
            assert pieces[j][1] + pieces[j][2] <= off + 32, (name, pieces[j])
            word.append(pieces[j])
            j += 1
        if all(k == "reserved" for (_, _, _, k) in word):
            lines += ["[[struct.field]]", 'name = "reserved_at_%x"' % off, "offset = %d" % byte, 'type = "be32"', "reserved = true", 'doc = "reserved"', 'cite = "%s %s"' % (tag, name), ""]
        else:
            bits = []
            for (bn, bo, bw, bk) in word:
                q = bo - off
                hi, lo = 31 - q, 32 - q - bw
                d = "reserved" if bk == "reserved" else DOCS.get(bn, bn)
                bits.append('  { name = "%s", bits = "%d:%d", doc = "%s" },' % (bn, hi, lo, d))
            names = [bn for (bn, _, _, bk) in word if bk != "reserved"]
            lines += ["[[struct.field]]", 'name = "dw_%02x"' % byte, "offset = %d" % byte, 'type = "be32"',
                      'doc = "%s"' % ", ".join(names), 'cite = "%s %s"' % (tag, name), "bits = ["] + bits + ["]", ""]
        i = j
    return "\n".join(lines)


def main():
    for arg in sys.argv[1:]:
        parts = arg.split(":")
        header, tag, name = parts[0], parts[1], parts[2]
        direction = parts[3] if len(parts) > 3 else "host_to_device"
        text = open(header).read()
        fields, total = parse(text, name)
        print(toml_struct(name, fields, total, tag, direction))


main()
