//! tshark (Wireshark's InfiniBand dissector, Debian `tshark`) and an
//! independent ICRC (`scripts/roce_icrc_check.py`, Python's zlib) judge the
//! frames this crate builds: one frame of every RC opcode, each field set
//! to a distinct value, read back from tshark's own decode.

use marrow_roce::frame::{self, Addrs};
use marrow_roce::opcode::describe;
use marrow_roce::packet::{Aeth, AtomicEth, Packet, Reth};
use marrow_roce::raw::{AethNakCode, BthOpcode};
use pcap_file::DataLink;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn addrs() -> Addrs {
    Addrs {
        src_mac: [0x02, 0x6d, 0x61, 0x72, 0x00, 0x01],
        dst_mac: [0x02, 0x6d, 0x61, 0x72, 0x00, 0x02],
        src_ip: Ipv4Addr::new(192, 0, 2, 1),
        dst_ip: Ipv4Addr::new(192, 0, 2, 2),
        src_port: frame::udp_sport(0x101, 0x102),
        dst_port: 4791,
    }
}

/// One packet of `op`, with fields derived from its index `i`.
fn packet(i: u32, op: BthOpcode, payload: &[u8]) -> Packet<'_> {
    let l = describe(op).unwrap().2;
    let aeth = match op {
        BthOpcode::ACKNOWLEDGE if i.is_multiple_of(3) => Aeth::nak(AethNakCode::REMOTE_ACCESS_ERROR, i),
        BthOpcode::ACKNOWLEDGE if i % 3 == 1 => Aeth::rnr(14, i),
        _ => Aeth::ack(i),
    };
    Packet {
        opcode: op,
        se: false,
        p_key: 0xffff,
        dest_qp: 0x100 + i,
        ack_req: i.is_multiple_of(2),
        psn: marrow_roce::psn::add(0xff_fff0, i),
        reth: l.reth.then_some(Reth { va: 0x7f00_0000_1000 + u64::from(i) * 0x100, rkey: 0xab00 + i, len: 64 + i }),
        atomic: l.atmeth.then_some(AtomicEth { va: 0x8000 + u64::from(i) * 8, rkey: 0xcd00 + i, swap_add: 5, comp: 7 }),
        aeth: l.aeth.then_some(aeth),
        atomic_ack: l.atmack.then_some(0x1122_3344_5566_7788),
        imm: l.immdt.then_some(0xdead_0000 + i),
        payload: if l.payload { &payload[..(i as usize * 7) % payload.len()] } else { &[] },
    }
}

fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let header = PcapHeader {
        datalink: DataLink::ETHERNET,
        ts_resolution: pcap_file::TsResolution::NanoSecond,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(std::fs::File::create(path).unwrap(), header).unwrap();
    for (i, f) in frames.iter().enumerate() {
        let t = Duration::from_nanos(1_700_000_000_000_000_000 + i as u64 * 1001);
        w.write_packet(&PcapPacket::new(t, f.len() as u32, f)).unwrap();
    }
}

