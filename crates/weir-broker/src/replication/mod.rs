//! Replication: leaders track their followers (ISR, high watermark),
//! followers fetch from their leaders, and leaders may send consumers to
//! a follower to read (KIP-392).

mod fetcher;
pub mod leader_state;
pub mod quota;
pub mod replica_selector;

#[cfg(test)]
pub(crate) use fetcher::{apply_fetch, divergence_point, Fetched};
pub use fetcher::{Follow, ReplicaFetchers};
pub use quota::ReplicationQuota;
pub use replica_selector::{ReplicaSelector, ReplicaView};
