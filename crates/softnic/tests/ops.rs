//! Every opcode through the softnic: posted by the CPU initiator into shared
//! memory, found by the engine thread through the doorbell, executed, and
//! completed with a CQE the poller decodes. Bytes are checked in the
//! registered buffers.

use marrow_mlx5::prelude::*;
use marrow_softnic::pair::{Pair, PairConfig, Side};
use std::time::Duration;

const T: Duration = Duration::from_secs(5);

/// One softnic: the responder is executed in the same model.
const WIRE: bool = false;

fn pair() -> Pair {
    Pair::new(PairConfig::default()).unwrap()
}

// The cases, shared with `wire_ops.rs`, which runs them across RoCEv2.
include!("ops/cases.rs");
