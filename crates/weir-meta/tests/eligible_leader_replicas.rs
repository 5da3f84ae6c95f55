//! Eligible leader replicas (KIP-966) through the commands that move
//! brokers in and out: fencing, clean and unclean restarts, AlterPartition,
//! the feature level and `min.insync.replicas` as topic and cluster
//! configs.

use std::collections::BTreeMap;

use uuid::Uuid;
use weir_meta::{BrokerInfo, Command, MetaError, MetadataImage, ELR_FEATURE};

fn register(id: i32, incarnation: u128, previous: Option<u128>) -> Command {
    Command::RegisterBroker(BrokerInfo {
        id,
        host: format!("host{id}"),
        port: 9092,
        rack: None,
        incarnation: Uuid::from_u128(incarnation),
        previous_incarnation: previous.map(Uuid::from_u128),
        listeners: Vec::new(),
    })
}

fn elr_level(level: i16) -> Command {
    Command::SetFeatureLevel {
        name: ELR_FEATURE.to_owned(),
        level,
    }
}

fn configs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Brokers 1, 2, 3 and topic "t", one partition on [1, 2, 3] led by 1,
/// `min.insync.replicas` 2, with the feature at `level`.
fn cluster(level: i16) -> MetadataImage {
    let mut image = MetadataImage::new();
    for id in 1..=3 {
        image.apply(&register(id, id as u128, None)).unwrap();
    }
    image.apply(&elr_level(level)).unwrap();
    image
        .apply(&Command::CreateTopic {
            name: "t".to_owned(),
            id: Uuid::from_u128(7),
            partitions: 1,
            replicas: vec![vec![1, 2, 3]],
            configs: configs(&[("min.insync.replicas", "2")]),
            internal: false,
        })
        .unwrap();
    image
}

/// (leader, ISR, ELR, last known ELR) of t-0.
fn state(image: &MetadataImage) -> (i32, Vec<i32>, Vec<i32>, Vec<i32>) {
    let p = &image.topic("t").unwrap().partitions[0];
    (
        p.leader,
        p.isr.clone(),
        p.elr.clone(),
        p.last_known_elr.clone(),
    )
}

fn apply(image: &mut MetadataImage, command: Command) {
    image.apply(&command).unwrap();
}

#[test]
fn replicas_fenced_below_min_isr_wait_in_the_elr_and_one_back_leads_cleanly() {
    let mut image = cluster(1);
    apply(&mut image, Command::ControlledShutdown { id: 2 });
    assert_eq!(
        state(&image),
        (1, vec![1, 3], vec![], vec![]),
        "at the minimum"
    );
    apply(&mut image, Command::ControlledShutdown { id: 3 });
    assert_eq!(state(&image), (1, vec![1], vec![3], vec![]), "under it");
    apply(&mut image, Command::FenceBroker { id: 1 });
    assert_eq!(
        state(&image),
        (-1, vec![], vec![1, 3], vec![1]),
        "the ISR empties into the ELR; the last leader is remembered"
    );
    // 3 stopped cleanly: its new process proves it, and leads from the ELR.
    apply(&mut image, register(3, 30, Some(3)));
    assert_eq!(state(&image), (3, vec![3], vec![1], vec![]));
    // 2, never in the ELR, catches up: the ISR is back at its minimum.
    apply(&mut image, register(2, 20, Some(2)));
    let p = image.topic("t").unwrap().partitions[0].clone();
    apply(
        &mut image,
        Command::AlterPartition {
            topic: "t".to_owned(),
            partition: 0,
            leader: 3,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            isr: vec![3, 2],
        },
    );
    assert_eq!(state(&image), (3, vec![3, 2], vec![], vec![]));
}

#[test]
fn without_the_feature_the_partition_stays_offline_as_in_kafka_3() {
    let mut image = cluster(0);
    apply(&mut image, Command::ControlledShutdown { id: 2 });
    apply(&mut image, Command::ControlledShutdown { id: 3 });
    apply(&mut image, Command::FenceBroker { id: 1 });
    assert_eq!(state(&image), (-1, vec![1], vec![], vec![]));
    apply(&mut image, register(3, 30, Some(3)));
    assert_eq!(
        state(&image),
        (-1, vec![1], vec![], vec![]),
        "3 is not in sync"
    );
}

#[test]
fn a_restart_that_cannot_prove_a_clean_stop_leaves_the_elr() {
    let mut image = cluster(1);
    apply(&mut image, Command::ControlledShutdown { id: 2 });
    apply(&mut image, Command::FenceBroker { id: 3 });
    apply(&mut image, Command::FenceBroker { id: 1 });
    assert_eq!(state(&image), (-1, vec![], vec![1, 3], vec![1]));
    // 3 was killed: its new process names no clean predecessor.
    apply(&mut image, register(3, 30, None));
    assert_eq!(state(&image), (-1, vec![], vec![1], vec![1]));
    // A clean stop of another incarnation proves nothing either.
    apply(&mut image, register(1, 10, Some(99)));
    assert_eq!(
        state(&image),
        (1, vec![1], vec![], vec![]),
        "out of ISR and ELR, 1 leads again only as the last known leader"
    );
}

