//! `marrow trace show` and `marrow trace stats`: a trace file opened,
//! read as it streams, and its damage, if any, reported with the exit status.

use crate::EXIT_BAD_INPUT;
use crate::args::{TraceShowArgs, TraceStatsArgs};
use marrow::trace::{Detail, Filter, ShowOptions};
use std::io::Write;
use std::process::ExitCode;

/// Success, or where a trace is damaged (`message`, file offset) and how many
/// records came before it, on stderr, as bad input.
fn damage_exit(name: &str, damage: Option<(&str, usize)>, records_before: impl std::fmt::Display) -> ExitCode {
    match damage {
        None => ExitCode::SUCCESS,
        Some((message, offset)) => {
            let _ = writeln!(
                std::io::stderr().lock(),
                "error: {name}: {message} (file offset {offset:#x}); the {records_before} records before it were read"
            );
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}

/// A trace file, buffered, with its name escaped for the terminal; a file
/// that cannot be opened is said on stderr, as bad input.
fn open_trace(path: &std::path::Path) -> Result<(String, std::io::BufReader<std::fs::File>), ExitCode> {
    let name = marrow::print::escape_path(path);
    match std::fs::File::open(path) {
        Ok(f) => Ok((name, std::io::BufReader::with_capacity(1 << 16, f))),
        Err(e) => {
            let _ = writeln!(std::io::stderr().lock(), "error: cannot read {name}: {e}");
            Err(ExitCode::from(EXIT_BAD_INPUT))
        }
    }
}

pub(crate) fn run_trace_stats(a: &TraceStatsArgs) -> ExitCode {
    let (name, file) = match open_trace(&a.file) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let s = marrow::trace_stats::stats(file);
    let text = if a.json {
        format!("{}\n", marrow::trace_stats::render_json(&s, &name))
    } else {
        marrow::trace_stats::render_text(&s, &name)
    };
    let mut o = std::io::stdout().lock();
    match o.write_all(text.as_bytes()).and_then(|()| o.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => {
            let _ = writeln!(std::io::stderr().lock(), "error: writing the output: {e}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    }
    damage_exit(&name, s.damage.as_ref().map(|d| (d.message.as_str(), d.offset)), s.records)
}

pub(crate) fn run_trace_show(a: &TraceShowArgs) -> ExitCode {
    let (name, file) = match open_trace(&a.file) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let opts = ShowOptions {
        filter: Filter {
            qps: a.qp.clone(),
            opcodes: a.opcode.clone(),
            errors: a.errors,
            kinds: a.kind.clone(),
            limit: a.limit,
            since: a.since,
            until: a.until,
            around: a.around.map(|n| Filter::around(n, a.context)),
        },
        detail: if a.brief {
            Detail::Brief
        } else if a.full {
            Detail::Full
        } else {
            Detail::Normal
        },
        json: a.json,
        tail: a.tail,
    };
    let mut o = std::io::BufWriter::new(std::io::stdout().lock());
    let shown = match marrow::trace::show(file, &opts, &mut o) {
        Ok(s) => s,
        // `marrow trace show ... | head`: the reader left; not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr().lock(), "error: writing the output: {e}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    if !a.json {
        let _ = writeln!(o, "{}", marrow::trace::trailer(&shown, &name, a.limit));
    }
    let _ = o.flush();
    damage_exit(&name, shown.damage.as_ref().map(|d| (d.message.as_str(), d.offset)), shown.total)
}

/// A register trace record as `trace show --brief` prints it: the GPU
/// demo's fault checks show their traces this way.
pub(crate) fn render_brief(i: usize, rec: &marrow_softnic::trace::Record) -> String {
    let v = marrow::trace::view(rec, marrow::trace::Detail::Brief);
    marrow::trace::render_record(i, rec, &v)
}
