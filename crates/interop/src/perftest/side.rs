//! marrow's end of a perftest run: its buffer's layout (targets between
//! poisoned bytes), and posting, ringing and waiting on its QP.

use super::wire::Keys;
use super::{CYCLE, Options, POISON};
use crate::InteropError;
use crate::host::Host;
use marrow_mlx5::cqe::Completion;
use marrow_mlx5::prelude::*;
use marrow_roce::raw::BTH_PSN_MASK;
use marrow_softnic::mr::Access;
use marrow_softnic::pair::Endpoint;

/// The buffer: perftest's two halves (the second is the target peers
/// see), then a guard.
pub(super) struct Layout {
    pub(super) half: usize,
}

impl Layout {
    pub(super) fn new(size: usize) -> Layout {
        Layout { half: size.max(CYCLE) }
    }
    pub(super) fn len(&self) -> usize {
        2 * self.half + 64
    }
    pub(super) fn target(&self) -> usize {
        self.half
    }
}

pub(super) struct Side<'a> {
    pub(super) host: &'a mut Host,
    pub(super) ep: Endpoint,
    pub(super) opts: Options,
    pub(super) lay: Layout,
    pub(super) me: Keys,
}

pub(super) fn fill_random(len: usize, seed: u64) -> Vec<u8> {
    let mut r = fastrand::Rng::with_seed(seed);
    (0..len).map(|_| r.u8(..)).collect()
}

impl<'a> Side<'a> {
    pub(super) fn new(host: &'a mut Host, opts: Options) -> Result<Side<'a>, InteropError> {
        let lay = Layout::new(opts.size);
        let access = if opts.deny { Access::LOCAL_WRITE } else { opts.test.access() };
        let ep = host.endpoint_with(lay.len(), access)?;
        ep.buf.fill(0, lay.len(), POISON).map_err(|e| InteropError::Setup(e.to_string()))?;
        // READ responses are not acknowledged, so no send window bounds
        // them: the reads a peer may have outstanding are the burst. Keep
        // it within the window the requester keeps (crate::host::SEND_WINDOW_BYTES).
        let out_reads = (crate::host::SEND_WINDOW_BYTES as usize / opts.size.max(1)).clamp(1, 16) as u16;
        let me = Keys {
            lid: 0,
            out_reads,
            qpn: ep.qpn,
            psn: fastrand::u32(..=BTH_PSN_MASK),
            rkey: ep.rkey,
            vaddr: ep.addr + lay.target() as u64,
            gid: host.gid(),
            srqn: 0,
        };
        Ok(Side { host, ep, opts, lay, me })
    }

    pub(super) fn connect(&mut self, peer: &Keys, mtu: u32) -> Result<(), InteropError> {
        let mut a = self.host.attrs(peer.gid, mtu, self.me.psn, peer.psn);
        a.max_rd_atomic = peer.out_reads.clamp(1, 16) as u8;
        a.max_dest_rd_atomic = self.me.out_reads as u8;
        self.host.connect(&self.ep, peer.qpn, a)
    }

    pub(super) fn read(&self, off: usize, len: usize) -> Result<Vec<u8>, InteropError> {
        let mut v = vec![0u8; len];
        self.ep.buf.read_bytes(off, &mut v).map_err(|e| InteropError::Setup(e.to_string()))?;
        Ok(v)
    }

    /// The 8 bytes at `off` as the atomics see them: host order (rxe's
    /// responder and the softnic's both operate on host-order memory).
    pub(super) fn u64_at(&self, off: usize) -> Result<u64, InteropError> {
        let b = self.read(off, 8)?;
        Ok(u64::from_ne_bytes(b.try_into().expect("8 bytes")))
    }

    /// Post one WQE; returns (wqe index, WQEBBs).
    pub(super) fn post(&mut self, op: &WqeOp<'_>) -> Result<(u16, u32), InteropError> {
        let index = self.ep.sq.pi() as u16;
        let b = self
            .ep
            .sq
            .post(CtrlParams::signaled(0, 0), op)
            .map_err(|e| InteropError::Setup(format!("posting: {e}")))?;
        self.ep.sq.ring().map_err(|e| InteropError::Setup(format!("ringing: {e}")))?;
        Ok((index, u32::from(b.wqebbs)))
    }

    /// Wait for the requester completion of (index, wqebbs).
    pub(super) fn complete(
        &mut self,
        index: u16,
        wqebbs: u32,
        opcode: WqeOpcode,
        i: usize,
    ) -> Result<(), InteropError> {
        match self.host.wait(&mut self.ep, false, self.opts.timeout, &format!("operation {i}"))? {
            Completion::Requester { wqe_opcode, wqe_counter, .. } if wqe_opcode == opcode && wqe_counter == index => {
                self.ep.sq.complete_through(index, wqebbs);
                Ok(())
            }
            other => Err(InteropError::Completion(format!(
                "operation {i}: expected the {opcode:?} completion of WQE {index:#06x}; got {other:?}"
            ))),
        }
    }
}

/// Where perftest's client puts operation `i` (`run_iter_bw`): the same
/// bytes for messages over half the cycle buffer, else a stride of the size
/// rounded up to 64 that wraps within the cycle buffer.
pub(super) fn offset(size: usize, i: usize) -> usize {
    if size > CYCLE / 2 {
        return 0;
    }
    let step = size.next_multiple_of(64);
    (i % (CYCLE / step)) * step
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_follow_perftest() {
        assert_eq!(offset(65536, 7), 0);
        assert_eq!(offset(8, 1), 64);
        assert_eq!(offset(8, 64), 0, "wraps within the cycle buffer");
        assert_eq!(offset(100, 1), 128);
    }
}
