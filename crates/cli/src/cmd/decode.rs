//! `marrow decode`: the input read (a file or standard input, any of the
//! hex dump formats or binary), decoded as it streams, printed as text or JSON.

use crate::args::DecodeArgs;
use crate::{EXIT_BAD_INPUT, fail, out};
use marrow::decode::{Options, StreamError, decode_stream};
use marrow::hexin::InputFormat;
use marrow::model::ErrorAt;
use marrow::print::DecodeWriter;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// Bytes of `decode`'s input read before deciding what it is: an input that
/// ends within them is decoded whole, with its length known up front.
const DECODE_WINDOW: usize = 64 << 10;
/// The most `decode --pcie` reads: a configuration space is at most 4 KiB,
/// and an `lspci -xxxx` dump of every function of a large host a few MiB.
const MAX_PCIE_INPUT: u64 = 64 << 20;

/// The input file (or standard input) and its name for messages.
fn open_source(file: Option<&PathBuf>) -> Result<(Box<dyn Read>, String), ErrorAt> {
    match file {
        Some(p) if p.as_os_str() != "-" => {
            let name = marrow::print::escape_path(p);
            let f = std::fs::File::open(p)
                .map_err(|e| ErrorAt { error: format!("cannot read {name}: {e}"), offset: None })?;
            Ok((Box::new(f), name))
        }
        _ => Ok((Box::new(std::io::stdin()), "<stdin>".into())),
    }
}

/// All of `src` for `decode --pcie`, or an error naming the cap it passes.
fn read_pcie_input(src: impl Read, cap: u64, source: &str) -> Result<Vec<u8>, ErrorAt> {
    let mut raw = Vec::new();
    src.take(cap + 1)
        .read_to_end(&mut raw)
        .map_err(|e| ErrorAt { error: format!("cannot read {source}: {e}"), offset: None })?;
    if raw.len() as u64 > cap {
        return Err(ErrorAt {
            error: format!("{source} is longer than {cap} bytes ({} MiB), the most decode --pcie reads", cap >> 20),
            offset: None,
        });
    }
    Ok(raw)
}

/// The bytes of `decode`'s input, read through [`marrow::hexin::ByteReader`],
/// with its errors worded for the command line.
struct DecodeInput<R> {
    reader: marrow::hexin::ByteReader<R>,
    source: String,
    format: InputFormat,
    forced: bool,
    /// Reading failed (the error names the input already).
    failed: bool,
}

impl<R: std::io::BufRead> marrow::decode::Source for DecodeInput<R> {
    fn read_into(&mut self, buf: &mut Vec<u8>, max: usize) -> Result<usize, ErrorAt> {
        self.failed = true;
        let n = self.reader.read_into(buf, max).map_err(|e| match e {
            marrow::hexin::InputError::Io(e) => {
                ErrorAt { error: format!("cannot read {}: {e}", self.source), offset: None }
            }
            marrow::hexin::InputError::Hex(e) => {
                let hint = if self.forced { "" } else { " (to read the input as raw bytes, use --input bin)" };
                let what = self.format.noun();
                ErrorAt { error: format!("{} is not valid {what}: {e}{hint}", self.source), offset: Some(e.offset) }
            }
        })?;
        self.failed = false;
        Ok(n)
    }
}

fn run_decode_pcie(src: impl Read, source: &str, json: bool) -> ExitCode {
    let raw = match read_pcie_input(src, MAX_PCIE_INPUT, source) {
        Ok(r) => r,
        Err(e) => return fail(json, &e),
    };
    match marrow::pcie_decode::decode(&raw) {
        Ok(r) => {
            if json {
                let mut j = r.json.clone();
                j["input"] = serde_json::json!(source);
                j["bytes"] = serde_json::json!(raw.len());
                j["errors"] = r.errors.iter().map(|(e, at)| serde_json::json!({ "error": e, "offset": at })).collect();
                out(&format!("{}\n", serde_json::to_string_pretty(&j).expect("report serializes")));
            } else {
                out(&format!("Input: {source}, {} bytes\n{}", raw.len(), r.text));
            }
            // The decode is on stdout; what is wrong with the input goes to stderr, as `decode`'s does.
            for (e, at) in &r.errors {
                let at = at.map(|a| format!(" (offset {a:#x})")).unwrap_or_default();
                let _ = writeln!(std::io::stderr().lock(), "error: {source}: {}{at}", marrow::print::escape(e));
            }
            if r.clean() { ExitCode::SUCCESS } else { ExitCode::from(EXIT_BAD_INPUT) }
        }
        Err(e) => fail(json, &ErrorAt { error: format!("{source}: {}", marrow::print::escape(&e)), offset: None }),
    }
}

pub(crate) fn run_decode(a: &DecodeArgs) -> ExitCode {
    let (src, source) = match open_source(a.file.as_ref()) {
        Ok(r) => r,
        Err(e) => return fail(a.json, &e),
    };
    if a.pcie {
        return run_decode_pcie(src, &source, a.json);
    }
    // The format is told from the start of the input, which is then read again.
    let mut src = std::io::BufReader::with_capacity(DECODE_WINDOW, src);
    let mut start = Vec::new();
    if let Err(e) = (&mut src).take(DECODE_WINDOW as u64).read_to_end(&mut start) {
        return fail(a.json, &ErrorAt { error: format!("cannot read {source}: {e}"), offset: None });
    }
    let format = a.input.unwrap_or_else(|| marrow::hexin::detect(&start));
    let reader = marrow::hexin::ByteReader::new(std::io::Cursor::new(start).chain(src), format);
    let mut input = DecodeInput { reader, source: source.clone(), format, forced: a.input.is_some(), failed: false };
    let opts = Options { kind: a.kind, ownership: a.ci.zip(a.ncqe) };
    let stdout = std::io::BufWriter::new(std::io::stdout().lock());
    let mut w = DecodeWriter::new(stdout, std::io::stderr(), a.json, source, format.describe());
    let done = match decode_stream(&mut input, &opts, DECODE_WINDOW, &mut w) {
        Ok(()) => w.finish(),
        Err(StreamError::Input(e)) => {
            // Errors of the decode (not of reading) do not name the input yet.
            let e = if input.failed { e } else { ErrorAt { error: format!("{}: {}", input.source, e.error), ..e } };
            let _ = w.fail(&e);
            return ExitCode::from(EXIT_BAD_INPUT);
        }
        Err(StreamError::Output(e)) => Err(e),
    };
    match done {
        Ok(()) if w.bad => ExitCode::from(EXIT_BAD_INPUT),
        Ok(()) => ExitCode::SUCCESS,
        // `marrow decode ... | head`: the reader left; not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr().lock(), "error: writing the output: {e}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}
