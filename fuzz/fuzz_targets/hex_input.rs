//! Any bytes through the hex/xxd/hexdump/kernel/binary reader of `marrow decode`, read
//! whole and a chunk at a time: the same bytes or the same error either way,
//! and never more out than the input's hex and the capped `*` fills allow.
#![no_main]
use libfuzzer_sys::fuzz_target;
use marrow::hexin::{ByteReader, InputFormat, MAX_ZERO_FILL, detect, read_input};

fn chunked(raw: &[u8], f: InputFormat, chunk: usize, buf: usize) -> Result<Vec<u8>, String> {
    let mut r = ByteReader::new(std::io::BufReader::with_capacity(buf, raw), f);
    let mut out = Vec::new();
    loop {
        match r.read_into(&mut out, chunk) {
            Ok(0) => return Ok(out),
            Ok(n) => assert!(n <= chunk),
            Err(e) => return Err(e.to_string()),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&shape, raw)) = data.split_first() else { return };
    let chunk = usize::from(shape & 0x3f) + 1;
    let buf = usize::from(shape >> 6) * 5 + 1;
    let _ = detect(raw);
    for f in [InputFormat::Hex, InputFormat::Xxd, InputFormat::Hexdump, InputFormat::Kernel, InputFormat::Bin] {
        let whole = read_input(raw, Some(f)).map(|(b, _)| b).map_err(|e| e.to_string());
        if let Ok(b) = &whole {
            let most = if f == InputFormat::Bin { raw.len() } else { raw.len() / 2 + MAX_ZERO_FILL as usize };
            assert!(b.len() <= most);
        }
        assert_eq!(chunked(raw, f, chunk, buf), whole);
    }
    let _ = read_input(raw, None);
});
