//! Any bytes to the softnic daemon: parsed as one framed request and reply,
//! then fed whole to a daemon session after a valid Hello, over a socket
//! pair. The parsers give a message, an error or "more bytes"; the session
//! answers with well-formed replies, ends without a panic, and leaves no
//! object in the model.
#![no_main]
use libfuzzer_sys::fuzz_target;
use marrow_softnic::SoftNic;
use marrow_softnic::daemon::serve_bytes;
use marrow_softnic::wire::{self, Reply, Request};

fuzz_target!(|data: &[u8]| {
    let _ = wire::parse_frame::<Request>(data);
    let _ = wire::parse_frame::<Reply>(data);
    let nic = SoftNic::new();
    let replies = serve_bytes(&nic, data).unwrap();
    if let Err(e) = wire::count_frames::<Reply>(&replies) {
        panic!("a malformed reply: {e}");
    }
    assert_eq!(nic.hca().object_counts(), (0, 0, 0), "objects left after the session ended");
});
