//! The store on disk: reopen gives the same image, snapshots, torn tails,
//! corruption.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use uuid::Uuid;
use weir_meta::{
    Applied, BrokerInfo, Command, MetaError, MetaStore, MetadataImage, StoreOptions, LOG_FILE_NAME,
    SNAPSHOT_FILE_NAME,
};

fn broker(id: i32) -> Command {
    Command::RegisterBroker(BrokerInfo {
        id,
        host: format!("host{id}"),
        port: 9092,
        rack: Some(format!("rack{}", id % 2)),
        incarnation: uuid::Uuid::from_u128(1),
    })
}

fn create(name: &str, id: u128, partitions: i32) -> Command {
    Command::CreateTopic {
        name: name.to_owned(),
        id: Uuid::from_u128(id),
        partitions,
        replicas: (0..partitions)
            .map(|p| vec![1 + p % 2, 2 - p % 2])
            .collect(),
        configs: BTreeMap::from([("retention.ms".to_owned(), format!("{}", 1000 * id))]),
        internal: name.starts_with("__"),
    }
}

/// A mix of every command kind.
fn commands() -> Vec<Command> {
    vec![
        broker(1),
        broker(2),
        create("orders", 1, 3),
        create("__consumer_offsets", 2, 2),
        Command::AllocateProducerIds { count: 1000 },
        Command::CreatePartitions {
            name: "orders".into(),
            new_replicas: vec![vec![2, 1]],
        },
        Command::AlterTopicConfigs {
            name: "orders".into(),
            set: BTreeMap::from([("cleanup.policy".to_owned(), "compact".to_owned())]),
            delete: vec!["retention.ms".into()],
        },
        create("gone", 3, 1),
        Command::DeleteTopic {
            name: "gone".into(),
        },
        broker(1),
    ]
}

fn submit_all(store: &mut MetaStore, cmds: &[Command]) {
    for cmd in cmds {
        store
            .submit(cmd.clone())
            .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    }
}

fn image_of(cmds: &[Command]) -> MetadataImage {
    let mut image = MetadataImage::default();
    for cmd in cmds {
        image.apply(cmd).unwrap();
    }
    image
}

fn log_len(dir: &Path) -> u64 {
    fs::metadata(dir.join(LOG_FILE_NAME)).unwrap().len()
}

fn no_auto_snapshot() -> StoreOptions {
    StoreOptions { snapshot_every: 0 }
}

#[test]
fn reopen_gives_the_same_image() {
    let dir = tempfile::tempdir().unwrap();
    let cmds = commands();
    let mut store = MetaStore::open(dir.path()).unwrap();
    submit_all(&mut store, &cmds);
    assert_eq!(*store.image(), image_of(&cmds));
    let before = store.image().clone();
    drop(store);

    let store = MetaStore::open(dir.path()).unwrap();
    assert_eq!(*store.image(), before);
    assert_eq!(store.image().applied_index(), cmds.len() as u64);
    assert_eq!(store.image().next_producer_id(), 1000);
    assert_eq!(store.snapshot_index(), 0);
}

#[test]
fn submit_returns_what_apply_returns() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = MetaStore::open(dir.path()).unwrap();
    assert_eq!(store.submit(broker(1)).unwrap(), Applied::Done);
    assert_eq!(
        store
            .submit(Command::AllocateProducerIds { count: 10 })
            .unwrap(),
        Applied::ProducerIds {
            first: 0,
            count: 10
        }
    );
    assert_eq!(
        store
            .submit(Command::AllocateProducerIds { count: 10 })
            .unwrap(),
        Applied::ProducerIds {
            first: 10,
            count: 10
        }
    );
    drop(store);
    // Producer ids handed out are never handed out again after a restart.
    let mut store = MetaStore::open(dir.path()).unwrap();
    assert_eq!(
        store
            .submit(Command::AllocateProducerIds { count: 1 })
            .unwrap(),
        Applied::ProducerIds {
            first: 20,
            count: 1
        }
    );
}

