//! Property: a random sequence of commands (valid or not) applied to an
//! in-memory image gives the same results and the same image as submitting
//! it to a store, and reopening the store (snapshot + log replay) rebuilds
//! that image exactly.

use std::collections::BTreeMap;

use proptest::prelude::*;
use uuid::Uuid;
use weir_meta::{BrokerInfo, Command, MetaStore, MetadataImage, StoreOptions};

const NAMES: &[&str] = &[
    "a",
    "b",
    "a.b",
    "a_b",
    "c-1",
    "__consumer_offsets",
    "",
    "..",
    "bad name",
];
const BROKER_CONFIGS: &[(&str, &str)] = &[
    ("log.retention.ms", "1000"),
    ("log.retention.ms", "-1"),
    ("log.retention.bytes", "4096"),
    ("log.cleanup.policy", "compact"),
    ("no.such.config", "x"),
    ("", "1"),
];
const CONFIGS: &[(&str, &str)] = &[
    ("retention.ms", "1000"),
    ("retention.ms", "-2"),
    ("cleanup.policy", "compact"),
    ("cleanup.policy", "compact,delete"),
    ("segment.bytes", "1048576"),
    ("min.compaction.lag.ms", "500"),
    ("max.compaction.lag.ms", "100"),
    ("unknown.config", "1"),
    ("compression.type", "zstd"),
];

/// Mostly legal names, some of which collide.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => prop::sample::select(&NAMES[..6]),
        1 => prop::sample::select(NAMES),
    ]
    .prop_map(str::to_owned)
}

/// `count` replica lists of `rf` brokers among 0..3, as the consistent
/// creations use.
fn layout(count: usize, rf: usize) -> Vec<Vec<i32>> {
    (0..count)
        .map(|p| (0..rf).map(|r| ((p + r) % 3) as i32).collect())
        .collect()
}

fn replicas() -> impl Strategy<Value = Vec<i32>> {
    prop::collection::vec(0..5i32, 0..4)
}

fn configs() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::vec(prop::sample::select(CONFIGS), 0..3).prop_map(|pairs| {
        pairs
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    })
}

fn command() -> impl Strategy<Value = Command> {
    prop_oneof![
        3 => (0..5i32, prop::option::of("r[0-2]"), 0..3u128).prop_map(|(id, rack, incarnation)| {
            Command::RegisterBroker(BrokerInfo {
                id,
                host: format!("h{id}"),
                port: 9092,
                rack,
                incarnation: Uuid::from_u128(incarnation),
            })
        }),
        // Unknown ids (4, 5) too, which are rejected.
        2 => (0..6i32).prop_map(|id| Command::FenceBroker { id }),
        1 => (0..6i32).prop_map(|id| Command::ControlledShutdown { id }),
        1 => Just(Command::ElectPreferredLeaders),
        1 => (name(), any::<bool>()).prop_map(|(name, on)| Command::AlterTopicConfigs {
            name,
            set: BTreeMap::from([("unclean.leader.election.enable".to_owned(), on.to_string())]),
            delete: Vec::new(),
        }),
        4 => (name(), 0..6u128, -1..4i32, prop::collection::vec(replicas(), 0..4), configs(), any::<bool>())
            .prop_map(|(name, id, partitions, replicas, configs, internal)| Command::CreateTopic {
                name,
                id: Uuid::from_u128(id),
                partitions,
                replicas,
                configs,
                internal,
            }),
        // Mostly consistent creations, so that topics exist often.
        4 => (name(), 1..6u128, 1..4usize, 1..3usize).prop_map(|(name, id, partitions, rf)| {
            Command::CreateTopic {
                name,
                id: Uuid::from_u128(id),
                partitions: partitions as i32,
                replicas: layout(partitions, rf),
                configs: BTreeMap::new(),
                internal: false,
            }
        }),
        2 => name().prop_map(|name| Command::DeleteTopic { name }),
        1 => (name(), prop::collection::vec(replicas(), 0..3))
            .prop_map(|(name, new_replicas)| Command::CreatePartitions { name, new_replicas }),
        2 => (name(), 1..3usize, 1..3usize)
            .prop_map(|(name, count, rf)| Command::CreatePartitions { name, new_replicas: layout(count, rf) }),
        2 => (name(), configs(), prop::collection::vec(prop::sample::select(CONFIGS).prop_map(|(k, _)| k.to_owned()), 0..2))
            .prop_map(|(name, set, delete)| Command::AlterTopicConfigs { name, set, delete }),
        // The cluster default, brokers 0..3, an unregistered and a negative
        // (rejected) id; some keys both set and deleted (rejected).
        2 => (
            prop::option::of(-1..5i32),
            prop::collection::btree_map(
                prop::sample::select(BROKER_CONFIGS).prop_map(|(k, _)| k.to_owned()),
                prop::sample::select(BROKER_CONFIGS).prop_map(|(_, v)| v.to_owned()),
                0..3,
            ),
            prop::collection::vec(prop::sample::select(BROKER_CONFIGS).prop_map(|(k, _)| k.to_owned()), 0..2),
        )
            .prop_map(|(broker, set, delete)| Command::AlterBrokerConfigs { broker, set, delete }),
        2 => (-1..2000i64).prop_map(|count| Command::AllocateProducerIds { count }),
        // Mostly stale or invalid: rejected without a trace.
        3 => (name(), 0..3i32, 0..5i32, 0..3i32, 0..4i32, prop::collection::vec(0..5i32, 0..4))
            .prop_map(|(topic, partition, leader, leader_epoch, partition_epoch, isr)| {
                Command::AlterPartition { topic, partition, leader, leader_epoch, partition_epoch, isr }
            }),
        1 => prop::sample::select(vec!["c1", "c2", ""])
            .prop_map(|id| Command::SetClusterId { id: id.to_owned() }),
    ]
}

