//! `net`: loopback network traffic, TCP or UDP, on 127.0.0.1 only. The enemy owns both
//! ends: it sends a `message_bytes` message (TCP: a stream connection to its own listener;
//! UDP: one datagram, at most 65 000 bytes) and receives it back whole before the next.
//! The traffic never leaves the machine and is bounded by that one message in flight, yet
//! every byte goes through the kernel's socket, protocol and softirq paths (the network
//! stack of seed 000 §7.1.2). The counter is bytes received.
use super::EnemyLoad;
use super::kind::{Dflt, Kind, Param};
use crate::plan::err;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};

/// Transport of the loopback traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    Tcp,
    Udp,
}

enum Ends {
    Tcp { tx: TcpStream, rx: TcpStream },
    Udp { tx: UdpSocket, rx: UdpSocket },
}

pub struct Net {
    ends: Ends,
    msg: Vec<u8>,
    buf: Vec<u8>,
}

impl Net {
    pub fn new(proto: Proto, message_bytes: u64) -> Result<Net, String> {
        let lo = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let ends = match proto {
            Proto::Tcp => {
                let l = TcpListener::bind(lo).map_err(|e| format!("net: bind 127.0.0.1: {e}"))?;
                let tx = TcpStream::connect(l.local_addr().unwrap()).map_err(|e| format!("net: connect: {e}"))?;
                let (rx, _) = l.accept().map_err(|e| format!("net: accept: {e}"))?;
                tx.set_nodelay(true).ok();
                // The sender never blocks: with one thread, a blocked send would wait for a
                // receive that cannot come.
                tx.set_nonblocking(true).map_err(|e| format!("net: {e}"))?;
                Ends::Tcp { tx, rx }
            }
            Proto::Udp => {
                let rx = UdpSocket::bind(lo).map_err(|e| format!("net: bind 127.0.0.1: {e}"))?;
                let tx = UdpSocket::bind(lo).map_err(|e| format!("net: bind 127.0.0.1: {e}"))?;
                tx.connect(rx.local_addr().unwrap()).map_err(|e| format!("net: connect: {e}"))?;
                Ends::Udp { tx, rx }
            }
        };
        let n = message_bytes as usize;
        Ok(Net { ends, msg: (0..n).map(|i| i as u8).collect(), buf: vec![0; n.max(1)] })
    }
}

impl EnemyLoad for Net {
    fn chunk(&mut self) -> u64 {
        let n = self.msg.len();
        match &mut self.ends {
            Ends::Tcp { tx, rx } => {
                let (mut sent, mut got) = (0, 0);
                while got < n {
                    if sent < n {
                        match tx.write(&self.msg[sent..]) {
                            Ok(k) => sent += k,
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                            Err(_) => return got as u64,
                        }
                    }
                    // Block only when bytes are in flight, so a receive always completes.
                    if got < sent {
                        match rx.read(&mut self.buf[..sent - got]) {
                            Ok(0) | Err(_) => return got as u64,
                            Ok(k) => got += k,
                        }
                    }
                }
                got as u64
            }
            Ends::Udp { tx, rx } => {
                if tx.send(&self.msg).is_err() {
                    return 0;
                }
                rx.recv(&mut self.buf).map(|k| k as u64).unwrap_or(0)
            }
        }
    }
}

/// The `net` kind (registry: mod.rs).
pub const KIND: Kind = Kind::new("net", "network stack on loopback only (127.0.0.1), one message in flight", "bytes", &[
    Param::choice("proto", &["tcp", "udp"], "the transport, tcp or udp"),
    Param::u64("message_bytes", "bytes per message (udp: at most 65000)").range(1, 16 << 20).default(Dflt::U64(32768)).unit("bytes"),
], |a, _| Ok(Box::new(Net::new(if a.str("proto") == "udp" { Proto::Udp } else { Proto::Tcp }, a.u64("message_bytes"))?)))
.footprint(2, &["message_bytes"])
.check(|a, at| {
    let n = a.u64("message_bytes");
    if a.str("proto") == "udp" && n > UDP_MAX {
        return err(format!("{at}.message_bytes"), format!("{n} is out of range; use 1..{UDP_MAX} for udp"));
    }
    Ok(())
})
.channel("network");
/// Largest UDP message (one datagram).
const UDP_MAX: u64 = 65_000;

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn messages_come_back_whole() {
        for proto in [Proto::Tcp, Proto::Udp] {
            let mut n = Net::new(proto, 60_000).unwrap();
            assert_eq!(n.chunk(), 60_000);
            assert_eq!(n.buf[..60_000], n.msg[..]);
        }
    }
}
