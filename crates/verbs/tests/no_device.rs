//! With no NIC (every development and CI machine): loading rdma-core works
//! when it is installed, and asking for a device fails with an error that
//! names what is missing. With the library absent, the error names the
//! Debian packages.

use marrow_verbs::{Verbs, VerbsError};

#[test]
fn a_missing_library_names_the_packages() {
    let e = Verbs::load_from("/nonexistent/libibverbs.so.1", "libmlx5.so.1").unwrap_err();
    assert!(matches!(e, VerbsError::LibraryMissing { package: "libibverbs1", .. }), "{e:?}");
    let m = e.to_string();
    assert!(
        m.starts_with("/nonexistent/libibverbs.so.1 not found")
            && m.contains("apt install libibverbs1 ibverbs-providers"),
        "{m}"
    );
    // libibverbs there, the provider missing: names ibverbs-providers.
    if std::path::Path::new("/usr/lib/x86_64-linux-gnu/libibverbs.so.1").exists() {
        let e = Verbs::load_from("libibverbs.so.1", "/nonexistent/libmlx5.so.1").unwrap_err();
        assert!(matches!(e, VerbsError::LibraryMissing { package: "ibverbs-providers", .. }), "{e:?}");
    }
}

#[test]
fn no_device_is_a_clear_error_naming_sysfs() {
    let v = Verbs::load().expect("rdma-core loads (scripts/install-test-deps.sh installs ibverbs-providers)");
    if std::path::Path::new("/sys/class/infiniband").read_dir().is_ok_and(|mut d| d.next().is_some()) {
        // A machine with RDMA devices cannot reach the no-device path; there
        // the same call must list them.
        let devs = v.devices().expect("ibv_get_device_list on a machine with /sys/class/infiniband entries");
        assert!(!devs.is_empty(), "/sys/class/infiniband has entries but ibv_get_device_list returned none");
        return;
    }
    match v.devices() {
        Ok(devs) => assert!(devs.is_empty(), "{devs:?}"),
        // No kernel uverbs at all (this VM): ENOSYS, reported as no device.
        Err(e) => assert!(e.to_string().contains("ENOSYS (no kernel uverbs"), "{e}"),
    }
    let e = marrow_verbs::open_checked(std::path::Path::new("/sys")).unwrap_err();
    let m = e.to_string();
    assert!(matches!(e, VerbsError::NoDevice(_)), "{e:?}");
    assert!(
        m.contains("no RDMA device") && m.contains("/sys/class/infiniband is empty or absent") && m.contains("mlx5_ib"),
        "{m}"
    );
}
