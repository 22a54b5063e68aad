//! Downstream Port Containment: PCI Express Base 6.0 §7.9.14 (Linux
//! `PCI_EXP_DPC_*`). A downstream port with DPC enabled takes its link down
//! when it sees an uncorrectable error (or ERR_NONFATAL/ERR_FATAL from
//! below), so a GPU or NIC behind it disappears until software releases the
//! port: the status register and the source ID say what tripped it. Root
//! ports with RP Extensions also log the failed PIO request (§7.9.14.6 and
//! on), which is decoded when the capability says it is there.

use crate::cap_id::ExtCapId;
use crate::generated::pcie::{pci_dpc_cap, pci_dpc_rp_pio};
use crate::header::Config;
use crate::regs::CapError;

pub const PCI_EXP_DPC_CAP: usize = 0x04;
pub const PCI_EXP_DPC_CTL: usize = 0x06;
pub const PCI_EXP_DPC_STATUS: usize = 0x08;
pub const PCI_EXP_DPC_SOURCE_ID: usize = 0x0a;
pub const PCI_EXP_DPC_RP_PIO_STATUS: usize = 0x0c;
pub const PCI_EXP_DPC_RP_PIO_HEADER_LOG: usize = 0x20;
pub const PCI_EXP_DPC_RP_PIO_IMPSPEC_LOG: usize = 0x30;
pub const PCI_EXP_DPC_RP_PIO_TLPPREFIX_LOG: usize = 0x34;
pub const PCI_EXP_DPC_IRQ: u16 = 0x001f;
pub const PCI_EXP_DPC_CAP_RP_EXT: u16 = 0x0020;
pub const PCI_EXP_DPC_CAP_POISONED_TLP: u16 = 0x0040;
pub const PCI_EXP_DPC_CAP_SW_TRIGGER: u16 = 0x0080;
pub const PCI_EXP_DPC_RP_PIO_LOG_SIZE: u16 = 0x0f00;
pub const PCI_EXP_DPC_CAP_DL_ACTIVE: u16 = 0x1000;
pub const PCI_EXP_DPC_CTL_EN_FATAL: u16 = 0x0001;
pub const PCI_EXP_DPC_CTL_EN_NONFATAL: u16 = 0x0002;
pub const PCI_EXP_DPC_CTL_INT_EN: u16 = 0x0008;
pub const PCI_EXP_DPC_STATUS_TRIGGER: u16 = 0x0001;
pub const PCI_EXP_DPC_STATUS_TRIGGER_RSN: u16 = 0x0006;
pub const PCI_EXP_DPC_STATUS_INTERRUPT: u16 = 0x0008;
pub const PCI_EXP_DPC_RP_BUSY: u16 = 0x0010;
pub const PCI_EXP_DPC_STATUS_TRIGGER_RSN_EXT: u16 = 0x0060;
pub const PCI_EXP_DPC_RP_PIO_FEP: u16 = 0x1f00;
/// RP PIO Log Size bit 4 (Flit Mode), Linux 6.11+; not in Debian 12's header.
pub const PCI_EXP_DPC_RP_PIO_LOG_SIZE4: u16 = 0x2000;
/// PCI Express Capabilities register: Flit Mode Supported (PCIe 6.0 §7.5.3.2), Linux 6.11+ `PCI_EXP_FLAGS_FLIT`.
pub const PCI_EXP_FLAGS_FLIT: u16 = 0x8000;

/// The DPC registers every port has (§7.9.14.2 to §7.9.14.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dpc {
    pub offset: u16,
    /// DPC Interrupt Message Number.
    pub interrupt_message: u8,
    pub rp_extensions: bool,
    pub poisoned_tlp_blocking: bool,
    pub sw_trigger_supported: bool,
    /// RP PIO Log Size: dwords of header, ImpSpec and TLP prefix log. In
    /// Flit Mode capability bit 13 is its bit 4 (as Linux's `dpc.c` reads it).
    pub rp_pio_log_size: u8,
    /// The port supports Flit Mode (PCI Express Flags bit 15): the RP PIO
    /// log then has Flit Mode's larger header log, which is not decoded.
    pub flit_mode: bool,
    pub dl_active_err_cor_supported: bool,
    pub control_raw: u16,
    /// DPC Trigger Enable: 0 off, 1 on ERR_FATAL, 2 on ERR_NONFATAL or ERR_FATAL.
    pub trigger_enable: u8,
    pub status_raw: u16,
    pub triggered: bool,
    /// DPC Trigger Reason (§7.9.14.4): see [`Dpc::trigger_reason_text`].
    pub trigger_reason: u8,
    pub trigger_reason_ext: u8,
    pub rp_busy: bool,
    pub rp_pio_first_error: u8,
    /// Requester ID of the ERR_FATAL/ERR_NONFATAL that triggered DPC.
    pub source_id: u16,
    /// Root ports with RP Extensions: the RP PIO registers.
    pub rp_pio: Option<RpPio>,
}

