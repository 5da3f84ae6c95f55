//! Replication: leaders track their followers (ISR, high watermark),
//! followers fetch from their leaders.

mod fetcher;
pub mod leader_state;
pub mod quota;

#[cfg(test)]
pub(crate) use fetcher::{apply_fetch, divergence_point, Fetched};
pub use fetcher::{Follow, ReplicaFetchers};
pub use quota::ReplicationQuota;
