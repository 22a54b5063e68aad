//! The PRM command layouts of hw-specs/mlx5.toml (devx CREATE_CQ, CREATE_QP
//! and the QP transitions) against the `mlx5_ifc.h` headers that define
//! them: rdma-core's `providers/mlx5/mlx5_ifc.h` (rdma-core 56.1) and, for
//! the CQ context that rdma-core's copy lacks, the kernel's
//! `include/linux/mlx5/mlx5_ifc.h` (Debian linux-headers 6.1). gcc computes
//! every named field's bit offset and width (`offsetof`/`sizeof` of the
//! header's one-byte-per-bit structs, what `DEVX_SET` uses); the generated
//! `LAYOUT` tables must agree, name for name.

use marrow_mlx5::raw::ALL_LAYOUTS;
use marrow_oracle::{IfcFieldOut, ifc_consts, ifc_linux_fields, ifc_rdma_core_fields};

const PRM: [&str; 11] = [
    "cqc",
    "create_cq_in",
    "create_cq_out",
    "ads",
    "qpc",
    "create_qp_in",
    "create_qp_out",
    "rst2init_qp_in",
    "init2rtr_qp_in",
    "rtr2rts_qp_in",
    "rst2init_qp_out",
];
const NOT_IN_KERNEL_IFC: [(&str, &str); 3] =
    [("create_cq_in", "cq_umem_offset"), ("create_cq_in", "cq_umem_id"), ("cqc", "dbr_umem_id")];

/// (struct, field) → (bit offset, bit width), from the generated layouts.
fn ours() -> Vec<IfcFieldOut> {
    let mut v = Vec::new();
    for name in PRM {
        let l = ALL_LAYOUTS.iter().find(|l| l.name == name).unwrap_or_else(|| panic!("{name} not generated"));
        v.push(IfcFieldOut { strct: name.into(), field: String::new(), bit_off: 0, bit_sz: l.size * 8 });
        for f in l.fields {
            if f.reserved || NOT_IN_KERNEL_IFC.contains(&(name, f.name)) {
                continue;
            }
            if f.bits.is_empty() {
                v.push(IfcFieldOut {
                    strct: name.into(),
                    field: f.name.into(),
                    bit_off: f.offset * 8,
                    bit_sz: f.size * 8,
                });
            }
            for b in f.bits.iter().filter(|b| !b.name.starts_with("reserved_at_")) {
                // Bit `hi` of a big-endian field of `size` bytes is PRM bit
                // (size*8 - 1 - hi) counted from the field's first byte's MSB.
                let off = f.offset * 8 + (f.size * 8 - 1 - b.hi as usize);
                v.push(IfcFieldOut {
                    strct: name.into(),
                    field: b.name.into(),
                    bit_off: off,
                    bit_sz: b.width() as usize,
                });
            }
        }
    }
    v
}

#[test]
fn every_prm_field_matches_mlx5_ifc_bit_for_bit() {
    let mut theirs = ifc_rdma_core_fields();
    theirs.extend(ifc_linux_fields());
    let ours = ours();
    for o in &ours {
        let t = theirs
            .iter()
            .find(|t| t.strct == o.strct && t.field == o.field)
            .unwrap_or_else(|| panic!("{}.{} missing from the harness", o.strct, o.field));
        if o.field.is_empty() {
            // Flexible arrays (pas[]) are outside sizeof; marrow's fixed part
            // is exactly the header's.
            assert_eq!(o.bit_sz, t.bit_sz, "sizeof mlx5_ifc_{}_bits", o.strct);
        } else {
            assert_eq!(
                (o.bit_off, o.bit_sz),
                (t.bit_off, t.bit_sz),
                "{}.{}: (bit offset, width) ours vs mlx5_ifc.h",
                o.strct,
                o.field
            );
        }
    }
    assert_eq!(ours.len(), theirs.len());
    assert!(ours.len() > 150, "{} fields checked", ours.len());
}

