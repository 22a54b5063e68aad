//! `marrow`: command-line tools for the marrow mlx5 stack.

use clap::{Args, Parser, Subcommand};
use marrow::decode::{Options, decode};
use marrow::hexin::{InputFormat, read_input};
use marrow::model::{ErrorAt, Kind};
use marrow::print::{render_json, render_text};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit status of a run that found something wrong with its input.
const EXIT_BAD_INPUT: u8 = 2;

#[derive(Parser, Debug)]
#[command(name = "marrow", version, about = "Tools for GPU-initiated RDMA on mlx5 (ConnectX) NICs")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Decode a send WQE, CQE, doorbell record or UAR doorbell field by field.
    Decode(DecodeArgs),
}

#[derive(Args, Debug)]
#[command(after_help = "\
Input formats (detected unless --input is given):
  xxd    xxd output: '00000000: 0000 0508 0012 3403 ...  ascii'
  hex    hex words of an even number of digits, separated by spaces, commas or
         lines, '0x' optional, '#' comments; each word's bytes are taken in the
         order written ('00001208' is the bytes 00 00 12 08)
  bin    the raw bytes (any input that is not text)

With --kind auto: 8 bytes are a UAR doorbell; bytes starting with a valid
control segment of a known opcode are WQEs (several back to back are decoded
in turn); 64 bytes are a CQE, 128 a 128-byte CQE.

Exit status: 0 when everything decoded, 2 when the input is malformed.")]
struct DecodeArgs {
    /// Input file; standard input when absent or '-'.
    file: Option<PathBuf>,

    /// What the bytes are.
    #[arg(long, value_enum, default_value_t = Kind::Auto)]
    kind: Kind,

    /// How the input is written (default: detected).
    #[arg(long, value_enum)]
    input: Option<InputFormat>,

    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,

    /// CQEs: consumer index for an ownership check (with --ncqe); decimal or 0x hex.
    #[arg(long, requires = "ncqe", value_parser = parse_u32)]
    ci: Option<u32>,

    /// CQEs: number of entries of the CQ, a power of two (with --ci).
    #[arg(long, requires = "ci", value_parser = parse_u32)]
    ncqe: Option<u32>,
}

fn parse_u32(s: &str) -> Result<u32, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("'{s}': {e}"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Decode(a) => run_decode(&a),
    }
}

/// Write to stdout; a closed pipe (`marrow decode ... | head`) is not an error.
fn out(s: &str) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(s.as_bytes()).and_then(|()| o.flush());
}

/// Write an `error:` line to stderr.
fn err_line(e: &ErrorAt) {
    let _ = writeln!(std::io::stderr().lock(), "error: {e}");
}

/// Print a run-level error (no decode at all) and return the exit status.
fn fail(json: bool, e: &ErrorAt) -> ExitCode {
    if json {
        out(&format!("{}\n", serde_json::json!({ "error": e.error, "offset": e.offset })));
    }
    err_line(e);
    ExitCode::from(EXIT_BAD_INPUT)
}

fn read_source(file: Option<&PathBuf>) -> Result<(Vec<u8>, String), ErrorAt> {
    let mut raw = Vec::new();
    match file {
        Some(p) if p.as_os_str() != "-" => {
            raw = std::fs::read(p)
                .map_err(|e| ErrorAt { error: format!("cannot read {}: {e}", p.display()), offset: None })?;
            Ok((raw, p.display().to_string()))
        }
        _ => {
            std::io::stdin()
                .read_to_end(&mut raw)
                .map_err(|e| ErrorAt { error: format!("cannot read standard input: {e}"), offset: None })?;
            Ok((raw, "<stdin>".into()))
        }
    }
}

fn run_decode(a: &DecodeArgs) -> ExitCode {
    let (raw, source) = match read_source(a.file.as_ref()) {
        Ok(r) => r,
        Err(e) => return fail(a.json, &e),
    };
    let (bytes, format) = match read_input(&raw, a.input) {
        Ok(r) => r,
        Err(e) => {
            let hint = if a.input.is_none() { " (to read the input as raw bytes, use --input bin)" } else { "" };
            let what = match a.input {
                Some(InputFormat::Xxd) => "an xxd dump",
                _ if marrow::hexin::detect(&raw) == InputFormat::Xxd => "an xxd dump",
                _ => "hex",
            };
            let err = ErrorAt { error: format!("{source} is not valid {what}: {e}{hint}"), offset: Some(e.offset) };
            return fail(a.json, &err);
        }
    };
    let opts = Options { kind: a.kind, ownership: a.ci.zip(a.ncqe) };
    let report = match decode(&bytes, &opts) {
        Ok(r) => r,
        Err(e) => {
            let e = ErrorAt { error: format!("{source}: {}", e.error), offset: e.offset };
            return fail(a.json, &e);
        }
    };
    if a.json {
        out(&format!("{}\n", render_json(&report)));
    } else {
        out(&format!("Input: {source}, {} bytes ({})\n{}", bytes.len(), format.describe(), render_text(&report)));
    }
    let mut bad = false;
    for e in report.errors() {
        err_line(e);
        bad = true;
    }
    if bad { ExitCode::from(EXIT_BAD_INPUT) } else { ExitCode::SUCCESS }
}
