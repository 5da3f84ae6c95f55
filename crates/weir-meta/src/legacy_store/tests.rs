//! The reader over legacy directories written here byte for byte as the
//! old writer left them: snapshots, torn tails, corruption.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use uuid::Uuid;

use super::*;
use crate::command::Command;
use crate::log_file::{encode_header, encode_record, MAX_PAYLOAD_LEN};
use crate::model::BrokerInfo;

fn broker(id: i32) -> Command {
    Command::RegisterBroker(BrokerInfo {
        id,
        host: format!("host{id}"),
        port: 9092,
        rack: Some(format!("rack{}", id % 2)),
        incarnation: Uuid::from_u128(1),
        previous_incarnation: None,
        listeners: Vec::new(),
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

/// A mix of every command kind the old writer logged.
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

fn image_of(cmds: &[Command]) -> MetadataImage {
    let mut image = MetadataImage::default();
    for cmd in cmds {
        image.apply(cmd).unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    }
    image
}

/// A log whose first record holds command `base + 1`, and the byte
/// position where each record starts.
fn log_bytes(base: u64, cmds: &[Command]) -> (Vec<u8>, Vec<usize>) {
    let mut bytes = encode_header(base).to_vec();
    let mut starts = Vec::new();
    for cmd in cmds {
        starts.push(bytes.len());
        bytes.extend(encode_record(&serde_json::to_vec(cmd).unwrap()));
    }
    (bytes, starts)
}

/// A snapshot file: the image's JSON and the crc32c of those exact bytes.
fn snapshot_bytes(image: &MetadataImage) -> Vec<u8> {
    let json = serde_json::to_string(image).unwrap();
    let crc = crc32c::crc32c(json.as_bytes());
    format!(r#"{{"format":{SNAPSHOT_FORMAT},"crc32c":{crc},"image":{json}}}"#).into_bytes()
}

fn write_log(dir: &Path, base: u64, cmds: &[Command]) {
    fs::write(dir.join(LOG_FILE_NAME), log_bytes(base, cmds).0).unwrap();
}

fn write_snapshot(dir: &Path, image: &MetadataImage) {
    fs::write(dir.join(SNAPSHOT_FILE_NAME), snapshot_bytes(image)).unwrap();
}

/// The directory as the writer left it after a snapshot of the first
/// `at` commands, followed by the rest.
fn snapshot_then_log(cmds: &[Command], at: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_snapshot(dir.path(), &image_of(&cmds[..at]));
    write_log(dir.path(), at as u64, &cmds[at..]);
    dir
}

/// A log of three commands, the byte position where each record starts,
/// and the commands.
fn three_record_log() -> (Vec<u8>, Vec<usize>, Vec<Command>) {
    let cmds = vec![broker(1), broker(2), create("orders", 1, 2)];
    let (bytes, starts) = log_bytes(0, &cmds);
    (bytes, starts, cmds)
}

/// Reads a directory holding only a log of these bytes.
fn read_log(bytes: &[u8]) -> (tempfile::TempDir, Result<Option<MetadataImage>, MetaError>) {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join(LOG_FILE_NAME), bytes).unwrap();
    let got = read(dir.path());
    (dir, got)
}

fn corrupt_reason(got: Result<Option<MetadataImage>, MetaError>, file: &Path) -> String {
    match got {
        Err(MetaError::Corrupt { path, reason }) => {
            assert_eq!(path, file, "{reason}");
            reason
        }
        other => panic!("want Corrupt on {}, got {other:?}", file.display()),
    }
}

#[test]
fn a_directory_without_the_files_holds_no_store() {
    let dir = tempfile::tempdir().unwrap();
    assert!(read(dir.path()).unwrap().is_none());
    assert!(read(&dir.path().join("absent")).unwrap().is_none());
    fs::write(dir.path().join("metadata.log.tmp"), b"WEIR").unwrap();
    assert!(read(dir.path()).unwrap().is_none());
}

#[test]
fn a_log_replays_to_the_image_of_its_commands() {
    let dir = tempfile::tempdir().unwrap();
    let cmds = commands();
    write_log(dir.path(), 0, &cmds);
    let image = read(dir.path()).unwrap().unwrap();
    assert_eq!(image, image_of(&cmds));
    assert_eq!(image.applied_index(), cmds.len() as u64);
    // Producer ids handed out are never handed out again after the import.
    assert_eq!(image.next_producer_id(), 1000);

    // A store opened but never written to.
    write_log(dir.path(), 0, &[]);
    assert_eq!(read(dir.path()).unwrap(), Some(MetadataImage::default()));
}

#[test]
fn a_snapshot_and_the_log_after_it() {
    let cmds = commands();
    let dir = snapshot_then_log(&cmds, 6);
    let image = read(dir.path()).unwrap().unwrap();
    assert_eq!(image, image_of(&cmds));
    assert_eq!(image.applied_index(), cmds.len() as u64);

    // Just after a snapshot the log holds only its header.
    let dir = snapshot_then_log(&cmds, cmds.len());
    assert_eq!(
        fs::metadata(dir.path().join(LOG_FILE_NAME)).unwrap().len(),
        24
    );
    assert_eq!(read(dir.path()).unwrap().unwrap(), image_of(&cmds));
}

#[test]
fn a_snapshot_without_a_log_is_read_alone() {
    let dir = tempfile::tempdir().unwrap();
    let cmds = commands();
    write_snapshot(dir.path(), &image_of(&cmds[..4]));
    assert_eq!(read(dir.path()).unwrap().unwrap(), image_of(&cmds[..4]));
}

/// A crash after the snapshot was renamed into place but before a fresh
/// log replaced the old one leaves the old log, based before the
/// snapshot: the records the snapshot holds must not be applied twice.
#[test]
fn records_the_snapshot_holds_are_not_applied_twice() {
    let dir = tempfile::tempdir().unwrap();
    let cmds = commands();
    write_snapshot(dir.path(), &image_of(&cmds[..5]));
    write_log(dir.path(), 0, &cmds[..5]);
    assert_eq!(read(dir.path()).unwrap().unwrap(), image_of(&cmds[..5]));

    // The writer went on appending to the old log.
    write_log(dir.path(), 0, &cmds);
    assert_eq!(read(dir.path()).unwrap().unwrap(), image_of(&cmds));
}

#[test]
fn a_log_that_starts_after_the_snapshot_is_corrupt() {
    let cmds = commands();
    let dir = snapshot_then_log(&cmds, 4);
    let log = dir.path().join(LOG_FILE_NAME);
    fs::remove_file(dir.path().join(SNAPSHOT_FILE_NAME)).unwrap();
    let reason = corrupt_reason(read(dir.path()), &log);
    assert!(reason.contains("commands 1..=4 are missing"), "{reason}");

    write_snapshot(dir.path(), &image_of(&cmds[..2]));
    let reason = corrupt_reason(read(dir.path()), &log);
    assert!(reason.contains("commands 3..=4 are missing"), "{reason}");
}

#[test]
fn a_log_that_ends_before_the_snapshot_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let cmds = commands();
    write_snapshot(dir.path(), &image_of(&cmds[..6]));
    write_log(dir.path(), 0, &cmds[..4]);
    let reason = corrupt_reason(read(dir.path()), &dir.path().join(LOG_FILE_NAME));
    assert!(
        reason.contains("the log ends at command 4 but the snapshot holds 6 commands"),
        "{reason}"
    );
}

#[test]
fn a_command_rejected_on_replay_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    // The topic is created twice.
    let cmds = [
        broker(1),
        broker(2),
        create("orders", 1, 1),
        create("orders", 2, 1),
    ];
    let (bytes, starts) = log_bytes(1, &cmds[1..]);
    write_snapshot(dir.path(), &image_of(&cmds[..1]));
    fs::write(dir.path().join(LOG_FILE_NAME), bytes).unwrap();
    let reason = corrupt_reason(read(dir.path()), &dir.path().join(LOG_FILE_NAME));
    assert!(
        reason.contains(&format!(
            "record 3 at byte {} (command 4) is rejected on replay: Topic 'orders' already exists.",
            starts[2]
        )),
        "{reason}"
    );
}

#[test]
fn a_torn_last_record_is_ignored() {
    let (bytes, starts, cmds) = three_record_log();
    let last = starts[2];
    let expected = image_of(&cmds[..2]);
    // Every cut inside the last record, header included.
    for cut in last + 1..bytes.len() {
        let (dir, got) = read_log(&bytes[..cut]);
        let image = got.unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        assert_eq!(image, Some(expected.clone()), "cut at {cut}");
        // The reader changes nothing.
        assert_eq!(
            fs::read(dir.path().join(LOG_FILE_NAME)).unwrap(),
            &bytes[..cut],
            "cut at {cut}"
        );
    }
    // Cutting exactly between records loses nothing that was written.
    let (_dir, got) = read_log(&bytes[..last]);
    assert_eq!(got.unwrap(), Some(expected));
}

#[test]
fn zero_filled_tails_are_torn_writes() {
    let (bytes, starts, cmds) = three_record_log();
    let last = starts[2];
    let expected = Some(image_of(&cmds[..2]));

    // The file grew but the last record's bytes never arrived.
    let mut zeroed = bytes.clone();
    zeroed[last..].fill(0);
    let (_dir, got) = read_log(&zeroed);
    assert_eq!(got.unwrap(), expected);

    // Only the end of the last record's payload is missing.
    let mut tail = bytes.clone();
    let len = tail.len();
    tail[len - 5..].fill(0);
    let (dir, got) = read_log(&tail);
    assert_eq!(got.unwrap(), expected);
    assert_eq!(fs::read(dir.path().join(LOG_FILE_NAME)).unwrap(), tail);

    // Zeros after the last complete record.
    let mut padded = bytes.clone();
    padded.extend_from_slice(&[0; 100]);
    let (dir, got) = read_log(&padded);
    assert_eq!(got.unwrap(), Some(image_of(&cmds)));
    assert_eq!(fs::read(dir.path().join(LOG_FILE_NAME)).unwrap(), padded);
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
        let (dir, got) = read_log(&damaged);
        let log = dir.path().join(LOG_FILE_NAME);
        let reason = corrupt_reason(got, &log);
        assert!(
            reason.contains(&format!("at byte {record_start}")),
            "flip at {pos}: reason {reason:?} does not name byte {record_start}"
        );
        let shown = MetaError::Corrupt { path: log, reason }.to_string();
        assert!(shown.contains(LOG_FILE_NAME), "{shown}");
    }
}

