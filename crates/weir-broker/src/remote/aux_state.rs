//! What a replica restarting past its own log end takes from the remote
//! copy holding the offset before its leader's local log start: the copy's
//! leader epochs and the producer state at its end (Kafka's
//! `buildRemoteLogAuxState`, KIP-405).

use bytes::Bytes;
use weir_log::EpochEntry;

use crate::remote::store::{Part, RemoteError, RemoteStore, SegmentName};

/// A remote copy's leader epochs and producer-state snapshot.
pub struct AuxState {
    pub epochs: Vec<EpochEntry>,
    /// The snapshot as the copy holds it.
    pub producer_snapshot: Bytes,
}

/// Reads the leader-epoch checkpoint and the producer snapshot of the copy
/// `name`; a checkpoint that does not parse is a corrupt copy.
pub async fn read_aux_state(
    store: &RemoteStore,
    name: &SegmentName<'_>,
) -> Result<AuxState, RemoteError> {
    let epochs_object = store.object(name, Part::LeaderEpochs);
    let snapshot_object = store.object(name, Part::ProducerSnapshot);
    let (epochs, producer_snapshot) =
        futures::try_join!(store.get(&epochs_object), store.get(&snapshot_object))?;
    let epochs = std::str::from_utf8(&epochs)
        .map_err(|_| "not text")
        .and_then(weir_log::parse_checkpoint)
        .map_err(|reason| RemoteError::Corrupt {
            object: epochs_object.to_string(),
            reason: reason.to_owned(),
        })?;
    Ok(AuxState {
        epochs,
        producer_snapshot,
    })
}