#[test]
fn failed_validation_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = MetaStore::open(dir.path()).unwrap();
    submit_all(&mut store, &commands()[..3]);
    let len = log_len(dir.path());
    let image = store.image().clone();
    let rejected = [
        create("orders", 9, 1),
        create("x", 9, 0),
        Command::DeleteTopic {
            name: "nope".into(),
        },
        Command::AllocateProducerIds { count: 0 },
    ];
    for cmd in rejected {
        assert!(store.submit(cmd.clone()).is_err(), "{cmd:?} accepted");
        assert_eq!(log_len(dir.path()), len, "{cmd:?} wrote to the log");
        assert_eq!(*store.image(), image);
    }
    drop(store);
    assert_eq!(*MetaStore::open(dir.path()).unwrap().image(), image);
}

#[test]
fn reopen_after_a_snapshot_and_more_commands() {
    let dir = tempfile::tempdir().unwrap();
    let cmds = commands();
    let (first, rest) = cmds.split_at(6);
    let mut store = MetaStore::open_with(dir.path(), no_auto_snapshot()).unwrap();
    submit_all(&mut store, first);
    store.snapshot().unwrap();
    assert_eq!(store.snapshot_index(), 6);
    assert_eq!(store.log_base(), 6);
    assert!(dir.path().join(SNAPSHOT_FILE_NAME).exists());
    // The fresh log holds only its header.
    assert_eq!(log_len(dir.path()), 24);
    submit_all(&mut store, rest);
    let before = store.image().clone();
    drop(store);

    let store = MetaStore::open(dir.path()).unwrap();
    assert_eq!(*store.image(), before);
    assert_eq!(*store.image(), image_of(&cmds));
    assert_eq!(store.snapshot_index(), 6);
    assert_eq!(store.log_base(), 6);
}

#[test]
fn snapshots_are_taken_automatically() {
    let dir = tempfile::tempdir().unwrap();
    let cmds = commands();
    let mut store = MetaStore::open_with(dir.path(), StoreOptions { snapshot_every: 3 }).unwrap();
    submit_all(&mut store, &cmds);
    assert_eq!(store.snapshot_index(), 9);
    assert_eq!(store.log_base(), 9);
    let before = store.image().clone();
    drop(store);
    let store = MetaStore::open(dir.path()).unwrap();
    assert_eq!(*store.image(), before);
    assert_eq!(store.image().applied_index(), 10);
}

/// A crash after the snapshot was renamed into place but before the fresh
/// log replaced the old one: the old log's records up to the snapshot must
/// not be applied twice.
#[test]
fn crash_between_snapshot_and_log_reset() {
    let dir = tempfile::tempdir().unwrap();
    let cmds = commands();
    let mut store = MetaStore::open_with(dir.path(), no_auto_snapshot()).unwrap();
    submit_all(&mut store, &cmds[..5]);
    let old_log = fs::read(dir.path().join(LOG_FILE_NAME)).unwrap();
    store.snapshot().unwrap();
    drop(store);
    fs::write(dir.path().join(LOG_FILE_NAME), &old_log).unwrap();

    let mut store = MetaStore::open_with(dir.path(), no_auto_snapshot()).unwrap();
    assert_eq!(*store.image(), image_of(&cmds[..5]));
    assert_eq!((store.snapshot_index(), store.log_base()), (5, 0));
    // Appending to the old log still works, and survives a reopen.
    submit_all(&mut store, &cmds[5..]);
    drop(store);
    let store = MetaStore::open(dir.path()).unwrap();
    assert_eq!(*store.image(), image_of(&cmds));
}

#[test]
fn a_log_that_starts_after_the_snapshot_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = MetaStore::open_with(dir.path(), no_auto_snapshot()).unwrap();
    submit_all(&mut store, &commands()[..4]);
    store.snapshot().unwrap();
    drop(store);
    fs::remove_file(dir.path().join(SNAPSHOT_FILE_NAME)).unwrap();
    match MetaStore::open(dir.path()) {
        Err(MetaError::Corrupt { path, reason }) => {
            assert_eq!(path, dir.path().join(LOG_FILE_NAME));
            assert!(reason.contains("missing"), "{reason}");
        }
        other => panic!("want Corrupt, got {other:?}"),
    }
}

