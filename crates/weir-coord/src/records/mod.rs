//! The records of the internal topics, in Kafka's own key and value
//! schemas, so that tools reading those topics understand them and a new
//! coordinator rebuilds its state by replaying them.

mod codec;
pub mod consumer_group;
pub mod offsets;
pub mod share_group;
pub mod share_state;
pub mod txn;

pub use codec::RecordError;
