//! Who gets in: at most `max_clients` connections past their `Hello`, and
//! at most `max_handshaking` before it. A connection that has not said
//! `Hello` costs the daemon a thread and a descriptor and proves nothing, so
//! when the handshaking ones are all taken the oldest one with nothing sent
//! is closed to let the new one try (one whose `Hello` is already waiting
//! for its thread to read it is left alone): a flood of silent connections
//! then cannot keep a real client out.

use std::collections::VecDeque;
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::sync::Mutex;

/// The daemon's door.
#[derive(Debug)]
pub(super) struct Admission {
    max_clients: usize,
    max_handshaking: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    next: u64,
    greeted: usize,
    /// Connections not yet greeted, oldest first, with a handle to close them.
    handshaking: VecDeque<(u64, UnixStream)>,
}

/// One admitted connection's place; give it back with [`Admission::leave`].
#[derive(Debug)]
pub(super) struct Ticket {
    id: u64,
    greeted: bool,
}

impl Admission {
    pub(super) fn new(max_clients: usize, max_handshaking: usize) -> Self {
        Admission { max_clients, max_handshaking: max_handshaking.max(1), state: Mutex::default() }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admit `s` to its handshake, closing the oldest handshaking connection
    /// if all their places are taken; `Err` says why `s` is refused.
    pub(super) fn admit(&self, s: &UnixStream) -> Result<Ticket, String> {
        let mut st = self.state();
        if st.greeted >= self.max_clients {
            return Err(format!("this daemon serves at most {} clients at once", self.max_clients));
        }
        let handle = s.try_clone().map_err(|e| format!("a handle on the connection: {e}"))?;
        if st.handshaking.len() >= self.max_handshaking
            && let Some(i) = st.handshaking.iter().position(|(_, c)| silent(c))
            && let Some((_, oldest)) = st.handshaking.remove(i)
        {
            // Its session sees the stream end and leaves.
            let _ = oldest.shutdown(Shutdown::Both);
        }
        let id = st.next;
        st.next += 1;
        st.handshaking.push_back((id, handle));
        Ok(Ticket { id, greeted: false })
    }

    /// The connection said `Hello`: it becomes a client, if there is room.
    pub(super) fn greet(&self, t: &mut Ticket) -> Result<(), String> {
        let mut st = self.state();
        if st.greeted >= self.max_clients {
            return Err(format!("this daemon serves at most {} clients at once", self.max_clients));
        }
        st.handshaking.retain(|(id, _)| *id != t.id);
        st.greeted += 1;
        t.greeted = true;
        Ok(())
    }

    /// The connection ended.
    pub(super) fn leave(&self, t: Ticket) {
        let mut st = self.state();
        if t.greeted {
            st.greeted -= 1;
        } else {
            st.handshaking.retain(|(id, _)| *id != t.id);
        }
    }
}

/// Whether nothing waits to be read on `s` (a connection that sent nothing
/// yet, or whose peer has gone).
fn silent(s: &UnixStream) -> bool {
    use nix::sys::socket::{MsgFlags, recv};
    use std::os::fd::AsRawFd;
    let mut b = [0u8; 1];
    !matches!(recv(s.as_raw_fd(), &mut b, MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT), Ok(n) if n > 0)
}
