//! Any bytes to the softnic daemon: parsed as one framed request and reply,
//! then fed whole to a daemon session after a valid Hello, over a socket
//! pair. The parsers give a message, an error or "more bytes"; the session
//! answers with well-formed replies, ends without a panic, and leaves no
//! object in the model.
#![no_main]
use libfuzzer_sys::fuzz_target;
use marrow_softnic::SoftNic;
use marrow_softnic::daemon::{Options, serve_connection};
use marrow_softnic::wire::{self, PROTOCOL_VERSION, Reply, Request};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

fuzz_target!(|data: &[u8]| {
    let _ = wire::parse_frame::<Request>(data);
    let _ = wire::parse_frame::<Reply>(data);
    let nic = SoftNic::new();
    let (mut ours, theirs) = UnixStream::pair().unwrap();
    let mut r = ours.try_clone().unwrap();
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        v
    });
    ours.write_all(&wire::frame(&Request::Hello { version: PROTOCOL_VERSION })).unwrap();
    let _ = ours.write_all(data);
    ours.shutdown(std::net::Shutdown::Write).unwrap();
    serve_connection(&nic, theirs, &Options::default());
    let replies = reader.join().unwrap();
    let mut at = 0;
    while at < replies.len() {
        match wire::parse_frame::<Reply>(&replies[at..]) {
            Ok(Some((_, used))) => at += used,
            other => panic!("a malformed reply at byte {at}: {other:?}"),
        }
    }
    assert_eq!(nic.hca().object_counts(), (0, 0, 0), "objects left after the session ended");
});
