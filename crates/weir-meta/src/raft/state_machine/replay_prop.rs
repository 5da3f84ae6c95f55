//! Property: applying a random sequence of commands (valid or not) to the
//! state machine, as the committed log would, gives the same results and
//! the same image as applying it to a plain [`MetadataImage`]; and so does
//! a fresh state machine that installs its snapshot, or one reopened from
//! its directory that applies the log after its snapshot again.

use std::collections::{BTreeMap, BTreeSet};

use openraft::testing::log_id;
use openraft::Membership;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use uuid::Uuid;

use super::*;
use crate::acl::{
    AclBinding, AclBindingFilter, AclOperation, AclPermissionType, PatternType, ResourceType,
};
use crate::client_quota::{EntityName, QuotaAlteration, QuotaEntity, QuotaValue};
use crate::command::Command;
use crate::model::BrokerInfo;
use crate::raft::types::ControllerNode;
use crate::scram::ScramUpsertion;
use weir_auth::{ScramCredential, ScramMechanism};

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
                previous_incarnation: None,
                listeners: Vec::new(),
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
        // Users, client ids and defaults; some values not positive and
        // some entities empty (rejected).
        2 => prop::collection::vec(quota_alteration(), 0..3)
            .prop_map(|alterations| Command::AlterClientQuotas { alterations }),
        // Every partition, or some (unknown ones and repeats included).
        2 => (any::<bool>(), prop::option::of(prop::collection::vec((name(), -1..4i32), 0..4)))
            .prop_map(|(unclean, partitions)| Command::ElectLeaders { unclean, partitions }),
        // A few users, so that deletions find credentials and users repeat;
        // some iterations out of range (refused per user).
        2 => (
            prop::collection::vec((scram_user(), scram_mechanism()), 0..2),
            prop::collection::vec(scram_upsertion(), 0..3),
        )
            .prop_map(|(deletions, upsertions)| Command::AlterUserScramCredentials { deletions, upsertions }),
        // Some invalid bindings and filters (refused one by one).
        2 => prop::collection::vec(acl_binding(), 0..3).prop_map(|bindings| Command::CreateAcls { bindings }),
        1 => prop::collection::vec(acl_filter(), 0..3).prop_map(|filters| Command::DeleteAcls { filters }),
    ]
}

fn acl_binding() -> impl Strategy<Value = AclBinding> {
    (
        prop::sample::select(vec![
            ResourceType::Topic,
            ResourceType::Group,
            ResourceType::Any,
        ]),
        prop::sample::select(vec!["a", "ab", "*", ""]),
        prop::sample::select(vec![
            PatternType::Literal,
            PatternType::Prefixed,
            PatternType::Match,
        ]),
        prop::sample::select(vec!["User:u1", "User:*", "u2"]),
        prop::sample::select(vec![
            AclOperation::Read,
            AclOperation::All,
            AclOperation::Any,
        ]),
        prop::sample::select(vec![AclPermissionType::Allow, AclPermissionType::Deny]),
    )
        .prop_map(
            |(resource_type, name, pattern_type, principal, operation, permission)| AclBinding {
                resource_type,
                resource_name: name.to_owned(),
                pattern_type,
                principal: principal.to_owned(),
                host: "*".to_owned(),
                operation,
                permission,
            },
        )
}

fn acl_filter() -> impl Strategy<Value = AclBindingFilter> {
    (
        prop::sample::select(vec![
            ResourceType::Topic,
            ResourceType::Any,
            ResourceType::Unknown,
        ]),
        prop::option::of(prop::sample::select(vec!["a", "ab", "*"])),
        prop::sample::select(vec![
            PatternType::Any,
            PatternType::Match,
            PatternType::Literal,
        ]),
        prop::sample::select(vec![AclOperation::Any, AclOperation::Read]),
    )
        .prop_map(
            |(resource_type, name, pattern_type, operation)| AclBindingFilter {
                resource_type,
                resource_name: name.map(str::to_owned),
                pattern_type,
                operation,
                ..AclBindingFilter::any()
            },
        )
}

fn scram_user() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["u1", "u2", ""]).prop_map(str::to_owned)
}

fn scram_mechanism() -> impl Strategy<Value = ScramMechanism> {
    prop::sample::select(ScramMechanism::ALL.to_vec())
}

fn scram_upsertion() -> impl Strategy<Value = ScramUpsertion> {
    (
        scram_user(),
        scram_mechanism(),
        prop::sample::select(vec![4000u32, 4096, 9000]),
        any::<u8>(),
    )
        .prop_map(|(user, mechanism, iterations, seed)| {
            let len = if mechanism == ScramMechanism::Sha256 {
                32
            } else {
                64
            };
            ScramUpsertion {
                user,
                mechanism,
                credential: ScramCredential {
                    salt: vec![seed; 8],
                    stored_key: vec![seed; len],
                    server_key: vec![!seed; len],
                    iterations,
                },
            }
        })
}

fn quota_alteration() -> impl Strategy<Value = QuotaAlteration> {
    let name = || {
        prop::option::of(prop_oneof![
            Just(EntityName::Default),
            prop::sample::select(vec!["a", "b"]).prop_map(|n| EntityName::Named(n.to_owned())),
        ])
    };
    let key = || {
        prop::sample::select(vec!["producer_byte_rate", "request_percentage"])
            .prop_map(str::to_owned)
    };
    (
        name(),
        name(),
        prop::collection::btree_map(
            key(),
            (-1..3i32).prop_map(|v| QuotaValue(f64::from(v) * 512.0)),
            0..2,
        ),
        prop::collection::vec(key(), 0..2),
    )
        .prop_map(|(user, client_id, set, remove)| QuotaAlteration {
            entity: QuotaEntity { user, client_id },
            set,
            remove,
        })
}

