//! Tiered storage (KIP-405): sealed segments copied to an object store and
//! read back from it once local retention removed them.
//!
//! [`store`] names and moves the objects, [`copier`] copies a segment,
//! [`reader`] serves fetches from copies, [`aux_state`] gives a replica
//! restarting from the remote tier what it needs of a copy. The remote
//! segments' metadata is replicated state of the metadata quorum
//! (`weir_meta::remote_log`); the broker's tiering task (`broker::tiering`)
//! drives copies, remote retention and cleanup from it.

pub mod aux_state;
pub mod copier;
pub mod reader;
pub mod store;

pub use reader::{RemoteFetch, RemoteReader, RemoteRecords};
pub use store::{Part, RemoteError, RemoteStore, SegmentName};
