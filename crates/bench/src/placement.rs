//! Where the bench's CPU threads ran, for the latency figures: the
//! GPU<->CPU ping-pong floor is answered by a thread of its own, placed
//! wherever the scheduler puts it, and the softnic's engine threads are
//! placed the same way. A floor's level then depends on that placement
//! (a CPU that shares its core with a spinning thread answers later), so
//! the bench prints it beside the floor.
//!
//! Linux only: `sched_getcpu(3)` for the calling thread, and for others
//! the `processor` field of `/proc/self/task/TID/stat` (proc(5): field
//! 39, the CPU the thread last ran on); a CPU's SMT siblings from
//! `/sys/devices/system/cpu/cpuN/topology/thread_siblings_list`.

use std::fs;

/// The CPU the calling thread runs on now.
pub fn current_cpu() -> Option<usize> {
    nix::sched::sched_getcpu().ok()
}

/// The CPU a thread last ran on, from its `/proc/.../stat` line: the
/// fields after the command name, which sits in parentheses and may hold
/// spaces or parentheses itself, so the split starts after the last `)`.
pub fn last_cpu_of_stat(stat: &str) -> Option<usize> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // Field 3 (state) is the first after the name; `processor` is field 39.
    rest.split_whitespace().nth(39 - 3)?.parse().ok()
}

/// This process's threads whose name starts with `prefix`, each with the
/// CPU it last ran on, in thread-id order.
pub fn threads_named(prefix: &str) -> Vec<(String, usize)> {
    let Ok(dir) = fs::read_dir("/proc/self/task") else { return Vec::new() };
    let mut tids: Vec<u64> = dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
    tids.sort_unstable();
    tids.into_iter()
        .filter_map(|tid| {
            let comm = fs::read_to_string(format!("/proc/self/task/{tid}/comm")).ok()?;
            let name = comm.trim_end().to_string();
            if !name.starts_with(prefix) {
                return None;
            }
            let stat = fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
            Some((name, last_cpu_of_stat(&stat)?))
        })
        .collect()
}

/// A CPU's SMT siblings as sysfs lists them ("3,11", "4-5"), itself included.
pub fn siblings(cpu: usize) -> Option<String> {
    let p = format!("/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list");
    Some(fs::read_to_string(p).ok()?.trim().to_string())
}

/// "CPU 5 (siblings 5,13)", or "CPU ?" where the CPU is unknown.
pub fn describe(cpu: Option<usize>) -> String {
    match cpu {
        Some(c) => match siblings(c) {
            Some(s) => format!("CPU {c} (siblings {s})"),
            None => format!("CPU {c}"),
        },
        None => "CPU ?".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_processor_field_is_read_after_a_name_with_spaces_and_parentheses() {
        // proc(5)'s layout: pid (comm) state, then fields 4..52; field 39 = 7.
        let mut fields: Vec<String> = (4..=52).map(|n| n.to_string()).collect();
        fields[39 - 4] = "7".into();
        let line = format!("1234 (softnic (engine) 0) R {}", fields.join(" "));
        assert_eq!(last_cpu_of_stat(&line), Some(7));
        assert_eq!(last_cpu_of_stat("1234 (x) R 1 2"), None, "a short line has no field 39");
        assert_eq!(last_cpu_of_stat("no parenthesis"), None);
    }

    #[test]
    fn this_thread_is_found_where_it_runs() {
        let me = std::thread::current();
        let name = me.name().unwrap_or("");
        assert!(!name.is_empty(), "test threads are named");
        // The comm field holds at most 15 bytes of the name.
        let prefix: String = name.chars().take(15).collect();
        let found = threads_named(&prefix);
        assert!(!found.is_empty(), "no thread named {prefix:?} in /proc/self/task");
        assert!(current_cpu().is_some());
    }
}
