//! The bootstrap's all-gather as `marrow bench mlx5` runs it under a
//! launcher, through the `marrow-mpi-probe` helper binary: two ranks under a
//! real Open MPI `mpirun` (failing, naming the packages, where `mpirun` is
//! absent: `scripts/install-test-deps.sh` installs openmpi-bin), two ranks over the TCP rendezvous, and the errors
//! when neither exchange is possible.

use marrow_verbs::qp::RcEndpoint;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const PROBE: &str = env!("CARGO_BIN_EXE_marrow-mpi-probe");
/// How long the last rank sleeps before the barrier.
const LATE_MS: u64 = 400;

/// A command with the launcher variables of the test's own environment
/// removed (a CI job might itself run under one).
fn clean(program: &str) -> Command {
    let mut c = Command::new(program);
    for (k, _) in std::env::vars() {
        if k.starts_with("OMPI_") || k.starts_with("PMI") || k.starts_with("SLURM_") || k.starts_with("MARROW_") {
            c.env_remove(k);
        }
    }
    c.env("MARROW_PROBE_LATE_MS", LATE_MS.to_string());
    c
}

/// Run with a deadline: a hung collective fails the test instead of the CI job.
fn run(mut c: Command, limit: Duration) -> Output {
    let mut child = c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let o = child.wait_with_output().expect("output");
            panic!(
                "{c:?} still running after {limit:?}\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

/// The probe's JSON lines, by rank; checks both saw ranks 0 and 1 of 2 and
/// each other's record byte for byte.
fn check_two_ranks(o: &Output, via: &str) {
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "exit {:?}\nstdout: {out}\nstderr: {err}", o.status);
    let mut lines: Vec<serde_json::Value> = out
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    lines.sort_by_key(|v| v["rank"].as_u64());
    assert_eq!(lines.len(), 2, "stdout: {out}\nstderr: {err}");
    let want: Vec<RcEndpoint> = (0..2).map(RcEndpoint::sample).collect();
    assert_ne!(want[0], want[1]);
    for (r, v) in lines.iter().enumerate() {
        assert_eq!((v["rank"].as_u64(), v["size"].as_u64()), (Some(r as u64), Some(2)), "{v}");
        assert!(v["via"].as_str().is_some_and(|s| s.starts_with(via)), "{v}");
        // Rank 1 slept LATE_MS before the barrier: rank 0 waited for it there.
        let waited = v["barrier_ms"].as_u64().unwrap_or_else(|| panic!("no barrier_ms: {v}"));
        if r == 0 {
            assert!(waited >= LATE_MS * 9 / 10, "rank 0 left the barrier after {waited} ms, before rank 1 came: {v}");
        }
        let all: Vec<RcEndpoint> = serde_json::from_value(v["all"].clone()).unwrap();
        assert_eq!(all, want, "rank {r}");
        // Byte for byte: the records' wire form (JSON) is what each rank sent.
        for (p, e) in all.iter().enumerate() {
            assert_eq!(serde_json::to_vec(e).unwrap(), serde_json::to_vec(&RcEndpoint::sample(p as u32)).unwrap());
        }
    }
}

fn on_path(name: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(name)).find(|p| p.is_file())
}

#[test]
fn two_ranks_under_open_mpi_gather_each_others_endpoint() {
    // scripts/test.sh installs Open MPI first, so a missing mpirun is a
    // broken test setup, not a reason to pass.
    let mpirun = on_path("mpirun")
        .expect("no mpirun on PATH: run scripts/install-test-deps.sh (apt install openmpi-bin libopenmpi3)");
    let mut v = clean(mpirun.to_str().unwrap());
    v.arg("--version");
    let version = String::from_utf8_lossy(&run(v, Duration::from_secs(30)).stdout).into_owned();
    assert!(
        version.contains("Open MPI"),
        "{} is not Open MPI's ({}): this test drives Open MPI's mpirun; put Debian's openmpi-bin first on PATH",
        mpirun.display(),
        version.lines().next().unwrap_or("")
    );
    let mut c = clean(mpirun.to_str().unwrap());
    // --allow-run-as-root: CI containers run as root, which Open MPI refuses
    // by default (the development machine, Debian 12's Open MPI 4.1.4 as
    // root, needs only this). The rest is for other containers:
    // --oversubscribe: a runner with one core still starts 2 ranks.
    // --mca btl self,tcp: the shared-memory BTL (vader) uses CMA
    // (process_vm_readv), which containers without CAP_SYS_PTRACE refuse
    // ("Read -1, expected ..."); TCP over loopback needs nothing.
    // plm_rsh_agent empty: a single node needs no ssh (containers have none).
    c.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "-np",
        "2",
        "--mca",
        "btl",
        "self,tcp",
        "--mca",
        "plm_rsh_agent",
        "",
        "-x",
        "MARROW_PROBE_LATE_MS",
    ])
    .arg(PROBE);
    check_two_ranks(&run(c, Duration::from_secs(120)), "MPI_Allgather (Open MPI");
}

