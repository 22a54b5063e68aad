//! What each subcommand runs, where it is more than a call into the
//! library: reading its input, and turning its result into output and an
//! exit status.

pub(crate) mod bench;
pub(crate) mod decode;
pub(crate) mod demo;
pub(crate) mod trace;
