//! Any bytes through the RoCEv2 parsers: as an Ethernet frame, as a UDP
//! datagram, and as a bare transport packet. Each gives a packet or an
//! error, never a panic; a packet that parses, rebuilt, parses to itself.
#![no_main]
use libfuzzer_sys::fuzz_target;
use marrow_roce::frame::{self, Addrs, Frame};
use marrow_roce::packet::Packet;

fuzz_target!(|data: &[u8]| {
    if let Ok(Frame::Roce { addrs, packet }) = frame::parse(data) {
        let again = frame::build(&addrs, &packet);
        assert_eq!(frame::parse(&again), Ok(Frame::Roce { addrs, packet }));
    }
    let a = Addrs {
        src_mac: [0; 6],
        dst_mac: [0; 6],
        src_ip: [127, 0, 0, 1].into(),
        dst_ip: [127, 0, 0, 1].into(),
        src_port: 0xc000,
        dst_port: 4791,
    };
    let _ = frame::parse_datagram(&a, data);
    let _ = Packet::parse(data);
});
