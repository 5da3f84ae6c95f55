//! `weir-coord`: the engines behind Weir's coordinators, free of I/O.
//!
//! Each engine is a state machine fed by events (a request, a timer, a
//! record replayed from its internal topic) that returns what to write and
//! what to answer; it never touches a socket, a file or a runtime, and this
//! crate does not depend on tokio, so the compiler keeps it that way. The
//! broker's coordinators host them: they load an engine's state by
//! replaying its records, append the records it emits, arm its timers and
//! answer once the in-sync replicas hold the write.
//!
//! - [`classic`]: classic groups (JoinGroup, SyncGroup, Heartbeat,
//!   LeaveGroup), Kafka's `ClassicGroup`.
//! - [`consumer`]: consumer groups (KIP-848): membership, server-side
//!   assignors, incremental reconciliation, and classic members of them.
//! - [`share`]: share groups (KIP-932): membership, the share-partition
//!   delivery state machine, share sessions.
//! - [`txn`]: a transactional id's state (Kafka's `TransactionMetadata`).
//! - [`records`]: the key and value schemas of `__consumer_offsets`,
//!   `__transaction_state` and `__share_group_state`, as Kafka writes them.

pub mod classic;
pub mod consumer;
pub mod records;
pub mod share;
pub mod txn;
