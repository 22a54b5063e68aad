//! The daemon's protocol parsers on any bytes: a framed message, a clear
//! error, or "more bytes needed", never a panic; and a daemon session fed
//! any bytes after its Hello answers and ends without panicking, leaving
//! no object behind.

use marrow_softnic::SoftNic;
use marrow_softnic::daemon::serve_bytes;
use marrow_softnic::wire::{self, Reply, Request};
use proptest::prelude::*;

/// Requests as JSON a client could send, whole or cut, with numbers of all sizes.
fn request_json() -> impl Strategy<Value = Vec<u8>> {
    let num = prop_oneof![Just(0u64), Just(1), Just(0x100), Just(u32::MAX as u64), any::<u64>()];
    (0usize..12, num.clone(), num, any::<bool>()).prop_map(|(k, a, b, f)| {
        let s = match k {
            0 => "\"AllocPd\"".to_string(),
            1 => format!("{{\"RegMr\":{{\"pd\":{a},\"addr\":{b},\"len\":{a},\"access\":{b}}}}}"),
            2 => format!("{{\"CreateCq\":{{\"ncqe\":{a},\"collapsed\":{f}}}}}"),
            3 => format!("{{\"CreateQp\":{{\"pd\":{a},\"send_cq\":{b},\"recv_cq\":{b},\"sq_wqebbs\":{a},\"rq_wqes\":{a},\"rq_stride\":{b}}}}}"),
            4 => format!("{{\"ModifyQp\":{{\"qpn\":{a},\"state\":{b},\"dest_qpn\":{a},\"rnr_retry\":null}}}}"),
            5 => format!("{{\"DestroyQp\":{{\"qpn\":{a}}}}}"),
            6 => format!("{{\"DestroyCq\":{{\"cqn\":{a}}}}}"),
            7 => format!("{{\"DeregMr\":{{\"lkey\":{a}}}}}"),
            8 => format!("{{\"EnableTrace\":{{\"cap\":{a}}}}}"),
            9 => "\"Trace\"".to_string(),
            10 => format!("{{\"Hello\":{{\"version\":{a}}}}}"),
            _ => format!("{{\"SetFaults\":{{\"qpn\":{a},\"drop_doorbells\":{b},\"fail_wqe\":[{a},{b},1],\"stall\":{f},\"overflow_cq\":{f}}}}}"),
        };
        s.into_bytes()
    })
}

/// A stream of frames: well-formed requests, mangled ones, lengths that lie.
fn stream() -> impl Strategy<Value = Vec<u8>> {
    let frame = prop_oneof![
        request_json().prop_map(|b| {
            let mut f = (b.len() as u32).to_le_bytes().to_vec();
            f.extend(b);
            f
        }),
        (request_json(), any::<usize>(), any::<u8>()).prop_map(|(mut b, i, x)| {
            let n = b.len();
            b[i % n] ^= x;
            let mut f = (n as u32).to_le_bytes().to_vec();
            f.extend(b);
            f
        }),
        prop::collection::vec(any::<u8>(), 0..64),
    ];
    prop::collection::vec(frame, 0..12).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn parse_frame_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = wire::parse_frame::<Request>(&bytes);
        let _ = wire::parse_frame::<Reply>(&bytes);
    }

    #[test]
    fn a_request_frames_and_parses_back(json in request_json()) {
        if let Ok(req) = serde_json::from_slice::<Request>(&json) {
            let f = wire::frame(&req);
            let (back, used) = wire::parse_frame::<Request>(&f).unwrap().unwrap();
            prop_assert_eq!(used, f.len());
            prop_assert_eq!(format!("{back:?}"), format!("{req:?}"));
        }
    }

    #[test]
    fn a_session_fed_any_bytes_ends_cleanly(bytes in stream()) {
        let nic = SoftNic::new();
        let replies = serve_bytes(&nic, &bytes).unwrap();
        // Every reply the session sent is a whole, well-formed message.
        if let Err(e) = wire::count_frames::<Reply>(&replies) {
            prop_assert!(false, "a malformed reply: {e}");
        }
        prop_assert_eq!(nic.hca().object_counts(), (0, 0, 0), "objects left after the session ended");
    }
}
