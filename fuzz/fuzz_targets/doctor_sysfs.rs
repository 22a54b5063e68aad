//! Any bytes as the contents of the files `marrow doctor` reads: split at
//! 0xfe into up to four functions' `config`, `numa_node` and `resource`
//! (a chain of bridges down from one host bridge), then `/proc/cmdline` and
//! the nvidia `params`. The report comes out, as text and JSON, whatever the
//! bytes; its text holds no character a terminal would obey.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let parts: Vec<&[u8]> = data.split(|&b| b == 0xfe).collect();
    let (files, rest) = parts.split_at(parts.len().min(12));
    let functions: Vec<[&[u8]; 3]> =
        files.chunks(3).map(|c| [c[0], c.get(1).copied().unwrap_or(b""), c.get(2).copied().unwrap_or(b"")]).collect();
    let cmdline = rest.first().copied().unwrap_or(b"");
    let params = rest.get(1).copied().unwrap_or(b"");
    let (text, json) = marrow::doctor::report_from_contents(&functions, cmdline, params);
    assert!(!text.chars().any(|c| (c.is_control() && c != '\n') || marrow::print::is_format_char(c)), "{text:?}");
    serde_json::from_str::<serde_json::Value>(&json).expect("the report is JSON");
});