#[test]
fn a_flipped_byte_in_the_last_payload_is_corrupt_not_torn() {
    let (bytes, starts, _) = three_record_log();
    for pos in starts[2] + 8..bytes.len() {
        let mut damaged = bytes.clone();
        damaged[pos] ^= 0x01;
        let (dir, got) = read_log(&damaged);
        let reason = corrupt_reason(got, &dir.path().join(LOG_FILE_NAME));
        assert!(
            reason.contains(&format!("record 3 at byte {}", starts[2])),
            "flip at {pos}: {reason}"
        );
    }
}

#[test]
fn an_invalid_record_length_is_corrupt() {
    let (good, starts, _) = three_record_log();
    for len in [0, MAX_PAYLOAD_LEN as u32 + 1] {
        let mut bytes = good.clone();
        bytes[starts[1]..starts[1] + 4].copy_from_slice(&len.to_be_bytes());
        let (dir, got) = read_log(&bytes);
        let reason = corrupt_reason(got, &dir.path().join(LOG_FILE_NAME));
        assert!(
            reason.contains(&format!(
                "record 2 at byte {} has an invalid length {len}",
                starts[1]
            )),
            "{reason}"
        );
    }
}

#[test]
fn a_damaged_header_is_corrupt() {
    let (bytes, _, _) = three_record_log();
    for pos in 0..24 {
        let mut damaged = bytes.clone();
        damaged[pos] ^= 0x10;
        let (dir, got) = read_log(&damaged);
        let reason = corrupt_reason(got, &dir.path().join(LOG_FILE_NAME));
        let want = if pos < 8 {
            "bad magic at byte 0"
        } else {
            "header checksum mismatch at byte 20"
        };
        assert!(reason.contains(want), "flip at header byte {pos}: {reason}");
    }
    let (dir, got) = read_log(&bytes[..10]);
    let reason = corrupt_reason(got, &dir.path().join(LOG_FILE_NAME));
    assert!(
        reason.contains("shorter than its 24-byte header"),
        "{reason}"
    );

    // A later version, its header intact.
    let mut newer = bytes.clone();
    newer[8..12].copy_from_slice(&2u32.to_be_bytes());
    let crc = crc32c::crc32c(&newer[..20]);
    newer[20..24].copy_from_slice(&crc.to_be_bytes());
    let (dir, got) = read_log(&newer);
    let reason = corrupt_reason(got, &dir.path().join(LOG_FILE_NAME));
    assert!(
        reason.contains("unsupported log format version 2 at byte 8"),
        "{reason}"
    );
}

