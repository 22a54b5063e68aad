//! A capture of RoCEv2 traffic between two softnics, judged by tshark
//! (Wireshark's InfiniBand dissector) and by an independent ICRC
//! (`scripts/roce_icrc_check.py`): every RC opcode the model sends,
//! segmentation at a 256-byte path MTU, PSNs that wrap at 2^24, a
//! retransmission after a lost packet with its PSN sequence NAK, an RNR
//! NAK, and a remote access NAK. For each WQE, the BTH and RETH tshark
//! prints are what the WQE asked for.

use marrow_mlx5::prelude::*;
use marrow_softnic::pair::{Pair, PairConfig, PairWire, Side};
use marrow_softnic::rc::port::WireFaults;
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

fn ok(p: &mut Pair, what: &str) -> u32 {
    match p.wait(Side::A, false, T).unwrap() {
        Completion::Requester { byte_cnt, .. } => byte_cnt,
        c => panic!("{what}: {c:?}"),
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

/// A RETH as tshark prints it: virtual address, rkey, DMA length.
type Reth = (u64, u64, u64);

/// One frame as tshark decodes it.
#[derive(Debug, Default, Clone)]
struct Row {
    src: String,
    opcode: u64,
    destqp: u64,
    psn: u64,
    reth: Option<Reth>,
    syndrome: Option<u64>,
    malformed: bool,
}

fn num(s: &str) -> u64 {
    let s = s.trim();
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap(),
        None => s.parse().unwrap(),
    }
}

fn rows(pcap: &Path) -> Vec<Row> {
    let fields = [
        "ip.src",
        "infiniband.bth.opcode",
        "infiniband.bth.destqp",
        "infiniband.bth.psn",
        "infiniband.reth.va",
        "infiniband.reth.r_key",
        "infiniband.reth.dmalen",
        "infiniband.aeth.syndrome",
        "_ws.malformed",
    ];
    let mut args = vec!["-r", pcap.to_str().unwrap(), "-T", "fields", "-E", "separator=|", "-E", "occurrence=f"];
    for f in &fields {
        args.extend(["-e", f]);
    }
    tshark(&args)
        .lines()
        .map(|l| {
            let c: Vec<&str> = l.split('|').collect();
            assert!(!c[1].is_empty(), "tshark did not dissect a frame as InfiniBand: {l}");
            Row {
                src: c[0].to_owned(),
                opcode: num(c[1]),
                destqp: num(c[2]),
                psn: num(c[3]),
                reth: (!c[4].is_empty() && !c[6].is_empty()).then(|| (num(c[4]), num(c[5]), num(c[6]))),
                syndrome: (!c[7].is_empty()).then(|| num(c[7])),
                malformed: !c[8].trim().is_empty(),
            }
        })
        .collect()
}

#[test]
fn tshark_judges_a_capture_of_every_opcode_and_every_answer() {
    let dir = std::env::temp_dir().join(format!("marrow-wire-capture-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("a.pcap");
    let net = (std::process::id() % 200) as u8 + 20;
    let (ip_a, ip_b) = (Ipv4Addr::new(127, net, 200, 1), Ipv4Addr::new(127, net, 200, 2));
    let mut wire = PairWire::udp(ip_a, ip_b, 4791);
    wire.attrs.path_mtu = 256;
    wire.attrs.timeout = 12; // 16.8 ms: the forced loss below is resent soon, with room for a loaded machine
    wire.attrs.min_rnr_timer = 1; // 10 µs
    wire.pcap = Some(pcap.clone());
    let mut p = Pair::new(PairConfig { wire: Some(wire), ..PairConfig::default() }).unwrap();
    let (qa, qb, ra, rb) = (p.a.qpn, p.b.qpn, p.a.addr, p.b.addr);
    let (rkey_b, lkey_a, lkey_b) = (p.b.rkey, p.a.lkey, p.b.lkey);
    let sge_a = |off: u64, len: u32| Sge { addr: ra + off, length: len, lkey: lkey_a };
    let remote_b = |off: u64| RemoteAddr { raddr: rb + off, rkey: rkey_b };
    let data: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
    p.a.buf.write_bytes(0, &data).unwrap();
    // (opcode of its first packet, its RETH) per WQE, in order.
    let mut expected: Vec<(u64, Option<Reth>)> = Vec::new();
    let post = |p: &mut Pair, op: WqeOp<'_>| {
        p.a.sq.post(CtrlParams::signaled(0, 0), &op).unwrap();
        p.a.sq.ring().unwrap();
    };

    // A WRITE of 1000 bytes: FIRST, MIDDLE, MIDDLE, LAST at MTU 256.
    post(&mut p, WqeOp::RdmaWrite { remote: remote_b(4096), sgl: &[sge_a(0, 1000)] });
    assert_eq!(ok(&mut p, "write"), 1000);
    expected.push((0x06, Some((rb + 4096, rkey_b.into(), 1000))));
    // A READ of 600 bytes: three responses.
    post(&mut p, WqeOp::RdmaRead { remote: remote_b(4096), sgl: &[sge_a(8192, 600)] });
    assert_eq!(ok(&mut p, "read"), 600);
    expected.push((0x0c, Some((rb + 4096, rkey_b.into(), 600))));
    let mut back = vec![0u8; 600];
    p.a.buf.read_bytes(8192, &mut back).unwrap();
    assert_eq!(back, data[..600]);
    // A SEND of 700 bytes into a posted receive, then a WRITE with immediate.
    p.b.rq.post(&[Sge { addr: rb + 16384, length: 1024, lkey: lkey_b }]).unwrap();
    post(&mut p, WqeOp::Send { sgl: &[sge_a(0, 700)] });
    assert_eq!(ok(&mut p, "send"), 700);
    expected.push((0x00, None));
    p.b.rq.post(&[Sge { addr: rb + 20480, length: 16, lkey: lkey_b }]).unwrap();
    post(&mut p, WqeOp::RdmaWriteImm { remote: remote_b(24576), sgl: &[sge_a(0, 100)], imm: 0xfeed });
    assert_eq!(ok(&mut p, "write imm"), 100);
    expected.push((0x0b, Some((rb + 24576, rkey_b.into(), 100))));
    // Both atomics.
    p.b.buf.write_bytes(32768, &5u64.to_ne_bytes()).unwrap();
    post(&mut p, WqeOp::AtomicFa { remote: remote_b(32768), local: sge_a(12288, 8), add: 10 });
    ok(&mut p, "fetch-add");
    post(&mut p, WqeOp::AtomicCs { remote: remote_b(32768), local: sge_a(12296, 8), compare: 15, swap: 99 });
    ok(&mut p, "compare-swap");
    expected.push((0x14, None));
    expected.push((0x13, None));
    let mut v = [0u8; 8];
    p.b.buf.read_bytes(32768, &mut v).unwrap();
    assert_eq!(u64::from_ne_bytes(v), 99);
    // A SEND with no receive posted: RNR NAKs until one is.
    post(&mut p, WqeOp::Send { sgl: &[sge_a(0, 50)] });
    std::thread::sleep(Duration::from_millis(30));
    p.b.rq.post(&[Sge { addr: rb + 40960, length: 64, lkey: lkey_b }]).unwrap();
    assert_eq!(ok(&mut p, "send after RNR"), 50);
    expected.push((0x04, None));
    // The first packet of a WRITE is lost: its LAST draws a PSN sequence
    // NAK and the whole message goes again.
    p.nic.set_port_faults(0, WireFaults { drop_next: 1, ..WireFaults::default() }).unwrap();
    post(&mut p, WqeOp::RdmaWrite { remote: remote_b(45056), sgl: &[sge_a(0, 300)] });
    assert_eq!(ok(&mut p, "write after a loss"), 300);
    expected.push((0x06, Some((rb + 45056, rkey_b.into(), 300))));
    let mut got = vec![0u8; 300];
    p.b.buf.read_bytes(45056, &mut got).unwrap();
    assert_eq!(got, data[..300]);
    // A bad rkey: NAK remote access error, REMOTE_ACCESS_ERR.
    post(&mut p, WqeOp::RdmaWrite { remote: RemoteAddr { raddr: rb, rkey: rkey_b ^ 0x5a00 }, sgl: &[sge_a(0, 8)] });
    match p.wait(Side::A, false, T).unwrap() {
        Completion::Error(e) => assert_eq!(e.syndrome, Syndrome::REMOTE_ACCESS_ERR, "{e:?}"),
        c => panic!("bad rkey: {c:?}"),
    }
    expected.push((0x0a, Some((rb, u64::from(rkey_b ^ 0x5a00), 8))));
    let counters = p.nic.port_counters(0).unwrap();
    drop(p); // the ports stop; the capture is complete

    let rows = rows(&pcap);
    assert!(rows.iter().all(|r| !r.malformed), "tshark found malformed frames");
    let from_a: Vec<&Row> = rows.iter().filter(|r| r.src == ip_a.to_string()).collect();
    let from_b: Vec<&Row> = rows.iter().filter(|r| r.src == ip_b.to_string()).collect();
    assert!(from_a.iter().all(|r| r.destqp == u64::from(qb)), "A's packets all go to QP {qb:#x}");
    assert!(from_b.iter().all(|r| r.destqp == u64::from(qa)), "B's packets all go to QP {qa:#x}");

    // Each WQE's first packet (the first request after the previous one's
    // opcode class changes), matched in order: opcode and RETH as posted.
    let starts: Vec<&&Row> =
        from_a.iter().filter(|r| matches!(r.opcode, 0x00 | 0x04 | 0x06 | 0x0a | 0x0b | 0x0c | 0x13 | 0x14)).collect();
    let mut seen = starts.iter().map(|r| (r.opcode, r.reth)).peekable();
    for (i, e) in expected.iter().enumerate() {
        // Retransmissions repeat a first packet; skip to the next match.
        assert!(seen.any(|s| s == *e), "WQE {i}: no first packet {e:x?} in the capture (firsts: {starts:x?})");
    }

    // Segmentation: the 1000-byte WRITE is FIRST, MIDDLE, MIDDLE, LAST on consecutive PSNs.
    let w = from_a.iter().position(|r| r.opcode == 0x06).unwrap();
    let ops: Vec<u64> = from_a[w..w + 4].iter().map(|r| r.opcode).collect();
    assert_eq!(ops, [0x06, 0x07, 0x07, 0x08]);
    let psns: Vec<u64> = from_a[w..w + 4].iter().map(|r| r.psn).collect();
    assert_eq!(psns, [0xff_fff0, 0xff_fff1, 0xff_fff2, 0xff_fff3]);
    assert!(from_b.iter().any(|r| r.opcode == 0x0e), "the 600-byte READ has a MIDDLE response");
    // The PSNs wrap from 0xffffff to 0.
    assert!(from_a.iter().any(|r| r.psn == 0xff_ffff) && from_a.iter().any(|r| r.psn == 0));
    // A retransmission: some request PSN went out twice.
    let mut count: HashMap<u64, usize> = HashMap::new();
    for r in &from_a {
        *count.entry(r.psn).or_default() += 1;
    }
    assert!(count.values().any(|&n| n > 1), "no retransmitted PSN");
    // The answers the test provoked, by AETH syndrome: RNR NAK with timer 1,
    // NAK PSN sequence error, NAK remote access error; and plain ACKs.
    let syndromes: Vec<u64> = from_b.iter().filter_map(|r| r.syndrome).collect();
    for (s, what) in
        [(0x21, "RNR NAK"), (0x60, "NAK PSN sequence error"), (0x62, "NAK remote access error"), (0x1f, "ACK")]
    {
        assert!(syndromes.contains(&s), "no {what} ({s:#x}) in {syndromes:x?}");
    }
    assert_eq!(counters.dropped, 1, "{counters:?}");

    let expert = tshark(&["-r", pcap.to_str().unwrap(), "-q", "-z", "expert,error"]);
    assert!(!expert.contains("Error") && !expert.contains("Malformed"), "{expert}");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("python3").arg(root.join("scripts/roce_icrc_check.py")).arg(&pcap).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.contains(&format!("{n} RoCEv2 frames, {n} ICRC ok", n = rows.len())),
        "{said}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
