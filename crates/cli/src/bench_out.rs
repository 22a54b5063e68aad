//! How the benchmarks print: their text as it always was, or the figures
//! as JSON or CSV (`--json`, `--csv`). A run that stops says why on stderr;
//! with `--json` also as an error object on stdout, the shape `decode
//! --json` and `doctor --json` use, so a script reading stdout learns why.

use marrow_bench::FigureReport;
use std::io::Write;
use std::process::ExitCode;

/// What goes to stdout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The text, line for line as in the old run logs.
    Text,
    /// The report as one JSON object (schema in the README).
    Json,
    /// The report's rows as CSV.
    Csv,
}

impl Format {
    /// From the `--json` and `--csv` flags (clap refuses both together).
    pub fn of(json: bool, csv: bool) -> Format {
        match (json, csv) {
            (true, _) => Format::Json,
            (false, true) => Format::Csv,
            (false, false) => Format::Text,
        }
    }

    /// Whether the text goes to stdout.
    pub fn is_text(self) -> bool {
        self == Format::Text
    }
}

/// `--json` and `--csv`, as the benchmarks take them (flattened into each
/// command's arguments).
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct FormatArgs {
    /// Print the figures as JSON (the schema in the README); the run's text
    /// and progress go to stderr.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print the figures as CSV, one row per figure; the text goes to stderr.
    #[arg(long)]
    pub csv: bool,
}

impl FormatArgs {
    /// The format the flags ask for.
    pub fn format(self) -> Format {
        Format::of(self.json, self.csv)
    }
}

/// The error line on stderr (and the error object on stdout with
/// `--json`); `code` is the exit status.
pub fn fail(f: Format, error: impl std::fmt::Display, code: u8) -> ExitCode {
    let error = error.to_string();
    if f == Format::Json {
        let mut o = std::io::stdout().lock();
        let _ = writeln!(o, "{}", serde_json::json!({ "error": error, "offset": null }));
        let _ = o.flush();
    }
    let _ = writeln!(std::io::stderr().lock(), "error: {error}");
    ExitCode::from(code)
}

/// Print the report as `f` asks (the text was written as it ran). A
/// reader that left (`| head`) is not an error.
pub fn print(f: Format, r: &FigureReport) -> ExitCode {
    let text = match f {
        Format::Text => return ExitCode::SUCCESS,
        Format::Json => marrow_bench::figure_report::json(r),
        Format::Csv => marrow_bench::figure_report::csv(r),
    };
    match text {
        Ok(t) => write_stdout(&t),
        Err(e) => fail(Format::Text, e, 1),
    }
}

/// Write `text` to stdout; a reader that left (`| head`) is not an error.
pub fn write_stdout(text: &str) -> ExitCode {
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => fail(Format::Text, format!("writing the report: {e}"), 1),
    }
}