#[test]
fn turning_the_feature_off_clears_every_elr() {
    let mut image = cluster(1);
    apply(&mut image, Command::ControlledShutdown { id: 2 });
    apply(&mut image, Command::ControlledShutdown { id: 3 });
    assert_eq!(state(&image).2, vec![3]);
    apply(&mut image, elr_level(0));
    assert_eq!(state(&image), (1, vec![1], vec![], vec![]));
    assert_eq!(image.feature_level(ELR_FEATURE), 0);
}

#[test]
fn changing_min_insync_replicas_clears_the_elr_as_kafka_does() {
    let mut image = cluster(1);
    apply(&mut image, Command::ControlledShutdown { id: 2 });
    apply(&mut image, Command::ControlledShutdown { id: 3 });
    apply(
        &mut image,
        Command::AlterTopicConfigs {
            name: "t".to_owned(),
            set: configs(&[("min.insync.replicas", "2")]),
            delete: Vec::new(),
        },
    );
    assert_eq!(
        state(&image).2,
        Vec::<i32>::new(),
        "the topic's, even unchanged"
    );
    // Back under the topic's minimum, then the cluster-level value is set.
    apply(&mut image, register(3, 30, Some(3)));
    let p = image.topic("t").unwrap().partitions[0].clone();
    apply(
        &mut image,
        Command::AlterPartition {
            topic: "t".to_owned(),
            partition: 0,
            leader: 1,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            isr: vec![1, 3],
        },
    );
    apply(&mut image, Command::ControlledShutdown { id: 3 });
    assert_eq!(state(&image).2, vec![3]);
    apply(
        &mut image,
        Command::AlterBrokerConfigs {
            broker: None,
            set: configs(&[("min.insync.replicas", "1")]),
            delete: Vec::new(),
        },
    );
    assert_eq!(state(&image).2, Vec::<i32>::new(), "the cluster's");
}

#[test]
fn the_cluster_level_min_insync_replicas_is_kept_while_the_feature_is_on() {
    let mut image = MetadataImage::new();
    apply(
        &mut image,
        Command::AlterBrokerConfigs {
            broker: Some(1),
            set: configs(&[("min.insync.replicas", "3")]),
            delete: Vec::new(),
        },
    );
    assert!(image.broker_configs(None).is_empty());
    apply(&mut image, elr_level(1));
    assert_eq!(
        image
            .broker_configs(None)
            .get("min.insync.replicas")
            .map(String::as_str),
        Some("1"),
        "added with Kafka's default"
    );
    assert!(
        image.broker_configs(Some(1)).is_empty(),
        "the broker's own went"
    );
    let refused =
        |image: &mut MetadataImage, broker: Option<i32>, set: &[(&str, &str)], delete: &[&str]| {
            let command = Command::AlterBrokerConfigs {
                broker,
                set: configs(set),
                delete: delete.iter().map(|k| k.to_string()).collect(),
            };
            match image.apply(&command) {
                Err(error @ MetaError::InvalidConfig { .. }) => error.to_string(),
                other => panic!("{other:?}"),
            }
        };
    assert_eq!(
        refused(&mut image, None, &[], &["min.insync.replicas"]),
        "Cluster-level min.insync.replicas cannot be removed while ELR is enabled."
    );
    assert_eq!(
        refused(&mut image, Some(2), &[("min.insync.replicas", "2")], &[]),
        "Broker-level min.insync.replicas cannot be altered while ELR is enabled."
    );
    // The cluster-level value drives topics without their own.
    apply(
        &mut image,
        Command::AlterBrokerConfigs {
            broker: None,
            set: configs(&[("min.insync.replicas", "2")]),
            delete: Vec::new(),
        },
    );
    assert_eq!(image.cluster_min_isr(), 2);
    apply(&mut image, elr_level(0));
    apply(
        &mut image,
        Command::AlterBrokerConfigs {
            broker: None,
            set: BTreeMap::new(),
            delete: vec!["min.insync.replicas".to_owned()],
        },
    );
    assert_eq!(
        image.cluster_min_isr(),
        1,
        "removable once the feature is off"
    );
}

#[test]
fn an_image_written_before_elr_loads_with_empty_lists_and_the_feature_off() {
    let image = cluster(1);
    let mut json: serde_json::Value = serde_json::to_value(&image).unwrap();
    json.as_object_mut().unwrap().remove("features");
    let partition = &mut json["topics"]["t"]["partitions"][0];
    partition.as_object_mut().unwrap().remove("elr");
    partition.as_object_mut().unwrap().remove("last_known_elr");
    let old: MetadataImage = serde_json::from_value(json).unwrap();
    assert_eq!(old.feature_level(ELR_FEATURE), 0);
    assert_eq!(state(&old), (1, vec![1, 2, 3], vec![], vec![]));
}