fn tshark(args: &[&str]) -> String {
    let out = Command::new("tshark")
        .args(args)
        .output()
        .expect("tshark runs (scripts/install-test-deps.sh installs Debian's tshark)");
    assert!(out.status.success(), "tshark {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn tshark_reads_every_opcode_as_we_wrote_it() {
    let payload: Vec<u8> = (0..200u32).map(|i| (i * 13 + 1) as u8).collect();
    let ops: Vec<BthOpcode> = BthOpcode::ALL.iter().copied().filter(|&o| describe(o).is_some()).collect();
    let packets: Vec<Packet<'_>> = ops.iter().enumerate().map(|(i, &op)| packet(i as u32, op, &payload)).collect();
    let frames: Vec<Vec<u8>> = packets.iter().map(|p| frame::build(&addrs(), p)).collect();
    let dir = std::env::temp_dir().join(format!("marrow-roce-tshark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("opcodes.pcap");
    write_pcap(&pcap, &frames);
    let p = pcap.to_str().unwrap();

    let fields = [
        "infiniband.bth.opcode",
        "infiniband.bth.destqp",
        "infiniband.bth.psn",
        "infiniband.bth.a",
        "infiniband.bth.padcnt",
        "infiniband.reth.va",
        "infiniband.reth.r_key",
        "infiniband.reth.dmalen",
        "infiniband.aeth.syndrome",
        "infiniband.aeth.msn",
        "infiniband.immdt",
        "infiniband.atomiceth.swapdt",
        "infiniband.atomicacketh.origremdt",
        "udp.srcport",
        "_ws.malformed",
    ];
    let mut args = vec!["-r", p, "-T", "fields", "-E", "separator=|", "-E", "occurrence=f"];
    for f in &fields {
        args.extend(["-e", f]);
    }
    let text = tshark(&args);
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('|').collect()).collect();
    assert_eq!(rows.len(), packets.len(), "tshark printed {text}");
    let num = |s: &str| -> u64 {
        let s = s.trim();
        if let Some(h) = s.strip_prefix("0x") { u64::from_str_radix(h, 16).unwrap() } else { s.parse().unwrap() }
    };
    for (row, pk) in rows.iter().zip(&packets) {
        let name = pk.opcode.name().unwrap();
        assert_eq!(num(row[0]), u64::from(pk.opcode.0), "{name}: opcode {row:?}");
        assert_eq!(num(row[1]), u64::from(pk.dest_qp), "{name}: destqp");
        assert_eq!(num(row[2]), u64::from(pk.psn), "{name}: psn");
        assert_eq!(row[3] == "1" || row[3] == "True", pk.ack_req, "{name}: AckReq {:?}", row[3]);
        assert_eq!(num(row[4]), ((4 - pk.payload.len() % 4) % 4) as u64, "{name}: padcnt");
        match (pk.reth, pk.atomic) {
            (Some(r), _) => {
                assert_eq!(
                    (num(row[5]), num(row[6]), num(row[7])),
                    (r.va, u64::from(r.rkey), u64::from(r.len)),
                    "{name}"
                )
            }
            // tshark files AtomicETH's address and key under the RETH's field names.
            (None, Some(a)) => assert_eq!((num(row[5]), num(row[6])), (a.va, u64::from(a.rkey)), "{name}"),
            (None, None) => assert_eq!(row[5], "", "{name} has no RETH"),
        }
        match pk.aeth {
            Some(a) => {
                let syndrome = u64::from((a.ack_type.0 << 5) | a.value);
                assert_eq!((num(row[8]), num(row[9])), (syndrome, u64::from(a.msn)), "{name}: AETH");
            }
            None => assert_eq!(row[8], "", "{name} has no AETH"),
        }
        match pk.imm {
            // tshark prints ImmDt as the bytes' hex, without 0x.
            Some(i) => assert_eq!(u64::from_str_radix(row[10].trim(), 16).unwrap(), u64::from(i), "{name}: ImmDt"),
            None => assert_eq!(row[10], "", "{name} has no ImmDt"),
        }
        if let Some(a) = pk.atomic {
            assert_eq!(num(row[11]), a.swap_add, "{name}: swap/add data");
        }
        if let Some(o) = pk.atomic_ack {
            assert_eq!(num(row[12]), o, "{name}: original data");
        }
        assert_eq!(num(row[13]), u64::from(addrs().src_port), "{name}: UDP source port");
        assert_eq!(row[14].trim(), "", "{name}: tshark calls the frame malformed");
    }
    // No expert error or warning over the whole capture.
    let expert = tshark(&["-r", p, "-q", "-z", "expert,warn"]);
    assert!(!expert.contains("Error") && !expert.contains("Warning") && !expert.contains("Malformed"), "{expert}");

    // The ICRC of every frame, recomputed by Python's zlib.
    let out = Command::new("python3")
        .arg(repo_root().join("scripts/roce_icrc_check.py"))
        .arg(&pcap)
        .output()
        .expect("python3 runs");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stderr));
    assert!(said.contains(&format!("{n} RoCEv2 frames, {n} ICRC ok", n = packets.len())), "{said}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_icrc_checker_catches_a_corrupted_frame() {
    let payload = [7u8; 40];
    let mut f = frame::build(&addrs(), &packet(2, BthOpcode::RDMA_WRITE_ONLY, &payload));
    let n = f.len();
    f[n - 10] ^= 0x40;
    let dir = std::env::temp_dir().join(format!("marrow-roce-badicrc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("bad.pcap");
    write_pcap(&pcap, &[f]);
    let out = Command::new("python3").arg(repo_root().join("scripts/roce_icrc_check.py")).arg(&pcap).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
    std::fs::remove_dir_all(&dir).ok();
}
