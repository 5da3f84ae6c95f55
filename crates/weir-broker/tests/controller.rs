//! The broker's metadata goes through the controller quorum: a data
//! directory written by the local metadata store of earlier versions is
//! imported into it, topic ids and all.

use std::collections::BTreeMap;

use weir_broker::{Broker, BrokerConfig};
use weir_meta::{BrokerInfo, Command, MetaStore};

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

#[test]
fn a_data_directory_of_the_local_store_is_imported() {
    let dir = tempfile::tempdir().unwrap();
    let id = uuid::Uuid::new_v4();
    {
        let mut old = MetaStore::open(&dir.path().join("meta")).unwrap();
        old.submit(Command::RegisterBroker(BrokerInfo {
            id: 1,
            host: "127.0.0.1".into(),
            port: 9092,
            rack: None,
            incarnation: uuid::Uuid::nil(),
        }))
        .unwrap();
        old.submit(Command::CreateTopic {
            name: "orders".into(),
            id,
            partitions: 3,
            replicas: vec![vec![1]; 3],
            configs: [("retention.ms".to_owned(), "1000".to_owned())].into(),
            internal: false,
        })
        .unwrap();
        old.submit(Command::AllocateProducerIds { count: 1000 })
            .unwrap();
    }
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
