//! Two softnic daemons, each with a RoCEv2 port (what `marrow softnic
//! --port udp:IP:PORT --pcap FILE` starts), and a client of each: the
//! clients connect their QPs across the wire with `modify_qp_wire`, then an
//! RDMA_WRITE and an RDMA_READ cross it, bytes checked, and the first
//! daemon's capture holds the frames with good ICRCs.

use marrow_driver::{CqMode, CqPoller, SendQueue};
use marrow_mlx5::prelude::*;
use marrow_softnic::client::{Client, RemoteCq, RemoteQp};
use marrow_softnic::rc::WireAttrs;
use marrow_softnic::rc::port::{PortKind, PortOptions};
use marrow_softnic::{Access, QpCaps, QpState, Shm, SoftNic};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LEN: usize = 1 << 16;

fn daemon(dir: &Path, name: &str, ip: Ipv4Addr, pcap: Option<PathBuf>) -> PathBuf {
    let mut nic = SoftNic::new();
    nic.attach_port(PortKind::Udp { bind: SocketAddrV4::new(ip, 4791) }, PortOptions { pcap, ..Default::default() })
        .unwrap();
    nic.start(1);
    let sock = dir.join(format!("{name}.sock"));
    let listener = UnixListener::bind(&sock).unwrap();
    let nic = Arc::new(nic);
    std::thread::spawn(move || marrow_softnic::daemon::serve(nic, listener, Default::default()));
    sock
}

struct Side {
    client: Client,
    buf: Shm,
    lkey: u32,
    rkey: u32,
    qp: RemoteQp,
    cq: RemoteCq,
}

fn side(sock: &Path, name: &str) -> Side {
    let mut client = Client::connect(sock).unwrap();
    let pd = client.alloc_pd().unwrap();
    let buf = Shm::create(name, LEN).unwrap();
    let (lkey, rkey) = client.reg_mr(pd, &buf, Access::all()).unwrap();
    let cq = client.create_cq(16, false).unwrap();
    let qp = client.create_qp(pd, cq.cqn, cq.cqn, QpCaps::default()).unwrap();
    client.modify_qp(qp.qpn, QpState::Init, None).unwrap();
    Side { client, buf, lkey, rkey, qp, cq }
}

fn connect(s: &mut Side, peer: u32, attrs: WireAttrs) {
    s.client.modify_qp_wire(s.qp.qpn, QpState::Rtr, Some(peer), attrs).unwrap();
    s.client.modify_qp_wire(s.qp.qpn, QpState::Rts, None, attrs).unwrap();
}

#[test]
fn clients_of_two_daemons_talk_across_their_wire_ports() {
    let dir = std::env::temp_dir().join(format!("marrow-daemon-wire-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let net = (std::process::id() % 200) as u8 + 20;
    let (ip_a, ip_b) = (Ipv4Addr::new(127, net, 230, 1), Ipv4Addr::new(127, net, 230, 2));
    let pcap = dir.join("a.pcap");
    let (sa, sb) = (daemon(&dir, "a", ip_a, Some(pcap.clone())), daemon(&dir, "b", ip_b, None));
    let (mut a, mut b) = (side(&sa, "dw-a"), side(&sb, "dw-b"));
    let to_b = WireAttrs { sq_psn: 100, rq_psn: 200, ..WireAttrs::new(0, ip_b) };
    let to_a = WireAttrs { sq_psn: 200, rq_psn: 100, ..WireAttrs::new(0, ip_a) };
    connect(&mut a, b.qp.qpn, to_b);
    connect(&mut b, a.qp.qpn, to_a);
    // A bad attribute is refused through the socket too, naming the field.
    let bad = WireAttrs { path_mtu: 1500, ..to_b };
    let e = a.client.modify_qp_wire(a.qp.qpn, QpState::Rts, None, bad).unwrap_err();
    assert!(e.to_string().contains("path_mtu 1500"), "{e}");

    let data: Vec<u8> = (0..LEN).map(|i| (i as u8).wrapping_mul(11)).collect();
    a.buf.region().write_bytes(0, &data).unwrap();
    b.buf.region().write_bytes(LEN / 2, &data[..LEN / 2]).unwrap();
    let mut sq = SendQueue::new(a.qp.sq, 64, a.qp.dbrec, a.qp.uar, a.qp.qpn);
    let mut cq = CqPoller::new(a.cq.buf, a.cq.ncqe, a.cq.dbrec, CqMode::Normal);
    let (base_a, base_b) = (a.buf.region().base_addr() as u64, b.buf.region().base_addr() as u64);
    let half = (LEN / 2) as u32;
    let remote = RemoteAddr { raddr: base_b, rkey: b.rkey };
    sq.post(
        CtrlParams::signaled(0, 0),
        &WqeOp::RdmaWrite { remote, sgl: &[Sge { addr: base_a, length: half, lkey: a.lkey }] },
    )
    .unwrap();
    let remote = RemoteAddr { raddr: base_b + u64::from(half), rkey: b.rkey };
    let sgl = [Sge { addr: base_a + u64::from(half), length: half, lkey: a.lkey }];
    sq.post(CtrlParams::signaled(0, 0), &WqeOp::RdmaRead { remote, sgl: &sgl }).unwrap();
    sq.ring().unwrap();
    let start = Instant::now();
    let mut done = Vec::new();
    while done.len() < 2 {
        if let Some(c) = cq.poll().unwrap() {
            done.push(c);
        }
        assert!(start.elapsed() < Duration::from_secs(10), "no completion in 10 s: {done:?}");
        std::thread::yield_now();
    }
    for (c, want) in done.iter().zip([WqeOpcode::RDMA_WRITE, WqeOpcode::RDMA_READ]) {
        assert!(matches!(c, Completion::Requester { wqe_opcode, .. } if *wqe_opcode == want), "{c:?}");
    }
    let mut got = vec![0u8; LEN / 2];
    b.buf.region().read_bytes(0, &mut got).unwrap();
    assert!(got == data[..LEN / 2], "the WRITE landed in B's buffer");
    a.buf.region().read_bytes(LEN / 2, &mut got).unwrap();
    assert!(got == data[..LEN / 2], "the READ brought B's bytes");

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out =
        std::process::Command::new("python3").arg(root.join("scripts/roce_icrc_check.py")).arg(&pcap).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    let n: usize = said.split_whitespace().next().and_then(|w| w.parse().ok()).unwrap_or(0);
    // 32 WRITE packets and their ACK, 1 READ request and 32 responses, at MTU 1024.
    assert!(out.status.success() && n >= 66 && said.contains(&format!("{n} ICRC ok")), "{said}");
    std::fs::remove_dir_all(&dir).ok();
}
