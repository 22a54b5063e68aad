//! Any bytes as a trace file, bare and after a valid file header: the
//! streaming reader gives what `parse` gives, and `trace show` renders every
//! record at every detail, as text and as JSON Lines, without a panic and
//! without a character a terminal would obey; `trace stats` summarizes it
//! without a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use marrow::trace::{Detail, Filter, ShowOptions, show};
use marrow_softnic::trace::{MAGIC, Reader, VERSION, parse};

fn terminal_safe(text: &str) -> bool {
    !text.chars().any(|c| (c.is_control() && !matches!(c, '\n' | '\t')) || marrow::print::is_format_char(c))
}

fn every_way(file: &[u8]) {
    let (records, err) = parse(file);
    match Reader::new(file) {
        Ok(r) => {
            let streamed: Vec<_> = r.collect();
            let ok = streamed.iter().filter(|r| r.is_ok()).count();
            assert_eq!(ok, records.len());
            assert_eq!(streamed.last().and_then(|r| r.clone().err()), err);
        }
        Err(e) => assert_eq!((records.len(), Some(e)), (0, err)),
    }
    for detail in [Detail::Brief, Detail::Normal, Detail::Full] {
        for json in [false, true] {
            for (limit, tail) in [(None, None), (Some(1), None), (None, Some(2))] {
                let opts = ShowOptions { filter: Filter { limit, ..Filter::default() }, detail, json, tail };
                let mut out = Vec::new();
                let s = show(file, &opts, &mut out).expect("writing to a Vec");
                assert!(s.shown <= limit.or(tail).unwrap_or(usize::MAX));
                let text = String::from_utf8(out).expect("UTF-8 output");
                assert!(terminal_safe(&text), "{text:?}");
                if json {
                    for l in text.lines() {
                        serde_json::from_str::<serde_json::Value>(l).expect("JSON Lines");
                    }
                }
            }
        }
    }
    let stats = marrow::trace_stats::stats(file);
    assert!(terminal_safe(&marrow::trace_stats::render_text(&stats, "fuzz")));
    let _ = marrow::trace_stats::render_json(&stats, "fuzz");
}

fuzz_target!(|data: &[u8]| {
    every_way(data);
    let mut file = MAGIC.to_vec();
    file.extend_from_slice(&VERSION.to_le_bytes());
    file.extend_from_slice(&[0; 4]);
    file.extend_from_slice(data);
    every_way(&file);
});
