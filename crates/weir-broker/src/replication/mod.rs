//! Replication: leaders track their followers (ISR, high watermark),
//! followers fetch from their leaders.

mod fetcher;
pub mod leader_state;

pub use fetcher::{Follow, ReplicaFetchers};