#[test]
fn command_constants_match_mlx5_ifc() {
    use marrow_mlx5::raw::*;
    let c = ifc_consts();
    let ours = [
        ("MLX5_CMD_OP_CREATE_CQ", MLX5_CMD_OP_CREATE_CQ),
        ("MLX5_CMD_OP_DESTROY_CQ", MLX5_CMD_OP_DESTROY_CQ),
        ("MLX5_CMD_OP_CREATE_QP", MLX5_CMD_OP_CREATE_QP),
        ("MLX5_CMD_OP_DESTROY_QP", MLX5_CMD_OP_DESTROY_QP),
        ("MLX5_CMD_OP_RST2INIT_QP", MLX5_CMD_OP_RST2INIT_QP),
        ("MLX5_CMD_OP_INIT2RTR_QP", MLX5_CMD_OP_INIT2RTR_QP),
        ("MLX5_CMD_OP_RTR2RTS_QP", MLX5_CMD_OP_RTR2RTS_QP),
        ("MLX5_QPC_ST_RC", MLX5_QPC_ST_RC),
        ("MLX5_QPC_PM_STATE_MIGRATED", MLX5_QPC_PM_STATE_MIGRATED),
    ];
    assert_eq!(c.len(), ours.len());
    for (n, v) in ours {
        assert_eq!(Some(u64::from(v)), c.iter().find(|(k, _)| k == n).map(|(_, v)| *v), "{n}");
    }
}

/// Fields of a scapy packet class in rdma-core's tests/mlx5_prm_structs.py:
/// name → (bit offset, width), by adding up the declared widths.
fn prm_structs_py(class: &str) -> std::collections::HashMap<String, (usize, usize)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/rdma-core-src/rdma-core-56.1/tests/mlx5_prm_structs.py");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run scripts/install-test-deps.sh", path.display()));
    let start = text
        .find(&format!("class {class}(PRMPacket):"))
        .unwrap_or_else(|| panic!("{class} not in mlx5_prm_structs.py"));
    let body = &text[start..];
    let body = &body[..body.find("\n\n\n").unwrap_or(body.len())];
    let mut bit = 0usize;
    let mut at = std::collections::HashMap::new();
    for line in body.lines().map(str::trim) {
        let name = line.split('\'').nth(1);
        let w = if line.starts_with("ShortField(") {
            16
        } else if line.starts_with("ByteField(") {
            8
        } else if line.starts_with("IntField(") {
            32
        } else if line.starts_with("LongField(") {
            64
        } else if line.starts_with("BitField(") {
            line.trim_end_matches("),").rsplit(',').next().unwrap().trim().parse().unwrap()
        } else if line.starts_with("StrFixedLenField(") {
            let l = line.split("length=").nth(1).unwrap();
            8 * l.trim_end_matches("),").trim_end_matches(')').parse::<usize>().unwrap()
        } else if line.starts_with("PacketField('sw_cqc'") {
            64 * 8 // SwCqc: the 64-byte cqc
        } else if line.starts_with("PacketListField(") {
            continue; // pas[]: outside the fixed layout
        } else if line.starts_with("fields_desc")
            || line.starts_with("class ")
            || line.starts_with(']')
            || line.is_empty()
        {
            continue;
        } else {
            panic!("{class}: field kind not understood: {line}");
        };
        if let Some(n) = name {
            at.insert(n.to_string(), (bit, w));
        }
        bit += w;
    }
    at
}

/// The CQ fields the kernel's header leaves reserved are placed as
/// rdma-core's own devx tests declare them (tests/mlx5_prm_structs.py, scapy
/// packets `CreateCqIn` and `SwCqc`).
#[test]
fn cq_umem_fields_match_rdma_cores_prm_structs_py() {
    let at = prm_structs_py("CreateCqIn");
    let l = ALL_LAYOUTS.iter().find(|l| l.name == "create_cq_in").unwrap();
    let f = |n: &str| l.field(n).map(|f| (f.offset * 8, f.size * 8)).unwrap();
    assert_eq!(at["e_mtt_pointer_or_cq_umem_offset"], f("cq_umem_offset"));
    assert_eq!(at["cq_umem_id"], f("cq_umem_id"));
    assert_eq!(at["cq_umem_valid"], (0x2e0, 1));
    assert_eq!(at["sw_cqc"].0, f("cq_context").0);
    let sw = prm_structs_py("SwCqc");
    let c = ALL_LAYOUTS.iter().find(|l| l.name == "cqc").unwrap();
    let d = c.field("dbr_umem_id").unwrap();
    assert_eq!(sw["dbr_umem_id"], (d.offset * 8, d.size * 8));
    // Where both name a field, they agree (names differ in places: c_eqn).
    for (name, (off, w)) in &sw {
        let ours = c
            .fields
            .iter()
            .flat_map(|f| {
                let base = f.offset * 8;
                let whole = (!f.reserved && f.bits.is_empty() && f.name == name).then_some((base, f.size * 8));
                whole.into_iter().chain(
                    f.bits
                        .iter()
                        .filter(|b| b.name == name)
                        .map(move |b| (base + f.size * 8 - 1 - b.hi as usize, b.width() as usize)),
                )
            })
            .next();
        if let Some(o) = ours {
            assert_eq!(o, (*off, *w), "cqc.{name} vs SwCqc");
        }
    }
}
