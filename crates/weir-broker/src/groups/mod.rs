//! Groups hosted on `__consumer_offsets`: classic groups (JoinGroup and
//! SyncGroup), consumer groups (KIP-848), share groups' membership
//! (KIP-932), their committed offsets, their configs and their lag.

pub mod classic;
pub mod configs;
pub mod consumer;
mod hosted;
pub mod lag;
pub mod offsets;
pub mod share;
