//! The GID table of every RDMA port as sysfs shows it, and the index a
//! RoCE QP should use. Sources (ib_core's sysfs ABI,
//! Documentation/ABI/stable/sysfs-class-infiniband):
//! `class/infiniband/<dev>/ports/<n>/gids/<idx>` (the GID, eight groups of
//! four hex digits), `gid_attrs/types/<idx>` (`IB/RoCE v1` or `RoCE v2`) and
//! `gid_attrs/ndevs/<idx>` (the netdev the GID belongs to). Empty entries
//! read as all zeros and are left out; a value that cannot be read is
//! `None`, never a default.

use crate::hostfile;
use serde::Serialize;
use std::path::Path;

/// The most GID entries listed per port: mlx5 ports have up to 255, and a
/// captured tree must not make the listing unbounded.
pub const MAX_GIDS: usize = 4096;

/// One GID entry that is in use.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Gid {
    pub index: u32,
    /// As sysfs prints it (`fe80:0000:...`); `None` when unreadable.
    pub gid: Option<String>,
    /// `RoCE v1`, `RoCE v2` or `IB/RoCE v1`; `None` when unreadable.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// `None` when unreadable (InfiniBand ports have none to read).
    pub netdev: Option<String>,
    /// The IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`).
    pub ipv4: Option<String>,
}

/// The GID table of one port.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PortGids {
    pub device: String,
    pub port: u32,
    /// `InfiniBand` or `Ethernet`; `None` when unreadable.
    pub link_layer: Option<String>,
    /// The entries in use, by index.
    pub gids: Vec<Gid>,
    /// The index to give `ibv_modify_qp`'s `sgid_index`, if one fits.
    pub recommended: Option<u32>,
    /// Why that index, or why none.
    pub recommended_reason: String,
    /// What kept the table from being read whole.
    pub problem: Option<String>,
}

fn read_trim(p: &Path) -> Option<String> {
    hostfile::read_text(p, hostfile::ATTRIBUTE_MAX).map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// The 16 bytes of a GID as sysfs prints it (eight `:`-separated groups of four digits).
pub fn parse_gid(text: &str) -> Option<[u8; 16]> {
    let mut out = [0u8; 16];
    let mut groups = text.split(':');
    for pair in out.chunks_mut(2) {
        let g = groups.next()?;
        if g.len() != 4 {
            return None;
        }
        pair.copy_from_slice(&u16::from_str_radix(g, 16).ok()?.to_be_bytes());
    }
    groups.next().is_none().then_some(out)
}

/// The IPv4 address of an IPv4-mapped GID (RFC 4291 §2.5.5.2), as RoCE v2 builds them from the netdev's addresses.
pub fn ipv4_of(gid: &[u8; 16]) -> Option<std::net::Ipv4Addr> {
    std::net::Ipv6Addr::from(*gid).to_ipv4_mapped()
}

/// The index to use: on RoCE, the RoCE v2 GID of an IPv4 address first
/// (routable, what `rdma_cm` picks for an IPv4 connection), else the first
/// RoCE v2 GID; on InfiniBand, index 0 (the port GID).
pub fn recommend(link_layer: Option<&str>, gids: &[Gid]) -> (Option<u32>, String) {
    let v2 = |g: &&Gid| g.kind.as_deref() == Some("RoCE v2");
    if let Some(g) = gids.iter().filter(v2).find(|g| g.ipv4.is_some()) {
        return (Some(g.index), format!("RoCE v2 with IPv4 address {}", g.ipv4.as_deref().unwrap_or("unknown")));
    }
    if let Some(g) = gids.iter().find(v2) {
        return (Some(g.index), "the first RoCE v2 GID (none has an IPv4-mapped address)".into());
    }
    if link_layer == Some("InfiniBand") && gids.iter().any(|g| g.index == 0) {
        return (Some(0), "InfiniBand: the port GID at index 0".into());
    }
    let why = if gids.is_empty() {
        "no GID in use"
    } else if gids.iter().any(|g| g.kind.is_none()) {
        "no RoCE v2 GID among those whose type could be read"
    } else {
        "no RoCE v2 GID (only RoCE v1): is the netdev up with an address?"
    };
    (None, why.into())
}

/// The GID table of port `port` of `device`, whose sysfs directory is `dir` (`ports/<n>`).
pub fn read_port(device: &str, port: u32, dir: &Path) -> PortGids {
    let link_layer = read_trim(&dir.join("link_layer"));
    let mut problem = None;
    let mut indices: Vec<u32> = match std::fs::read_dir(dir.join("gids")) {
        Ok(rd) => rd.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).take(MAX_GIDS + 1).collect(),
        Err(e) => {
            problem = Some(format!("gids: {e}"));
            Vec::new()
        }
    };
    if indices.len() > MAX_GIDS {
        indices.truncate(MAX_GIDS);
        problem = Some(format!("more than {MAX_GIDS} GID entries: the first {MAX_GIDS} read are listed"));
    }
    indices.sort_unstable();
    let mut gids = Vec::new();
    for index in indices {
        let gid = read_trim(&dir.join(format!("gids/{index}")));
        let bytes = gid.as_deref().and_then(parse_gid);
        if bytes.is_some_and(|b| b == [0; 16]) {
            continue;
        }
        gids.push(Gid {
            index,
            gid,
            kind: read_trim(&dir.join(format!("gid_attrs/types/{index}"))),
            netdev: read_trim(&dir.join(format!("gid_attrs/ndevs/{index}"))),
            ipv4: bytes.as_ref().and_then(ipv4_of).map(|a| a.to_string()),
        });
    }
    let (recommended, recommended_reason) = recommend(link_layer.as_deref(), &gids);
    PortGids { device: device.to_owned(), port, link_layer, gids, recommended, recommended_reason, problem }
}