/// RP PIO error logging (§7.9.14.6 to §7.9.14.13).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RpPio {
    pub status: u32,
    pub mask: u32,
    pub severity: u32,
    pub syserror: u32,
    pub exception: u32,
    /// The failed request's header, as AER's header log (big-endian TLP dwords read little endian).
    pub header_log: [u32; 4],
    /// Present when RP PIO Log Size is at least 5.
    pub impspec_log: Option<u32>,
    /// TLP prefix log: `prefix_dwords` of these are meaningful.
    pub tlp_prefix_log: [u32; 4],
    pub prefix_dwords: u8,
}

impl Dpc {
    /// Why DPC triggered, in the spec's words.
    pub fn trigger_reason_text(&self) -> &'static str {
        match (self.trigger_reason, self.trigger_reason_ext) {
            (0, _) => "unmasked uncorrectable error",
            (1, _) => "ERR_NONFATAL received",
            (2, _) => "ERR_FATAL received",
            (_, 0) => "RP PIO error",
            (_, 1) => "DPC software trigger",
            _ => "reserved reason extension",
        }
    }
}

impl Config<'_> {
    /// The DPC capability; an error when the dump ends inside it or an RP
    /// PIO Log Size is outside the 4..=9 dwords non-Flit Mode logs take.
    pub fn dpc(&self) -> Option<Result<Dpc, CapError>> {
        let cap = self.find_ext_cap(ExtCapId::DPC)?;
        Some(self.dpc_at(cap.offset))
    }

    fn dpc_at(&self, offset: u16) -> Result<Dpc, CapError> {
        let base = usize::from(offset);
        let v: pci_dpc_cap = self.view(offset, base)?;
        let flit_mode = self
            .express()
            .and_then(|e| self.read_u16(usize::from(e.offset) + crate::express::PCI_EXP_FLAGS))
            .is_some_and(|f| f & PCI_EXP_FLAGS_FLIT != 0);
        let mut d = Dpc {
            offset,
            interrupt_message: v.dpc_cap_irq(),
            rp_extensions: v.dpc_cap_rp_ext(),
            poisoned_tlp_blocking: v.dpc_cap_poison(),
            sw_trigger_supported: v.dpc_cap_sw_trigger(),
            rp_pio_log_size: v.dpc_cap_rp_pio_log_size()
                // In Flit mode the size's fifth bit sits apart, above the field's four.
                | if flit_mode {
                    u8::from(v.dpc_cap_rp_pio_log_size4()) << pci_dpc_cap::DPC_CAP_RP_PIO_LOG_SIZE_MASK.count_ones()
                } else {
                    0
                },
            flit_mode,
            dl_active_err_cor_supported: v.dpc_cap_dl_active(),
            control_raw: v.dpc_ctl(),
            trigger_enable: v.dpc_ctl_en(),
            status_raw: v.dpc_status(),
            triggered: v.dpc_status_trigger(),
            trigger_reason: v.dpc_status_trigger_rsn(),
            trigger_reason_ext: v.dpc_status_trigger_rsn_ext(),
            rp_busy: v.dpc_status_rp_busy(),
            rp_pio_first_error: v.dpc_status_rp_pio_fep(),
            source_id: v.dpc_source_id(),
            rp_pio: None,
        };
        if !d.rp_extensions || d.flit_mode {
            return Ok(d);
        }
        // §7.9.14.2: the header log alone is 4 dwords; 4 + ImpSpec + up to 4
        // prefix dwords is 9. Flit Mode logs are laid out otherwise.
        let size = d.rp_pio_log_size;
        if !(4..=9).contains(&size) {
            return Err(CapError::BadField { offset, field: "RP PIO Log Size", value: size.into() });
        }
        let r: pci_dpc_rp_pio = self.view(offset, base)?;
        let h = r.rp_pio_header_log();
        let dw = |i: usize| u32::from_le_bytes([h[4 * i], h[4 * i + 1], h[4 * i + 2], h[4 * i + 3]]);
        let prefix_dwords = size.saturating_sub(5);
        let mut tlp_prefix_log = [0u32; 4];
        for (i, p) in tlp_prefix_log.iter_mut().enumerate().take(usize::from(prefix_dwords)) {
            let at = base + PCI_EXP_DPC_RP_PIO_TLPPREFIX_LOG + 4 * i;
            *p = self.read_u32(at).ok_or(CapError::Truncated { offset, need: at + 4 - base, len: self.len() })?;
        }
        d.rp_pio = Some(RpPio {
            status: r.rp_pio_status(),
            mask: r.rp_pio_mask(),
            severity: r.rp_pio_severity(),
            syserror: r.rp_pio_syserror(),
            exception: r.rp_pio_exception(),
            header_log: [dw(0), dw(1), dw(2), dw(3)],
            impspec_log: (size >= 5).then(|| r.rp_pio_impspec_log()),
            tlp_prefix_log,
            prefix_dwords,
        });
        Ok(d)
    }
}