/// Writes three commands and returns the log bytes and the byte position
/// where each record starts.
fn three_record_log() -> (Vec<u8>, Vec<usize>, Vec<Command>) {
    let dir = tempfile::tempdir().unwrap();
    let cmds = vec![broker(1), broker(2), create("orders", 1, 2)];
    let mut store = MetaStore::open_with(dir.path(), no_auto_snapshot()).unwrap();
    let mut starts = Vec::new();
    for cmd in &cmds {
        starts.push(log_len(dir.path()) as usize);
        store.submit(cmd.clone()).unwrap();
    }
    drop(store);
    (
        fs::read(dir.path().join(LOG_FILE_NAME)).unwrap(),
        starts,
        cmds,
    )
}

fn open_bytes(bytes: &[u8]) -> (tempfile::TempDir, Result<MetaStore, MetaError>) {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join(LOG_FILE_NAME), bytes).unwrap();
    let store = MetaStore::open_with(dir.path(), no_auto_snapshot());
    (dir, store)
}

#[test]
fn a_torn_last_record_is_dropped() {
    let (bytes, starts, cmds) = three_record_log();
    let last = starts[2];
    let expected = image_of(&cmds[..2]);
    // Every cut inside the last record, header included.
    for cut in last + 1..bytes.len() {
        let (dir, store) = open_bytes(&bytes[..cut]);
        let mut store = store.unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        assert_eq!(*store.image(), expected, "cut at {cut}");
        assert_eq!(
            log_len(dir.path()),
            last as u64,
            "cut at {cut}: not truncated"
        );
        // The store goes on: the next record lands where the torn one was.
        store.submit(cmds[2].clone()).unwrap();
        drop(store);
        let store = MetaStore::open(dir.path()).unwrap();
        assert_eq!(
            *store.image(),
            image_of(&cmds),
            "cut at {cut}, after resubmitting"
        );
    }
    // Cutting exactly between records loses nothing that was written.
    let (_dir, store) = open_bytes(&bytes[..last]);
    assert_eq!(*store.unwrap().image(), expected);
}

#[test]
fn zero_filled_tails_are_torn_writes() {
    let (bytes, starts, cmds) = three_record_log();
    let last = starts[2];
    let expected = image_of(&cmds[..2]);

    // The file grew but the last record's bytes never arrived.
    let mut zeroed = bytes.clone();
    zeroed[last..].fill(0);
    let (_dir, store) = open_bytes(&zeroed);
    assert_eq!(*store.unwrap().image(), expected);

    // Only the end of the last record's payload is missing.
    let mut tail = bytes.clone();
    let len = tail.len();
    tail[len - 5..].fill(0);
    let (dir, store) = open_bytes(&tail);
    assert_eq!(*store.unwrap().image(), expected);
    assert_eq!(log_len(dir.path()), last as u64);

    // Zeros after the last complete record.
    let mut padded = bytes.clone();
    padded.extend_from_slice(&[0; 100]);
    let (dir, store) = open_bytes(&padded);
    assert_eq!(*store.unwrap().image(), image_of(&cmds));
    assert_eq!(log_len(dir.path()), bytes.len() as u64);
}

