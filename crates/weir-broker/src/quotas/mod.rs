//! Quotas: client byte and request-time rates (KIP-13, KIP-124), the
//! replication throttle (KIP-73), and the sampled rates both measure with.

pub(crate) mod client;
pub mod rate;
pub mod replication;

pub use replication::ReplicationQuota;
