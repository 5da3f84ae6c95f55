//! The broker's metadata goes through the controller quorum: a data
//! directory written by the local metadata store of earlier versions is
//! imported into it, topic ids and all.

use std::collections::BTreeMap;
use std::path::Path;

use weir_broker::{Broker, BrokerConfig};

fn config(dir: &std::path::Path) -> BrokerConfig {
    BrokerConfig::new(
        1,
        dir.to_owned(),
        "127.0.0.1:9092".parse().unwrap(),
        None,
        "127.0.0.1:0".parse().unwrap(),
        &BTreeMap::new(),
    )
    .unwrap()
}

/// A `meta/` directory as the local store left it: a snapshot holding
/// broker 1 and topic "orders" (3 partitions on broker 1, retention.ms
/// 1000), then a log holding the allocation of 1000 producer ids.
const LEGACY_META: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/legacy_meta");
const LEGACY_TOPIC_ID: &str = "6f1c9a52-3b7e-4d0a-9c51-2e8f7d4b1a03";

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn a_data_directory_of_the_local_store_is_imported() {
    let dir = tempfile::tempdir().unwrap();
    let id: uuid::Uuid = LEGACY_TOPIC_ID.parse().unwrap();
    copy_dir(Path::new(LEGACY_META), &dir.path().join("meta"));
    let broker = Broker::open(config(dir.path())).unwrap();
    let topic = broker
        .with_image(|image| image.topic("orders").cloned())
        .expect("imported");
    assert_eq!((topic.id, topic.partitions.len()), (id, 3));
    assert_eq!(topic.configs["retention.ms"], "1000");
    assert!(broker.partition("orders", 2).is_some());
    // Producer ids already handed out are not handed out again.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let producer_id = loop {
        // None while the first block of ids is on its way.
        if let Some(id) = broker.producer_id() {
            break id;
        }
        assert!(std::time::Instant::now() < deadline, "no producer id block");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(producer_id >= 1000);
    assert!(!dir.path().join("meta").exists());
    assert!(dir.path().join("meta.imported").exists());
    broker.shutdown();
    drop(broker);
    // Imported once: the quorum keeps it from now on.
    let broker = Broker::open(config(dir.path())).unwrap();
    assert!(broker.partition("orders", 0).is_some());
    assert_eq!(broker.controller_status().voters.len(), 1);
}