/// The rules fencing and election keep, whatever the commands: an ISR is
/// a non-empty set of replicas in which only a last member may be fenced,
/// and a leader is an unfenced ISR member.
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

/// A state machine fed the way openraft feeds it, and the committed log
/// (entry `i` at `log[i - 1]`).
struct Node {
    dir: tempfile::TempDir,
    sm: StateMachine,
    image: watch::Receiver<Arc<MetadataImage>>,
    log: Vec<Entry>,
    term: u64,
    /// openraft's `LogsSinceLast` policy; 0 never snapshots by itself.
    snapshot_every: u64,
    since_snapshot: u64,
}

impl Node {
    /// A single-voter quorum whose first entry is its membership.
    async fn start(snapshot_every: u64) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let (sm, image) = StateMachine::open(dir.path()).unwrap();
        let mut node = Node {
            dir,
            sm,
            image,
            log: Vec::new(),
            term: 1,
            snapshot_every,
            since_snapshot: 0,
        };
        let voters = BTreeSet::from([1]);
        let nodes = BTreeMap::from([(
            1,
            ControllerNode {
                addr: "127.0.0.1:1".into(),
            },
        )]);
        node.commit(EntryPayload::Membership(Membership::new(
            vec![voters],
            nodes,
        )))
        .await;
        node
    }

    /// Commits an entry of the current term and applies it.
    async fn commit(&mut self, payload: EntryPayload<TypeConfig>) -> ApplyResult {
        let entry = Entry {
            log_id: log_id(self.term, 1, self.log.len() as u64 + 1),
            payload,
        };
        self.log.push(entry.clone());
        let mut results = self.sm.apply([entry]).await.unwrap();
        self.since_snapshot += 1;
        if self.snapshot_every > 0 && self.since_snapshot >= self.snapshot_every {
            self.snapshot().await;
        }
        results.pop().unwrap()
    }

    async fn snapshot(&mut self) -> Snapshot {
        self.since_snapshot = 0;
        let mut builder = self.sm.get_snapshot_builder().await;
        builder.build_snapshot().await.unwrap()
    }

    /// Restarts on the same directory: the state machine starts from its
    /// snapshot and the entries after it are applied again; then a new
    /// term begins with a blank entry, as after an election.
    async fn reopen(&mut self) {
        let (sm, image) = StateMachine::open(self.dir.path()).unwrap();
        self.sm = sm;
        self.image = image;
        let (applied, _) = self.sm.applied_state().await.unwrap();
        let from = applied.map_or(0, |id| id.index) as usize;
        self.sm.apply(self.log[from..].to_vec()).await.unwrap();
        self.since_snapshot = (self.log.len() - from) as u64;
        self.term += 1;
        self.commit(EntryPayload::Blank).await;
    }

    /// The image and applied state match the model and the log.
    async fn check(&mut self, model: &MetadataImage) -> Result<(), TestCaseError> {
        prop_assert_eq!(&**self.image.borrow(), model);
        let (applied, membership) = self.sm.applied_state().await.unwrap();
        prop_assert_eq!(applied, self.log.last().map(|e| e.log_id));
        prop_assert_eq!(membership.log_id(), &Some(log_id(1, 1, 1)));
        Ok(())
    }
}

/// A fresh state machine that installs `snapshot`: its image and applied
/// state.
async fn restore(snapshot: Snapshot) -> (MetadataImage, (Option<LogId>, StoredMembership)) {
    let dir = tempfile::tempdir().unwrap();
    let (mut sm, image) = StateMachine::open(dir.path()).unwrap();
    sm.install_snapshot(&snapshot.meta, snapshot.snapshot)
        .await
        .unwrap();
    let applied = sm.applied_state().await.unwrap();
    let image = (**image.borrow()).clone();
    (image, applied)
}

async fn run(steps: Vec<Step>, snapshot_every: u64) -> Result<(), TestCaseError> {
    let mut node = Node::start(snapshot_every).await;
    let mut model = MetadataImage::default();
    // Brokers 0..3 first, so that topics can be created from the start.
    let brokers = (0..3).map(|id| {
        Step::Submit(Command::RegisterBroker(BrokerInfo {
            id,
            host: format!("h{id}"),
            port: 9092,
            rack: None,
            incarnation: Uuid::nil(),
            previous_incarnation: None,
            listeners: Vec::new(),
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
                let got = node.commit(EntryPayload::Normal(cmd)).await;
                prop_assert_eq!(
                    got,
                    ApplyResult(want.map_err(|e| Rejection::from(&e))),
                    "state machine and image disagree"
                );
            }
            Step::Snapshot => {
                let snapshot = node.snapshot().await;
                let (image, applied) = restore(snapshot).await;
                prop_assert_eq!(&image, &model);
                prop_assert_eq!(applied, node.sm.applied_state().await.unwrap());
            }
            Step::Reopen => node.reopen().await,
        }
        node.check(&model).await?;
        if let Err(e) = check_partitions(&model) {
            prop_assert!(false, "{}", e);
        }
    }
    node.reopen().await;
    node.check(&model).await?;
    let (image, _) = restore(node.snapshot().await).await;
    prop_assert_eq!(&image, &model);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn snapshots_and_replay_rebuild_the_image(
        steps in prop::collection::vec(step(), 0..100),
        snapshot_every in 0..8u64,
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(run(steps, snapshot_every))?;
    }
}