#[test]
fn a_flipped_byte_in_an_earlier_record_is_corrupt() {
    let (bytes, starts, _) = three_record_log();
    // Every byte of the first two records: length, checksum and payload.
    for pos in starts[0]..starts[2] {
        let record_start = if pos < starts[1] {
            starts[0]
        } else {
            starts[1]
        };
        let mut damaged = bytes.clone();
        damaged[pos] ^= 0x5a;
        let (dir, store) = open_bytes(&damaged);
        match store {
            Err(MetaError::Corrupt { path, reason }) => {
                assert_eq!(path, dir.path().join(LOG_FILE_NAME), "flip at {pos}");
                assert!(
                    reason.contains(&format!("at byte {record_start}")),
                    "flip at {pos}: reason {reason:?} does not name byte {record_start}"
                );
                let shown = MetaError::Corrupt { path, reason }.to_string();
                assert!(shown.contains(LOG_FILE_NAME), "{shown}");
            }
            Err(other) => panic!("flip at {pos}: want Corrupt, got {other}"),
            Ok(store) => panic!(
                "flip at {pos} accepted with {} commands",
                store.image().applied_index()
            ),
        }
        // Nothing was truncated.
        assert_eq!(fs::read(dir.path().join(LOG_FILE_NAME)).unwrap(), damaged);
    }
}

#[test]
fn a_flipped_byte_in_the_last_payload_is_corrupt_not_torn() {
    let (bytes, starts, _) = three_record_log();
    for pos in starts[2] + 8..bytes.len() {
        let mut damaged = bytes.clone();
        damaged[pos] ^= 0x01;
        let (_dir, store) = open_bytes(&damaged);
        match store {
            Err(MetaError::Corrupt { reason, .. }) => assert!(
                reason.contains(&format!("record 3 at byte {}", starts[2])),
                "{reason}"
            ),
            other => panic!("flip at {pos}: want Corrupt, got {:?}", other.map(|_| ())),
        }
    }
}

#[test]
fn a_damaged_header_is_corrupt() {
    let (bytes, _, _) = three_record_log();
    for pos in 0..24 {
        let mut damaged = bytes.clone();
        damaged[pos] ^= 0x10;
        let (_dir, store) = open_bytes(&damaged);
        assert!(
            matches!(store, Err(MetaError::Corrupt { .. })),
            "flip at header byte {pos}"
        );
    }
    let (_dir, store) = open_bytes(&bytes[..10]);
    assert!(matches!(store, Err(MetaError::Corrupt { .. })));
}

#[test]
fn a_damaged_snapshot_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = MetaStore::open_with(dir.path(), no_auto_snapshot()).unwrap();
    submit_all(&mut store, &commands());
    store.snapshot().unwrap();
    drop(store);
    let path = dir.path().join(SNAPSHOT_FILE_NAME);
    let good = fs::read(&path).unwrap();
    // Change a digit inside the image, keeping the JSON valid.
    let text = String::from_utf8(good.clone()).unwrap();
    let at = text.find("\"port\":9092").unwrap() + "\"port\":".len();
    let mut damaged = good.clone();
    damaged[at] = b'8';
    fs::write(&path, &damaged).unwrap();
    match MetaStore::open(dir.path()) {
        Err(MetaError::Corrupt { path: p, reason }) => {
            assert_eq!(p, path);
            assert!(reason.contains("checksum mismatch"), "{reason}");
        }
        other => panic!("want Corrupt, got {:?}", other.map(|_| ())),
    }
    // Truncated JSON.
    fs::write(&path, &good[..good.len() / 2]).unwrap();
    assert!(matches!(
        MetaStore::open(dir.path()),
        Err(MetaError::Corrupt { .. })
    ));
    // Restored, it opens again.
    fs::write(&path, &good).unwrap();
    assert_eq!(
        *MetaStore::open(dir.path()).unwrap().image(),
        image_of(&commands())
    );
}

#[test]
fn leftover_temporary_files_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = MetaStore::open(dir.path()).unwrap();
    submit_all(&mut store, &commands()[..3]);
    drop(store);
    fs::write(dir.path().join("metadata.snapshot.tmp"), b"{half").unwrap();
    fs::write(dir.path().join("metadata.log.tmp"), b"WEIR").unwrap();
    let store = MetaStore::open(dir.path()).unwrap();
    assert_eq!(*store.image(), image_of(&commands()[..3]));
    assert!(!dir.path().join("metadata.snapshot.tmp").exists());
    assert!(!dir.path().join("metadata.log.tmp").exists());
}

#[test]
fn the_store_can_be_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<MetaStore>();
    assert_send_sync::<MetadataImage>();
}
