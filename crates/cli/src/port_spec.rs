//! The softnic's wire ports as the command line names them (`marrow
//! softnic --port`, `marrow bench verbs --wire`, `marrow interop host`).

/// `udp:IP:PORT` or `frames:IP:PORT,PEER_IP:PEER_PORT,MAC_IP`.
pub fn parse(s: &str) -> Result<marrow_softnic::rc::port::PortKind, String> {
    use marrow_softnic::rc::port::{PortKind, udp_mac};
    use std::net::{Ipv4Addr, SocketAddrV4};
    let sock = |a: &str| a.parse::<SocketAddrV4>().map_err(|e| format!("'{a}': {e} (want IPv4:PORT)"));
    if let Some(a) = s.strip_prefix("udp:") {
        return Ok(PortKind::Udp { bind: sock(a)? });
    }
    if let Some(rest) = s.strip_prefix("frames:") {
        let parts: Vec<&str> = rest.split(',').collect();
        let [bind, peer, ip] = parts[..] else {
            return Err(format!("'{s}': frames:IP:PORT,PEER_IP:PEER_PORT,MAC_IP"));
        };
        let ip: Ipv4Addr = ip.parse().map_err(|e| format!("'{ip}': {e}"))?;
        return Ok(PortKind::Frames { bind: sock(bind)?, peer: sock(peer)?, mac: udp_mac(ip), ip });
    }
    Err(format!("'{s}': a port is udp:IP:PORT or frames:IP:PORT,PEER_IP:PEER_PORT,MAC_IP"))
}