/// A port for the rendezvous's root, free on every address (the root binds
/// `0.0.0.0`) and below Linux's ephemeral range (32768–60999), so the
/// ephemeral ports Open MPI's TCP transport opens meanwhile cannot take it
/// between this choice and the root's bind.
fn rendezvous_port(attempt: u16) -> u16 {
    let start = 20_000 + (std::process::id() % 5_000) as u16 * 2 + attempt * 97;
    (start..32_000)
        .find(|p| std::net::TcpListener::bind(("0.0.0.0", *p)).is_ok())
        .expect("no free port in 20000..32000")
}

#[test]
fn two_ranks_over_the_tcp_rendezvous_without_mpi() {
    // The port is chosen, released and bound again by rank 0: another
    // process can still take it in between. That is this test's own race,
    // not the bootstrap's, so it alone is retried, with a new port.
    for attempt in 0..3 {
        let port = rendezvous_port(attempt);
        let ranks: Vec<_> = (0..2)
            .map(|r| {
                let mut c = clean(PROBE);
                c.envs([
                    ("MARROW_RANK", r.to_string()),
                    ("MARROW_SIZE", "2".into()),
                    ("MARROW_BOOTSTRAP", format!("127.0.0.1:{port}")),
                    ("MARROW_BOOTSTRAP_ID", "probe".into()),
                ]);
                std::thread::spawn(move || run(c, Duration::from_secs(60)))
            })
            .collect();
        let outs: Vec<Output> = ranks.into_iter().map(|h| h.join().unwrap()).collect();
        if attempt < 2
            && String::from_utf8_lossy(&outs[0].stderr)
                .contains(&format!("listen on 0.0.0.0:{port}: Address already in use"))
        {
            eprintln!("port {port} was taken before rank 0 bound it; again with another");
            continue;
        }
        let merged = Output {
            status: outs.iter().find(|o| !o.status.success()).unwrap_or(&outs[0]).status,
            stdout: outs.iter().flat_map(|o| o.stdout.clone()).collect(),
            stderr: outs.iter().flat_map(|o| o.stderr.clone()).collect(),
        };
        check_two_ranks(&merged, "TCP rendezvous 127.0.0.1:");
        return;
    }
}

#[test]
fn without_libmpi_or_a_rendezvous_the_error_names_both() {
    // Looks like mpirun's rank 0 of 2, libmpi forced absent, no MARROW_BOOTSTRAP.
    let mut c = clean(PROBE);
    c.envs([
        ("OMPI_COMM_WORLD_RANK", "0"),
        ("OMPI_COMM_WORLD_SIZE", "2"),
        ("MARROW_MPI_LIB", "/nonexistent/libmpi.so.40"),
    ]);
    let o = run(c, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("Open MPI mpirun gives rank 0 of 2")
            && err.contains("libmpi not found (tried /nonexistent/libmpi.so.40"),
        "{err}"
    );
    assert!(err.contains("apt install libopenmpi3 openmpi-bin") && err.contains("MARROW_BOOTSTRAP"), "{err}");
    // No launcher at all.
    let o = run(clean(PROBE), Duration::from_secs(30));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("no launcher found") && err.contains("mpirun") && err.contains("MARROW_BOOTSTRAP"), "{err}");
}
