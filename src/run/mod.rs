//! The effects that carry out a plan: git checkouts and ranges, the result store, and the loop
//! that locks a slot, checks out, probes, retries infrastructure errors and saves.
pub mod apply;
pub mod artifacts;
pub mod bisect;
pub mod buildset;
pub mod distributed;
pub mod driver;
pub mod events;
pub mod git;
pub mod jobs;
pub mod matrix;
pub mod probers;
pub mod rebuild;
pub mod slots;
pub mod stamp;
pub mod store;
pub mod validate;
pub mod workdir;