#[test]
fn a_damaged_snapshot_is_corrupt() {
    let cmds = commands();
    let dir = snapshot_then_log(&cmds, cmds.len());
    let path = dir.path().join(SNAPSHOT_FILE_NAME);
    let good = fs::read(&path).unwrap();
    let text = String::from_utf8(good.clone()).unwrap();
    let image_at = text.find(r#""image":"#).unwrap() + r#""image":"#.len();

    // A digit inside the image changed, the JSON still valid.
    let at = text.find(r#""port":9092"#).unwrap() + r#""port":"#.len();
    let mut damaged = good.clone();
    damaged[at] = b'8';
    fs::write(&path, &damaged).unwrap();
    let reason = corrupt_reason(read(dir.path()), &path);
    assert!(
        reason.contains(&format!(
            "checksum mismatch over the image at bytes {image_at}..{}",
            good.len() - 1
        )),
        "{reason}"
    );

    // Truncated JSON.
    fs::write(&path, &good[..good.len() / 2]).unwrap();
    let reason = corrupt_reason(read(dir.path()), &path);
    assert!(reason.contains("unreadable JSON at line 1"), "{reason}");

    // Not text.
    let mut binary = good.clone();
    binary[at] = 0xff;
    fs::write(&path, &binary).unwrap();
    let reason = corrupt_reason(read(dir.path()), &path);
    assert!(
        reason.contains(&format!("invalid UTF-8 at byte {at}")),
        "{reason}"
    );

    // A later format, its checksum intact.
    let newer = text.replacen(r#""format":1"#, r#""format":2"#, 1);
    fs::write(&path, newer).unwrap();
    let reason = corrupt_reason(read(dir.path()), &path);
    assert!(
        reason.contains("unsupported snapshot format 2 (this build reads 1)"),
        "{reason}"
    );

    // The checksum matches but the image is not one.
    let crc = crc32c::crc32c(b"[]");
    let not_an_image = format!(r#"{{"format":1,"crc32c":{crc},"image":[]}}"#);
    fs::write(&path, &not_an_image).unwrap();
    let reason = corrupt_reason(read(dir.path()), &path);
    assert!(
        reason.contains(&format!(
            "the image at byte {} does not decode",
            not_an_image.find("[]").unwrap()
        )),
        "{reason}"
    );

    // Restored, it reads again.
    fs::write(&path, &good).unwrap();
    assert_eq!(read(dir.path()).unwrap().unwrap(), image_of(&cmds));
}

#[test]
fn leftover_temporary_files_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let cmds = commands();
    write_log(dir.path(), 0, &cmds[..3]);
    fs::write(dir.path().join("metadata.snapshot.tmp"), b"{half").unwrap();
    fs::write(dir.path().join("metadata.log.tmp"), b"WEIR").unwrap();
    assert_eq!(read(dir.path()).unwrap().unwrap(), image_of(&cmds[..3]));
    // Left as they are: the reader writes nothing.
    assert!(dir.path().join("metadata.snapshot.tmp").exists());
    assert!(dir.path().join("metadata.log.tmp").exists());
}
