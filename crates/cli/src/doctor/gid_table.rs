//! The GID table section of `marrow doctor`: per RDMA port, every GID in
//! use with its type and netdev, and the index to give a RoCE QP
//! (`marrow bench mlx5 --gid-index`), read by [`marrow_verbs::gids`].

use crate::print::escape;
use marrow_verbs::gids::{self, Gid, PortGids};
use std::fmt::Write;
use std::path::Path;

/// The tables of `<sysfs>/class/infiniband`, every text from the tree escaped for the terminal.
pub fn read(sysfs: &Path) -> Vec<PortGids> {
    let e = |s: String| escape(&s).into_owned();
    gids::read_all(sysfs)
        .into_iter()
        .map(|p| PortGids {
            device: e(p.device),
            link_layer: p.link_layer.map(e),
            gids: p
                .gids
                .into_iter()
                .map(|g| Gid { gid: g.gid.map(e), kind: g.kind.map(e), netdev: g.netdev.map(e), ..g })
                .collect(),
            recommended_reason: e(p.recommended_reason),
            problem: p.problem.map(e),
            ..p
        })
        .collect()
}

fn or_unknown(s: &Option<String>) -> &str {
    s.as_deref().unwrap_or("unknown")
}

pub fn render(tables: &[PortGids], o: &mut String) {
    let _ = writeln!(o, "GID tables (all-zero entries left out):");
    if tables.is_empty() {
        let _ = writeln!(o, "  no RDMA port");
    }
    for p in tables {
        let rec = match p.recommended {
            Some(i) => format!("recommended GID index {i}: {}", p.recommended_reason),
            None => format!("no recommended GID index: {}", p.recommended_reason),
        };
        let _ = writeln!(o, "  {} port {} ({}): {rec}", p.device, p.port, or_unknown(&p.link_layer));
        if let Some(why) = &p.problem {
            let _ = writeln!(o, "    ! {why}");
        }
        if p.gids.is_empty() {
            continue;
        }
        let _ = writeln!(o, "    {:<5} {:<39}  {:<10}  NETDEV", "IDX", "GID", "TYPE");
        for g in &p.gids {
            let ip = g.ipv4.as_ref().map(|a| format!("  ({a})")).unwrap_or_default();
            let line = format!(
                "    {:<5} {:<39}  {:<10}  {}{ip}",
                g.index,
                or_unknown(&g.gid),
                or_unknown(&g.kind),
                or_unknown(&g.netdev)
            );
            let _ = writeln!(o, "{}", line.trim_end());
        }
    }
}
