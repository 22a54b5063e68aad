//! `marrow bench compare`: the `--json` reports of runs taken by turns
//! (`bench gpu --json-out`, or any bench's `--json`), read back and set
//! side by side, one column per build ([`marrow_bench::compare`]).

use marrow_bench::FigureReport;
use marrow_bench::compare::{Runs, compare, markdown};
use std::path::Path;

/// A run argument: `LABEL=FILE`, or `FILE`, labelled by its name without
/// the extension. The same label again is the next round of that build.
fn label_and_path(arg: &str) -> (String, &Path) {
    match arg.split_once('=') {
        Some((label, path)) if !label.is_empty() => (label.to_string(), Path::new(path)),
        _ => {
            let path = Path::new(arg);
            let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| arg.to_string());
            (stem, path)
        }
    }
}

/// The reports named by `args`, grouped by label in the order the labels
/// first come; the Markdown table of their figures (those matching
/// `matching`, or all). An unreadable file or one that is not a report is
/// an error that names it.
pub fn table(args: &[String], matching: &[String]) -> Result<String, String> {
    let mut runs: Vec<Runs> = Vec::new();
    for arg in args {
        let (label, path) = label_and_path(arg);
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let report: FigureReport = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a bench report (`--json` output): {e}", path.display()))?;
        match runs.iter_mut().find(|r| r.label == label) {
            Some(r) => r.reports.push(report),
            None => runs.push(Runs { label, reports: vec![report] }),
        }
    }
    let lines = compare(&runs).map_err(|e| e.to_string())?;
    let labels: Vec<String> = runs.into_iter().map(|r| r.label).collect();
    Ok(markdown(&labels, &lines, matching))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_come_from_the_argument_or_the_file_name() {
        assert_eq!(label_and_path("head=/tmp/r1.json"), ("head".to_string(), Path::new("/tmp/r1.json")));
        assert_eq!(label_and_path("/tmp/main-r2.json"), ("main-r2".to_string(), Path::new("/tmp/main-r2.json")));
        // An empty label is no label.
        assert_eq!(label_and_path("=x.json"), ("=x".to_string(), Path::new("=x.json")));
    }
}
