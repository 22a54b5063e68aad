//! Config-space dumps as `lspci -x`, `-xxx` and `-xxxx` print them (and as
//! `lspci -F` reads them back): a line naming the function, then rows of
//! `OFF: b0 b1 … b15` starting at offset 0. Several functions may follow
//! one another, separated by blank lines; indented lines (the decoded
//! text of `lspci -vvv -xxx`) are skipped. Raw binaries (sysfs `config`)
//! need no parsing: hand their bytes to [`Config::new`](crate::Config::new).

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

/// One function from a text dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpedFunction {
    /// `[domain:]bus:device.function`, as written.
    pub address: String,
    /// The rest of the title line (lspci's description), trimmed.
    pub title: String,
    pub bytes: Vec<u8>,
}

/// Why a text dump could not be read; `line` counts from 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DumpError {
    /// A row before any title line.
    RowWithoutFunction { line: usize },
    /// A row whose offset is not where the previous one ended.
    OffsetGap { line: usize, expected: usize, found: usize },
    /// A row that is not `OFF:` and up to sixteen hex bytes.
    BadRow { line: usize, text: String },
    /// More than 4096 bytes for one function.
    TooLong { line: usize },
    /// No function in the input.
    Empty,
}

impl fmt::Display for DumpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::RowWithoutFunction { line } => {
                write!(f, "line {line}: hex row before any `bus:dev.fn` title line")
            }
            Self::OffsetGap { line, expected, found } => write!(
                f,
                "line {line}: row at offset {found:#x}, expected {expected:#x} (rows must be contiguous from 0)"
            ),
            Self::BadRow { line, text } => write!(f, "line {line}: not a dump row: {text:?}"),
            Self::TooLong { line } => write!(f, "line {line}: more than 4096 bytes for one function"),
            Self::Empty => write!(f, "no `bus:dev.fn` function found in the dump"),
        }
    }
}

/// Whether `word` looks like `bb:dd.f` or `dddd:bb:dd.f`.
fn is_address(word: &str) -> bool {
    let (head, func) = match word.rsplit_once('.') {
        Some(p) => p,
        None => return false,
    };
    let parts: Vec<&str> = head.split(':').collect();
    let hex = |s: &str, n: usize| s.len() == n && s.chars().all(|c| c.is_ascii_hexdigit());
    func.len() == 1
        && func.chars().all(|c| c.is_ascii_digit())
        && match parts.as_slice() {
            [bus, dev] => hex(bus, 2) && hex(dev, 2),
            [dom, bus, dev] => hex(dom, 4) && hex(bus, 2) && hex(dev, 2),
            _ => false,
        }
}

/// Parses `OFF: xx xx …` into its offset and bytes.
fn parse_row(line: &str) -> Option<(usize, Vec<u8>)> {
    let (off, rest) = line.split_once(':')?;
    let off = off.trim();
    if off.is_empty() || off.len() > 3 {
        return None;
    }
    let offset = usize::from_str_radix(off, 16).ok()?;
    let mut bytes = Vec::with_capacity(16);
    for word in rest.split_whitespace() {
        if word.len() != 2 {
            return None;
        }
        bytes.push(u8::from_str_radix(word, 16).ok()?);
    }
    (!bytes.is_empty() && bytes.len() <= 16).then_some((offset, bytes))
}

/// Reads every function of an `lspci -x`-style text dump.
pub fn parse_lspci_text(text: &str) -> Result<Vec<DumpedFunction>, DumpError> {
    let mut out: Vec<DumpedFunction> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.trim_end();
        // Indented lines are lspci's decoded view (`lspci -vvv -xxx` output
        // interleaves it with the rows); `lspci -F` skips them too.
        if line.trim().is_empty() || line.starts_with(char::is_whitespace) {
            continue;
        }
        // No leading whitespace (any Unicode kind, checked above), so the
        // line starts with its first word and slicing after it is on a char boundary.
        let first = line.split_whitespace().next().unwrap_or("");
        if is_address(first) {
            out.push(DumpedFunction {
                address: first.to_string(),
                title: line[first.len()..].trim().to_string(),
                bytes: Vec::new(),
            });
            continue;
        }
        let Some((offset, bytes)) = parse_row(line) else {
            return Err(DumpError::BadRow { line: line_no, text: line.to_string() });
        };
        let func = out.last_mut().ok_or(DumpError::RowWithoutFunction { line: line_no })?;
        if offset != func.bytes.len() {
            return Err(DumpError::OffsetGap { line: line_no, expected: func.bytes.len(), found: offset });
        }
        if func.bytes.len() + bytes.len() > crate::header::CONFIG_SPACE_EXTENDED {
            return Err(DumpError::TooLong { line: line_no });
        }
        func.bytes.extend_from_slice(&bytes);
    }
    if out.is_empty() {
        return Err(DumpError::Empty);
    }
    Ok(out)
}
