//! Cluster mirroring (after KIP-1279, "Cluster Mirroring"): topics of a
//! source cluster copied to this one byte for byte and offset for offset,
//! over the Kafka protocol, so the source may be Weir or Apache Kafka.
//!
//! A mirror is replicated state of the metadata quorum
//! (`weir_meta::Mirror`); its topics carry the source's topic ids and are
//! read-only here. The broker's mirroring task (`broker::mirroring`) drives
//! it: the live broker with the lowest id creates the topics the source
//! has, and the leader of each mirror partition fetches from the source's
//! leader ([`source`]) and appends the batches at their own offsets
//! (`Partition::append_mirrored`); [`progress`] keeps how far each got.
//! A mirror taking back a topic that once fed its source finds where the
//! two logs part ([`failback`]).

pub mod failback;
pub mod progress;
pub mod source;

pub use progress::{MirrorProgress, PartitionProgress};
