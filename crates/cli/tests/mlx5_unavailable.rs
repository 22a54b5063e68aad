//! Where there is no ConnectX (every development and CI machine), `marrow
//! bench mlx5` says what is missing and exits 2: the library when rdma-core
//! is absent (forced here with MARROW_IBVERBS_LIB), the device otherwise;
//! `marrow doctor` reports the RDMA backend section either way.

mod common;

use common::marrow_env as marrow;

fn has_rdma_device() -> bool {
    std::fs::read_dir("/sys/class/infiniband").is_ok_and(|mut d| d.next().is_some())
}

#[test]
fn a_missing_libibverbs_is_named_with_its_packages() {
    for args in [
        &["bench", "mlx5"][..],
        &["bench", "mlx5", "--listen", "127.0.0.1:0"][..],
        &["bench", "mlx5", "--gpu", "--listen", "127.0.0.1:0"][..],
    ] {
        let (rc, _, err) = marrow(args, &[("MARROW_IBVERBS_LIB", "/nonexistent/libibverbs.so.1")]);
        assert_eq!(rc, 2, "{args:?}: {err}");
        assert!(
            err.contains("error: /nonexistent/libibverbs.so.1 not found")
                && err.contains("apt install libibverbs1 ibverbs-providers"),
            "{err}"
        );
    }
}

#[test]
fn no_rdma_device_is_a_clear_error() {
    if has_rdma_device() {
        return; // a lab node runs the real thing (README run book)
    }
    let (rc, out, err) = marrow(&["bench", "mlx5", "--connect", "127.0.0.1:1:x"], &[]);
    assert_eq!(rc, 2, "{out}{err}");
    assert!(
        err.contains("error: no RDMA device")
            && err.contains("/sys/class/infiniband is empty or absent")
            && err.contains("modprobe mlx5_core mlx5_ib"),
        "{err}"
    );
}

#[test]
fn doctor_has_an_rdma_backend_section() {
    let root = std::env::temp_dir().join(format!("marrow-cli-mlx5-{}", std::process::id()));
    std::fs::create_dir_all(root.join("sys/bus/pci/devices")).unwrap();
    std::fs::create_dir_all(root.join("proc")).unwrap();
    let (_, out, err) = marrow(
        &[
            "doctor",
            "--sysfs-root",
            root.join("sys").to_str().unwrap(),
            "--proc-root",
            root.join("proc").to_str().unwrap(),
        ],
        &[("MARROW_IBVERBS_LIB", "/nonexistent/x.so")],
    );
    assert!(out.contains("RDMA backend (mlx5):\n  libibverbs: /nonexistent/x.so not found"), "{out}{err}");
    assert!(out.contains("doorbell mode: host (CPU threads)") && out.contains("backend: unavailable"), "{out}");
    let (_, json, _) = marrow(
        &[
            "doctor",
            "--json",
            "--sysfs-root",
            root.join("sys").to_str().unwrap(),
            "--proc-root",
            root.join("proc").to_str().unwrap(),
        ],
        &[],
    );
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["rdma"]["mode"], "Host");
    assert!(v["rdma"]["blocker"].is_string());
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn under_mpirun_with_libmpi_no_rendezvous_address_is_needed() {
    if has_rdma_device() || open_mpi_absent() {
        return; // a lab node runs the real thing; without libmpi the test below covers it
    }
    // The launcher's variables as mpirun sets them (no real mpirun: the
    // device is opened before any exchange, and there is none here).
    let (rc, out, err) = marrow(&["bench", "mlx5"], &[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "2")]);
    assert_eq!(rc, 2, "{out}{err}");
    assert!(out.contains("launcher: Open MPI mpirun (rank 0 of 2), endpoints by MPI_Allgather (Open MPI"), "{out}");
    assert!(err.contains("error: no RDMA device") && !err.contains("MARROW_BOOTSTRAP"), "{err}");
}

fn open_mpi_absent() -> bool {
    !["/usr/lib/x86_64-linux-gnu/libmpi.so.40", "/usr/lib/aarch64-linux-gnu/libmpi.so.40"]
        .iter()
        .any(|p| std::path::Path::new(p).exists())
}

#[test]
fn under_a_launcher_without_a_rendezvous_address_it_says_which_variable() {
    // Under mpirun without libmpi (forced absent): name the package and MARROW_BOOTSTRAP.
    let (rc, _, err) = marrow(
        &["bench", "mlx5"],
        &[
            ("OMPI_COMM_WORLD_RANK", "0"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("MARROW_MPI_LIB", "/nonexistent/libmpi.so.40"),
        ],
    );
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("Open MPI mpirun gives rank 0 of 2")
            && err.contains("MARROW_BOOTSTRAP")
            && err.contains("libmpi not found")
            && err.contains("apt install libopenmpi3 openmpi-bin"),
        "{err}"
    );
    // Under srun (no libmpi tried: marrow does not link libpmix).
    let (rc, _, err) = marrow(&["bench", "mlx5"], &[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "2")]);
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("Slurm srun gives rank 0 of 2")
            && err.contains("MARROW_BOOTSTRAP")
            && err.contains("does not link libmpi/libpmix"),
        "{err}"
    );
    let (rc, _, err) =
        marrow(&["bench", "mlx5"], &[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "4"), ("MARROW_BOOTSTRAP", "n0:1")]);
    assert_eq!(rc, 2);
    assert!(err.contains("runs exactly 2"), "{err}");
}