/// The rules fencing and election keep, whatever the commands: an ISR is
/// a non-empty set of replicas in which only a last member may be fenced;
/// a leader is an unfenced ISR member; and (the interim rule while
/// followers do not fetch) a partition with a leader has every unfenced
/// replica in its ISR.
fn check_partitions(image: &MetadataImage) -> Result<(), String> {
    for topic in image.topics() {
        for p in &topic.partitions {
            let at = format!("{}-{}: {p:?}", topic.name, p.partition);
            let mut isr = p.isr.clone();
            isr.sort_unstable();
            isr.dedup();
            if isr.is_empty() || isr.len() != p.isr.len() {
                return Err(format!("{at}: empty ISR or a member twice"));
            }
            if !p.isr.iter().all(|r| p.replicas.contains(r)) {
                return Err(format!("{at}: ISR member that is not a replica"));
            }
            if p.isr.len() > 1 && p.isr.iter().any(|r| image.is_fenced(*r)) {
                return Err(format!("{at}: fenced ISR member besides others"));
            }
            if p.leader != -1 && (!p.isr.contains(&p.leader) || image.is_fenced(p.leader)) {
                return Err(format!("{at}: leader out of the ISR or fenced"));
            }
            // A live replica may be out of the ISR: it rejoins through
            // AlterPartition once caught up.
            if p.leader_epoch < 0 || p.partition_epoch < p.leader_epoch {
                return Err(format!("{at}: epochs"));
            }
        }
    }
    Ok(())
}

/// What the test does between commands.
#[derive(Clone, Debug)]
enum Step {
    Submit(Command),
    Snapshot,
    Reopen,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        20 => command().prop_map(Step::Submit),
        1 => Just(Step::Snapshot),
        1 => Just(Step::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn store_replay_rebuilds_the_image(
        steps in prop::collection::vec(step(), 0..100),
        snapshot_every in 0..8u64,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let options = StoreOptions { snapshot_every };
        let mut store = MetaStore::open_with(dir.path(), options.clone()).unwrap();
        let mut model = MetadataImage::default();
        // Brokers 0..3 first, so that topics can be created from the start.
        let brokers = (0..3).map(|id| {
            Step::Submit(Command::RegisterBroker(BrokerInfo {
                id,
                host: format!("h{id}"),
                port: 9092,
                rack: None,
                incarnation: Uuid::nil(),
            }))
        });
        for step in brokers.chain(steps) {
            match step {
                Step::Submit(cmd) => {
                    let before = model.clone();
                    let want = model.apply(&cmd);
                    if want.is_err() {
                        prop_assert_eq!(&model, &before, "a rejected command changed the image");
                    }
                    let got = store.submit(cmd);
                    prop_assert_eq!(
                        format!("{:?}", got),
                        format!("{:?}", want),
                        "store and image disagree"
                    );
                }
                Step::Snapshot => store.snapshot().unwrap(),
                Step::Reopen => {
                    drop(store);
                    store = MetaStore::open_with(dir.path(), options.clone()).unwrap();
                }
            }
            prop_assert_eq!(store.image(), &model);
            if let Err(e) = check_partitions(&model) {
                prop_assert!(false, "{}", e);
            }
        }
        drop(store);
        let reopened = MetaStore::open_with(dir.path(), options).unwrap();
        prop_assert_eq!(reopened.image(), &model);
    }
}
