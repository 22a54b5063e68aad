//! `marrow bench verbs --wire`: a rank whose QPs are the softnic's own on a
//! RoCEv2 port, the device code's WQEs executed onto the wire with no
//! proxy. Here both ranks are such processes on loopback UDP (RoCEv2
//! datagrams at 127.79.x.y); in `cargo xtask interop test` the peer is the
//! verbs proxy on Linux rxe in the QEMU guest.

use std::process::{Command, Output};

/// Rank 0 and rank 1 at loopback addresses of this test's own (`n`), the
/// same UDP port, with `args` on both; both outputs.
fn pair(n: u8, args: &[&str]) -> (Output, Output) {
    use std::process::Stdio;
    let pid = std::process::id();
    let (net, host) = ((pid % 250) as u8, 2 + 2 * n);
    let port = 20000 + (pid % 20000) as u16 + u16::from(n);
    let rendezvous = format!("127.0.0.1:{}", 40000 + (pid % 20000) as u16 + u16::from(n));
    let rank = |host: u8, role: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_marrow"))
            .args(["bench", "verbs", "--wire", &format!("udp:127.79.{net}.{host}:{port}")])
            .args(role)
            // A burst longer than the 2048 puts whose slots once ran into
            // the inline RDMA WRITE rank 1 checks last.
            .args(["--iters", "20", "--burst", "3000", "--timeout-s", "20"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("marrow starts")
    };
    let id = format!("wire{n}");
    let r0 = rank(host, &["--listen", &rendezvous, "--id", &id]);
    let r1 = rank(host + 1, &["--connect", &format!("{rendezvous}:{id}")]);
    (r0.wait_with_output().unwrap(), r1.wait_with_output().unwrap())
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn two_softnic_ranks_on_the_wire_pass_every_check() {
    let (r0, r1) = pair(0, &[]);
    let (t0, t1) = (text(&r0), text(&r1));
    assert!(r0.status.success() && r1.status.success(), "rank 0:\n{t0}\nrank 1:\n{t1}");
    for want in ["ok - gets of 7 sizes", "ok - puts of 7 sizes", "32 fetch-and-adds", "ok - CPU-initiator channel"] {
        assert!(t0.contains(want), "rank 0 lacks {want:?}:\n{t0}");
    }
    assert!(t1.contains("ok - rank 1: 7 receive CQEs") && t1.contains("arrived intact"), "{t1}");
    assert!(t0.contains("RTS on the wire"), "{t0}");
}

#[test]
fn with_json_rank_0_prints_its_figures_and_the_text_goes_to_stderr() {
    let (r0, r1) = pair(3, &["--json"]);
    assert!(r0.status.success() && r1.status.success(), "rank 0:\n{}\nrank 1:\n{}", text(&r0), text(&r1));
    let v: serde_json::Value = serde_json::from_slice(&r0.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&r0)));
    assert_eq!(v["bench"], "bench verbs");
    assert!(v["device"].as_str().unwrap().starts_with("softnic wire port 0"), "{v}");
    let rows = v["rows"].as_array().unwrap();
    for name in ["put8_lat_mean", "put8_rate"] {
        let row = rows.iter().find(|r| r["figure"] == name).unwrap_or_else(|| panic!("no {name} in {v}"));
        assert!(row["measured"].as_f64().unwrap() > 0.0, "{row}");
    }
    assert!(String::from_utf8_lossy(&r0.stderr).contains("ok - puts of 7 sizes"));
}

