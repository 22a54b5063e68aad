//! Protection domains and memory regions: what the HCA's memory
//! translation checks before every DMA (InfiniBand Architecture
//! Specification vol. 1 §10.6, "Memory management"; verbs `ibv_reg_mr`
//! access flags).
//!
//! A region registered here is backed by a shared mapping, which the model
//! reaches through a [`Region`], or by device memory (a GPU's), which it
//! reaches only through a copy engine ([`DeviceMemory`]), as a NIC reaches
//! GPU memory by peer-to-peer DMA. Its `addr` is the virtual address the
//! registering process uses in WQEs.

use bitflags::bitflags;
use marrow_mlx5::raw::{MLX5_MKEY_INDEX_SHIFT, MLX5_MKEY_VARIANT_MASK};
use marrow_mmio::Region;
use std::sync::Arc;

bitflags! {
    /// Access rights of a memory region (`IBV_ACCESS_*`). Local read is always allowed.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct Access: u32 {
        /// The HCA may write it for local operations (READ responses, atomic results, receives).
        const LOCAL_WRITE = 1 << 0;
        /// Peers may RDMA_WRITE into it.
        const REMOTE_WRITE = 1 << 1;
        /// Peers may RDMA_READ from it.
        const REMOTE_READ = 1 << 2;
        /// Peers may perform atomics on it.
        const REMOTE_ATOMIC = 1 << 3;
    }
}

/// Memory the model cannot address directly and reaches with copies: a
/// GPU's memory behind its copy engine. Implementations live where the
/// device API is (`marrow-transport`); tests use a fake.
pub trait DeviceMemory: Send + Sync + std::fmt::Debug {
    /// Bytes.
    fn len(&self) -> usize;
    /// True when empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Copy `out.len()` bytes at `off` out of the device.
    fn read(&self, off: usize, out: &mut [u8]) -> Result<(), String>;
    /// Copy `data` into the device at `off`.
    fn write(&self, off: usize, data: &[u8]) -> Result<(), String>;
}

/// What a memory region is backed by.
#[derive(Clone, Debug)]
pub enum Backing {
    /// Shared host memory.
    Host(Region),
    /// Device memory, reached through copies.
    Device(Arc<dyn DeviceMemory>),
}

/// A translated address: the memory and the offset in it.
#[derive(Clone, Debug)]
pub enum Loc {
    /// In shared host memory.
    Host(Region, usize),
    /// In device memory.
    Device(Arc<dyn DeviceMemory>, usize),
}

impl Loc {
    /// Copy `out.len()` bytes from here (+`at`).
    pub fn read(&self, at: usize, out: &mut [u8]) -> Result<(), String> {
        match self {
            Loc::Host(r, off) => r.read_bytes(off + at, out).map_err(|e| e.to_string()),
            Loc::Device(d, off) => d.read(off + at, out),
        }
    }

    /// Copy `data` to here (+`at`).
    pub fn write(&self, at: usize, data: &[u8]) -> Result<(), String> {
        match self {
            Loc::Host(r, off) => r.write_bytes(off + at, data).map_err(|e| e.to_string()),
            Loc::Device(d, off) => d.write(off + at, data),
        }
    }
}

/// A protection domain handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pd(pub u32);

/// A registered memory region.
#[derive(Clone, Debug)]
pub struct Mr {
    /// Owning protection domain.
    pub pd: Pd,
    /// Virtual address of the first byte, as used in WQEs.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Local key.
    pub lkey: u32,
    /// Remote key.
    pub rkey: u32,
    /// Rights.
    pub access: Access,
    /// The memory.
    pub backing: Backing,
}

/// Why a translation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyFault {
    /// No region with that key.
    NoSuchKey,
    /// The key belongs to another protection domain.
    WrongPd,
    /// The range is not inside the region.
    OutOfBounds,
    /// The region lacks the right.
    NoAccess,
}

/// Every memory region of a device model, indexed by the key's upper 24
/// bits (as an mkey index), so a translation is one bounds-checked load.
#[derive(Debug)]
pub struct MrTable {
    slots: Vec<Option<Mr>>,
    /// Where the keys' variant bytes come from (seeded from the OS).
    variants: fastrand::Rng,
}

impl Default for MrTable {
    fn default() -> Self {
        MrTable { slots: Vec::new(), variants: fastrand::Rng::new() }
    }
}

/// The variant bit that tells an MR's rkey from its lkey (the top bit of
/// the variant byte).
const RKEY_FLIP: u32 = (MLX5_MKEY_VARIANT_MASK + 1) >> 1;

/// The MR table index an mkey names.
fn mkey_index(key: u32) -> usize {
    (key >> MLX5_MKEY_INDEX_SHIFT) as usize
}

impl MrTable {
    /// Register host memory `region` at `addr` with `access`; returns (lkey, rkey).
    pub fn register(&mut self, pd: Pd, addr: u64, region: Region, access: Access) -> (u32, u32) {
        let len = region.len() as u64;
        self.register_backing(pd, addr, len, Backing::Host(region), access)
    }