/// The GID tables of every port of every device under `<sysfs>/class/infiniband`, by device and port.
pub fn read_all(sysfs: &Path) -> Vec<PortGids> {
    let dir = sysfs.join("class/infiniband");
    let mut devices: Vec<String> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    devices.sort();
    let mut out = Vec::new();
    for d in devices {
        let ports = dir.join(&d).join("ports");
        let mut nums: Vec<u32> = std::fs::read_dir(&ports)
            .map(|r| r.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).take(256).collect())
            .unwrap_or_default();
        nums.sort_unstable();
        out.extend(nums.into_iter().map(|n| read_port(&d, n, &ports.join(n.to_string()))));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn port(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("marrow-gids-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        for sub in ["gids", "gid_attrs/types", "gid_attrs/ndevs"] {
            fs::create_dir_all(d.join(sub)).unwrap();
        }
        d
    }

    fn gid(d: &Path, i: u32, gid: &str, kind: &str, ndev: &str) {
        fs::write(d.join(format!("gids/{i}")), format!("{gid}\n")).unwrap();
        if !kind.is_empty() {
            fs::write(d.join(format!("gid_attrs/types/{i}")), format!("{kind}\n")).unwrap();
        }
        if !ndev.is_empty() {
            fs::write(d.join(format!("gid_attrs/ndevs/{i}")), format!("{ndev}\n")).unwrap();
        }
    }

    const ZERO: &str = "0000:0000:0000:0000:0000:0000:0000:0000";
    const LINK_LOCAL: &str = "fe80:0000:0000:0000:0a42:a1ff:fe12:3456";
    const V4: &str = "0000:0000:0000:0000:0000:ffff:c0a8:010a";

    #[test]
    fn ipv4_mapped_roce_v2_is_recommended_and_zeros_are_skipped() {
        let d = port("v2");
        fs::write(d.join("link_layer"), "Ethernet\n").unwrap();
        gid(&d, 0, LINK_LOCAL, "IB/RoCE v1", "eth0");
        gid(&d, 1, LINK_LOCAL, "RoCE v2", "eth0");
        gid(&d, 2, V4, "IB/RoCE v1", "eth0");
        gid(&d, 3, V4, "RoCE v2", "eth0");
        gid(&d, 4, ZERO, "", "");
        gid(&d, 10, "not a gid", "", "");
        let p = read_port("mlx5_0", 1, &d);
        assert_eq!(p.gids.iter().map(|g| g.index).collect::<Vec<_>>(), [0, 1, 2, 3, 10]);
        assert_eq!(p.recommended, Some(3), "{}", p.recommended_reason);
        assert!(p.recommended_reason.contains("192.168.1.10"));
        assert_eq!(p.gids[3].ipv4.as_deref(), Some("192.168.1.10"));
        // Unreadable is None, not a default.
        assert_eq!((p.gids[4].kind.as_deref(), p.gids[4].netdev.as_deref()), (None, None));
        assert_eq!(p.gids[4].gid.as_deref(), Some("not a gid"));
        // Without the IPv4 one, the first RoCE v2.
        fs::write(d.join("gid_attrs/types/3"), "IB/RoCE v1\n").unwrap();
        let p = read_port("mlx5_0", 1, &d);
        assert_eq!(p.recommended, Some(1), "{}", p.recommended_reason);
        fs::write(d.join("gid_attrs/types/1"), "RoCE v1\n").unwrap();
        let p = read_port("mlx5_0", 1, &d);
        assert_eq!(p.recommended, None);
        assert!(p.recommended_reason.contains("no RoCE v2 GID among those whose type could be read"));
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn gid_text_parses() {
        assert_eq!(parse_gid(V4).and_then(|g| ipv4_of(&g)), Some(std::net::Ipv4Addr::new(192, 168, 1, 10)));
        assert_eq!(parse_gid(LINK_LOCAL).and_then(|g| ipv4_of(&g)), None);
        assert_eq!(parse_gid("fe80::1"), None);
        assert_eq!(parse_gid(&format!("{ZERO}:0000")), None);
        assert_eq!(parse_gid(ZERO), Some([0; 16]));
    }
}