#[test]
fn without_a_device_json_says_why_and_exits_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_marrow"))
        .args(["bench", "verbs", "--json", "--device", "no-such-device", "--listen", "127.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let e = v["error"].as_str().unwrap_or_else(|| panic!("{v}"));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("error: {e}")));
}

#[test]
fn a_bad_rkey_on_the_wire_is_remote_access_err() {
    let (r0, r1) = pair(1, &["--fault", "bad-rkey"]);
    let (t0, t1) = (text(&r0), text(&r1));
    assert!(r0.status.success(), "rank 0:\n{t0}\nrank 1:\n{t1}");
    assert!(t0.contains("syndrome 0x13"), "{t0}");
}

#[test]
fn a_wire_rank_is_refused_a_device_a_gpu_it_lacks_a_burst_too_long_or_a_bad_port() {
    let out = Command::new(env!("CARGO_BIN_EXE_marrow"))
        .args(["bench", "verbs", "--wire", "udp:127.0.0.1:1", "--device", "rxe0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    // This machine has no GPU: --gpu is refused before any peer is involved.
    let out = Command::new(env!("CARGO_BIN_EXE_marrow"))
        .args(["bench", "verbs", "--gpu", "--wire", "udp:127.0.0.1:1", "--listen", "127.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("error: refused: --gpu: unavailable on this machine"), "{}", text(&out));
    let out = Command::new(env!("CARGO_BIN_EXE_marrow"))
        .args(["bench", "verbs", "--wire", "udp:127.0.0.1:1", "--listen", "127.0.0.1:1", "--burst", "200000"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("a burst of 200000 puts"), "{}", text(&out));
    let out =
        Command::new(env!("CARGO_BIN_EXE_marrow")).args(["bench", "verbs", "--wire", "udp:nowhere"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("want IPv4:PORT"), "{}", text(&out));
}

#[test]
fn a_vanished_peer_on_the_wire_is_transport_retry_exceeded() {
    let (r0, r1) = pair(2, &["--fault", "vanished-peer"]);
    let (t0, t1) = (text(&r0), text(&r1));
    assert!(r0.status.success(), "rank 0:\n{t0}\nrank 1:\n{t1}");
    assert!(t0.contains("syndrome 0x15"), "{t0}");
}

#[test]
fn two_softnic_ranks_under_open_mpi_exchange_by_mpi_and_meet_at_a_barrier() {
    // The launcher's path: no --listen or --connect; libmpi opened at run
    // time, MPI_Allgather of the endpoints, a barrier through MPI after
    // connecting. scripts/install-test-deps.sh installs Open MPI, so a
    // missing mpirun is a broken setup, not a pass.
    let mpirun = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("mpirun"))
        .find(|p| p.is_file())
        .expect("no mpirun on PATH: run scripts/install-test-deps.sh (apt install openmpi-bin libopenmpi3)");
    let pid = std::process::id();
    let (net, port) = ((pid % 250) as u8, 20000 + (pid % 20000) as u16 + 7);
    let out = std::env::temp_dir().join(format!("marrow-verbs-mpi-{pid}"));
    std::fs::create_dir_all(&out).unwrap();
    // Each rank its own loopback address, by the rank Open MPI gives it.
    let rank = format!(
        "exec {} bench verbs --wire udp:127.79.{net}.$((20 + OMPI_COMM_WORLD_RANK)):{port} --iters 20 --burst 300 --timeout-s 20 > {}/rank$OMPI_COMM_WORLD_RANK.out 2>&1",
        env!("CARGO_BIN_EXE_marrow"),
        out.display()
    );
    let mut c = Command::new(mpirun);
    for (k, _) in std::env::vars() {
        if k.starts_with("OMPI_") || k.starts_with("PMI") || k.starts_with("MARROW_") {
            c.env_remove(k);
        }
    }
    // As root in CI containers, two ranks on however many cores, started
    // on this node without ssh (plm isolated, as in the interop guest), TCP
    // over loopback for MPI's own messages (crates/verbs/tests/mpi_bootstrap.rs
    // says why not shared memory in containers).
    c.args("--allow-run-as-root --oversubscribe -np 2 --mca plm isolated --mca btl self,tcp".split(' '))
        .args(["sh", "-c", &rank]);
    let status = c.status().expect("mpirun starts");
    let read = |r: u8| std::fs::read_to_string(out.join(format!("rank{r}.out"))).unwrap_or_default();
    let (t0, t1) = (read(0), read(1));
    let _ = std::fs::remove_dir_all(&out);
    assert!(status.success(), "mpirun: {status}\nrank 0:\n{t0}\nrank 1:\n{t1}");
    for (r, t) in [(0, &t0), (1, &t1)] {
        assert!(t.contains("(endpoints by MPI_Allgather (Open MPI"), "rank {r}:\n{t}");
        assert!(t.contains(&format!("rank {r}: the peer is ready too (endpoints by MPI_Allgather")), "rank {r}:\n{t}");
    }
    assert!(t0.contains("ok - puts of 7 sizes") && t0.contains("ok - gets of 7 sizes"), "{t0}");
    assert!(t1.contains("arrived intact"), "{t1}");
}
