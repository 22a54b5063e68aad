//! devx (step 2): filled in below.