    /// Register `len` bytes of any backing at `addr`; returns (lkey, rkey).
    pub fn register_backing(&mut self, pd: Pd, addr: u64, len: u64, backing: Backing, access: Access) -> (u32, u32) {
        // Keys look like mlx5 mkeys: an index in the upper 24 bits and a
        // variant byte (PRM "mkey_7_0"), drawn at random here, so one key
        // says nothing of the next, and a stale or made-up key aliases a
        // live one once in 256 guesses at best. A freed index is reused.
        if self.slots.is_empty() {
            self.slots.push(None); // index 0 is never a key
        }
        let index = self.slots.iter().skip(1).position(Option::is_none).map_or(self.slots.len(), |i| i + 1);
        let variant = self.variants.u32(..=MLX5_MKEY_VARIANT_MASK) & !RKEY_FLIP;
        let mut lkey = ((index as u32) << MLX5_MKEY_INDEX_SHIFT) | variant;
        // Index 1 with variant 0 is MLX5_INVALID_LKEY (mlx5dv.h), the key
        // that ends a receive WQE's scatter list: a buffer with that key
        // would read as an empty list (every SEND into it an invalid
        // request). A ConnectX never hands it out; neither does this.
        if lkey == marrow_mlx5::raw::MLX5_INVALID_LKEY {
            lkey ^= 1;
        }
        let rkey = lkey ^ RKEY_FLIP;
        let mr = Some(Mr { pd, addr, len, lkey, rkey, access, backing });
        if index == self.slots.len() {
            self.slots.push(mr);
        } else {
            self.slots[index] = mr;
        }
        (lkey, rkey)
    }

    /// Registrations that exist now.
    pub fn len(&self) -> usize {
        self.slots.iter().flatten().count()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Remove a registration.
    pub fn deregister(&mut self, lkey: u32) -> Option<Mr> {
        let slot = self.slots.get_mut(mkey_index(lkey))?;
        if slot.as_ref().is_some_and(|m| m.lkey == lkey) { slot.take() } else { None }
    }

    /// Look up by lkey.
    pub fn get(&self, lkey: u32) -> Option<&Mr> {
        self.slots.get(mkey_index(lkey))?.as_ref().filter(|m| m.lkey == lkey)
    }

    fn by_rkey(&self, rkey: u32) -> Option<&Mr> {
        self.slots.get(mkey_index(rkey))?.as_ref().filter(|m| m.rkey == rkey)
    }

    fn check(mr: &Mr, pd: Pd, addr: u64, len: u64, need: Access) -> Result<Loc, KeyFault> {
        if mr.pd != pd {
            return Err(KeyFault::WrongPd);
        }
        let off = addr.checked_sub(mr.addr).ok_or(KeyFault::OutOfBounds)?;
        if off.checked_add(len).is_none_or(|end| end > mr.len) {
            return Err(KeyFault::OutOfBounds);
        }
        if !mr.access.contains(need) {
            return Err(KeyFault::NoAccess);
        }
        Ok(match &mr.backing {
            Backing::Host(r) => Loc::Host(*r, off as usize),
            Backing::Device(d) => Loc::Device(d.clone(), off as usize),
        })
    }

    /// Translate a local access (`lkey`): the window and offset of `addr`.
    pub fn local(&self, pd: Pd, lkey: u32, addr: u64, len: u64, need: Access) -> Result<Loc, KeyFault> {
        Self::check(self.get(lkey).ok_or(KeyFault::NoSuchKey)?, pd, addr, len, need)
    }

    /// Translate a remote access (`rkey`).
    pub fn remote(&self, pd: Pd, rkey: u32, addr: u64, len: u64, need: Access) -> Result<Loc, KeyFault> {
        Self::check(self.by_rkey(rkey).ok_or(KeyFault::NoSuchKey)?, pd, addr, len, need)
    }
}

/// A resolved local buffer.
#[derive(Debug)]
pub enum Piece<'a> {
    /// Registered host memory: window, offset, length.
    Mem(Region, usize, usize),
    /// Registered device memory: where, length.
    Dev(Loc, usize),
    /// Inline bytes from the WQE.
    Inline(&'a [u8]),
}

impl Piece<'_> {
    /// Bytes.
    pub fn len(&self) -> usize {
        match self {
            Piece::Mem(_, _, l) | Piece::Dev(_, l) => *l,
            Piece::Inline(d) => d.len(),
        }
    }

    /// Copy `out.len()` bytes starting `at` bytes into this piece.
    pub fn read(&self, at: usize, out: &mut [u8]) -> Result<(), String> {
        match self {
            Piece::Mem(r, o, _) => r.read_bytes(o + at, out).map_err(|e| e.to_string()),
            Piece::Dev(loc, _) => loc.read(at, out),
            Piece::Inline(d) => {
                let src = d.get(at..at + out.len()).ok_or("read past the inline data")?;
                out.copy_from_slice(src);
                Ok(())
            }
        }
    }

    /// Copy `data` into this piece, `at` bytes in.
    pub fn write(&self, at: usize, data: &[u8]) -> Result<(), String> {
        match self {
            Piece::Mem(r, o, _) => r.write_bytes(o + at, data).map_err(|e| e.to_string()),
            Piece::Dev(loc, _) => loc.write(at, data),
            Piece::Inline(_) => Err("inline data is not writable".into()),
        }
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_key_is_mlx5_invalid_lkey() {
        // Index 1 is the first a table hands out, and its variant byte is
        // drawn at random: without the guard, 0x100 came up once in 128
        // registrations (one CI failure: a SEND into that buffer NAKed as
        // an invalid request). 10,000 draws would meet it with certainty.
        let shm = crate::shm::Shm::create("mr-keys", 4096).unwrap();
        let mut t = MrTable::default();
        for _ in 0..10_000 {
            let (lkey, rkey) = t.register(Pd(1), 0x1000, shm.region(), Access::all());
            assert_eq!(mkey_index(lkey), 1);
            assert_ne!(lkey, marrow_mlx5::raw::MLX5_INVALID_LKEY);
            assert_ne!(rkey, marrow_mlx5::raw::MLX5_INVALID_LKEY);
            assert!(t.get(lkey).is_some() && t.deregister(lkey).is_some());
        }
    }
}
