//! Cluster mirrors, after KIP-1279 ("Cluster Mirroring"): a mirror is
//! defined on the destination cluster and pulls topics from a source
//! cluster over the Kafka protocol, byte for byte and offset for offset.
//!
//! A mirror names its source (bootstrap servers and client settings with
//! Kafka's names), which source topics it mirrors (a regular expression
//! matching whole names) and which groups' committed offsets it copies. The
//! topics it created on the destination, with the source's topic ids, are
//! its mirror topics: read-only while it feeds them. The metadata quorum
//! holds all of it, so every broker knows which topics are mirrors and the
//! leaders of their partitions know to fetch them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The longest mirror name, as a topic name's.
const MAX_NAME_LEN: usize = 249;

/// One mirror of a source cluster.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Mirror {
    /// The mirror's name, unique in the cluster.
    pub name: String,
    /// The source cluster's bootstrap servers (`host:port[,host:port]`).
    pub source_bootstrap: String,
    /// The source topics mirrored: a regular expression matching whole
    /// names.
    pub topics: String,
    /// The groups whose committed offsets are copied, the same way; `None`
    /// for none.
    pub groups: Option<String>,
    /// Client settings for the source, with Kafka's names
    /// (`security.protocol`, `sasl.mechanism`, ...).
    pub source_config: BTreeMap<String, String>,
    /// Fetching stopped for now; the topics stay read-only.
    pub paused: bool,
    /// The source's ACLs are copied here (created, and removed when the
    /// source removes them).
    #[serde(default)]
    pub sync_acls: bool,
    /// The destination topics this mirror created, by topic id (the
    /// source's).
    pub mirror_topics: BTreeMap<Uuid, MirrorTopic>,
}

/// A topic a mirror created on the destination.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct MirrorTopic {
    /// The topic's name, the source's.
    pub name: String,
    /// Absent from images written before failover existed: mirroring.
    #[serde(default)]
    pub state: MirrorTopicState,
    /// Where each partition was cut when the mirror took the topic back
    /// from a writable one (failback): what a replica holds past it from
    /// before the cut's leader epoch is dropped.
    #[serde(default)]
    pub failback_cuts: BTreeMap<i32, MirrorCut>,
}

/// Where a mirror topic is in its life: taken back, fed by the mirror,
/// failing over, or failed over.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub enum MirrorTopicState {
    /// A writable topic here with the source topic's id (it once fed the
    /// source, or was fed by it), taken back by the mirror (failback):
    /// read-only, not fetched yet; each partition's leader reports where
    /// its log and the source's part.
    Preparing {
        /// The offsets reported so far, by partition: below each, the
        /// partition holds the source's batches.
        reported: BTreeMap<i32, u64>,
    },
    /// The mirror feeds it; producers may not.
    #[default]
    Mirroring,
    /// Failing over: fetching stopped, and each partition's leader
    /// reports where its log is cut.
    Stopping {
        /// The cuts reported so far: last stable offsets by partition.
        reported: BTreeMap<i32, u64>,
    },
    /// Failed over: it takes writes here. Each partition's log ends at its
    /// last mirrored offset as of the failover; writes since carry its
    /// leader epoch at the failover or a later one.
    Stopped {
        /// Each partition's cut, by partition.
        partitions: BTreeMap<i32, MirrorCut>,
    },
}

/// Where a mirror partition's log was cut, by a failover or a failback.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct MirrorCut {
    /// Every offset below it holds the source's batches; nothing at or
    /// above it came from the source before the cut.
    pub last_mirrored_offset: u64,
    /// The leader epoch the cut started: a replica's records past the last
    /// mirrored offset in an older epoch are dropped.
    pub leader_epoch: i32,
}

impl MirrorTopic {
    /// A topic the mirror feeds from now on.
    pub fn mirroring(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            state: MirrorTopicState::Mirroring,
            failback_cuts: BTreeMap::new(),
        }
    }

    /// Whether the mirror feeds it or is about to: taken back or mirroring.
    pub fn feeds(&self) -> bool {
        matches!(
            self.state,
            MirrorTopicState::Preparing { .. } | MirrorTopicState::Mirroring
        )
    }

    /// A writable topic the mirror takes back (failback).
    pub fn preparing(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            state: MirrorTopicState::Preparing {
                reported: BTreeMap::new(),
            },
            failback_cuts: BTreeMap::new(),
        }
    }

    /// Whether producers may not write to it: taken back, mirroring or
    /// failing over.
    pub fn is_read_only(&self) -> bool {
        !matches!(self.state, MirrorTopicState::Stopped { .. })
    }

    /// Where a partition's log was last cut: at its failover once failed
    /// over, else at its failback, if it had one.
    pub fn cut(&self, partition: i32) -> Option<&MirrorCut> {
        match &self.state {
            MirrorTopicState::Stopped { partitions } => partitions.get(&partition),
            _ => self.failback_cuts.get(&partition),
        }
    }
}

impl Mirror {
    /// A mirror of `source_bootstrap` with no topics yet, running.
    pub fn new(name: &str, source_bootstrap: &str, topics: &str) -> Self {
        Self {
            name: name.to_owned(),
            source_bootstrap: source_bootstrap.to_owned(),
            topics: topics.to_owned(),
            groups: None,
            source_config: BTreeMap::new(),
            paused: false,
            sync_acls: false,
            mirror_topics: BTreeMap::new(),
        }
    }

    /// What is wrong with a mirror about to be created, if anything.
    pub(crate) fn check_new(&self) -> Result<(), String> {
        if self.name.is_empty() || self.name.len() > MAX_NAME_LEN {
            return Err(format!("a mirror name has 1 to {MAX_NAME_LEN} characters"));
        }
        if let Some(c) = self
            .name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            return Err(format!(
                "mirror name '{}' contains '{c}': use ASCII letters, digits, '.', '_' and '-'",
                self.name
            ));
        }
        if self.source_bootstrap.trim().is_empty() {
            return Err(format!(
                "mirror '{}' has no source bootstrap servers",
                self.name
            ));
        }
        if !self.mirror_topics.is_empty() {
            return Err(format!(
                "mirror '{}' must be created without topics; it creates them",
                self.name
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{Applied, Command, TopicCreation};
    use crate::error::MetaError;
    use crate::image::MetadataImage;
    use crate::model::BrokerInfo;

    const ORDERS: Uuid = Uuid::from_u128(7);

    fn cluster_with_mirror() -> MetadataImage {
        let mut image = MetadataImage::new();
        image
            .apply(&Command::RegisterBroker(BrokerInfo {
                id: 1,
                host: "host1".into(),
                port: 9092,
                rack: None,
                incarnation: Uuid::from_u128(1),
                previous_incarnation: None,
                listeners: Vec::new(),
            }))
            .unwrap();
        image
            .apply(&Command::CreateMirror {
                mirror: Mirror::new("east", "east-1:9092", "orders|payments"),
            })
            .unwrap();
        image
    }

    fn orders() -> TopicCreation {
        TopicCreation {
            name: "orders".into(),
            id: ORDERS,
            replicas: vec![vec![1], vec![1]],
            configs: BTreeMap::from([("cleanup.policy".to_owned(), "compact".to_owned())]),
            internal: false,
        }
    }

    fn create_topics(image: &mut MetadataImage, mirror: &str) -> Result<Applied, MetaError> {
        image.apply(&Command::CreateMirrorTopics {
            mirror: mirror.into(),
            topics: vec![orders()],
        })
    }

    #[test]
    fn a_mirror_creates_its_topics_with_the_sources_ids_and_makes_them_read_only() {
        let mut image = cluster_with_mirror();
        let applied = create_topics(&mut image, "east").unwrap();
        assert_eq!(applied, Applied::TopicsCreated(vec![Ok(())]));
        let topic = image.topic("orders").unwrap();
        assert_eq!((topic.id, topic.partition_count()), (ORDERS, 2));
        assert_eq!(topic.configs["cleanup.policy"], "compact");
        assert_eq!(
            image.mirror_feeding(ORDERS).map(|m| m.name.as_str()),
            Some("east")
        );
        // Again: the topic exists, so it is left out; the mirror keeps it.
        let again = create_topics(&mut image, "east").unwrap();
        assert!(matches!(again, Applied::TopicsCreated(ref o) if o[0].is_err()));
        assert_eq!(image.mirror("east").unwrap().mirror_topics.len(), 1);
        // Deleting the topic unlinks it.
        image
            .apply(&Command::DeleteTopic {
                name: "orders".into(),
            })
            .unwrap();
        assert!(image.mirror_feeding(ORDERS).is_none());
        assert!(image.mirror("east").unwrap().mirror_topics.is_empty());
    }

    #[test]
    fn mirrors_are_refused_with_a_taken_or_invalid_name_and_unknown_ones_are_errors() {
        let mut image = cluster_with_mirror();
        let duplicate = image.apply(&Command::CreateMirror {
            mirror: Mirror::new("east", "other:9092", ".*"),
        });
        assert!(
            matches!(&duplicate, Err(MetaError::InvalidRequest(m)) if m.contains("already exists")),
            "{duplicate:?}"
        );
        for bad in ["", "a/b", "white space"] {
            let refused = image.apply(&Command::CreateMirror {
                mirror: Mirror::new(bad, "h:9092", ".*"),
            });
            assert!(
                matches!(refused, Err(MetaError::InvalidRequest(_))),
                "{bad:?}"
            );
        }
        let no_source = image.apply(&Command::CreateMirror {
            mirror: Mirror::new("west", " ", ".*"),
        });
        assert!(no_source.is_err());
        for command in [
            Command::DeleteMirror {
                name: "west".into(),
            },
            Command::SetMirrorPaused {
                name: "west".into(),
                paused: true,
            },
        ] {
            let unknown = image.apply(&command);
            assert!(
                matches!(&unknown, Err(MetaError::InvalidRequest(m)) if m.contains("does not exist")),
                "{unknown:?}"
            );
        }
        assert!(create_topics(&mut image, "west").is_err());
        assert!(image.topic("orders").is_none(), "nothing created");
    }

    #[test]
    fn a_failover_cuts_each_partition_where_its_leader_says_and_then_takes_writes() {
        let mut image = cluster_with_mirror();
        create_topics(&mut image, "east").unwrap();
        let unfed = image.apply(&Command::FailOverMirror {
            mirror: "east".into(),
            topics: vec!["payments".into()],
        });
        assert!(unfed.is_err(), "{unfed:?}");
        image
            .apply(&Command::FailOverMirror {
                mirror: "east".into(),
                topics: vec![],
            })
            .unwrap();
        assert!(
            image.mirror_feeding(ORDERS).is_some(),
            "read-only while failing over"
        );
        let stopped =
            |partition, leader_epoch, offset, max_producer_id| Command::MirrorPartitionStopped {
                topic_id: ORDERS,
                partition,
                broker: 1,
                leader_epoch,
                last_mirrored_offset: offset,
                max_producer_id,
            };
        // Only the partition's leader at its epoch reports.
        assert!(image.apply(&stopped(0, 3, 40, 9)).is_err());
        image.apply(&stopped(0, 0, 40, 9)).unwrap();
        assert!(image.mirror_feeding(ORDERS).is_some());
        image.apply(&stopped(1, 0, 7, 1_000)).unwrap();
        // All reported: writable, at a new leader epoch, with producer ids
        // above the mirrored ones.
        assert!(image.mirror_feeding(ORDERS).is_none());
        let (_, topic) = image.mirror_topic(ORDERS).unwrap();
        let MirrorTopicState::Stopped { partitions } = &topic.state else {
            panic!("{:?}", topic.state);
        };
        assert_eq!(
            partitions[&0],
            MirrorCut {
                last_mirrored_offset: 40,
                leader_epoch: 1
            }
        );
        assert_eq!(partitions[&1].last_mirrored_offset, 7);
        assert_eq!(image.topic("orders").unwrap().partitions[1].leader_epoch, 1);
        assert!(image.next_producer_id() > 1_000);
        assert_eq!(image.mirrored_producer_ids_end(), 1_001);
        // Not failing over any more: a late report is refused.
        assert!(image.apply(&stopped(0, 1, 50, 9)).is_err());
    }

    #[test]
    fn a_failback_takes_a_writable_topic_with_the_sources_id_and_cuts_it_where_the_logs_part() {
        let mut image = cluster_with_mirror();
        create_topics(&mut image, "east").unwrap();
        image
            .apply(&Command::FailOverMirror {
                mirror: "east".into(),
                topics: vec![],
            })
            .unwrap();
        for partition in [0, 1] {
            image
                .apply(&Command::MirrorPartitionStopped {
                    topic_id: ORDERS,
                    partition,
                    broker: 1,
                    leader_epoch: 0,
                    last_mirrored_offset: 10,
                    max_producer_id: -1,
                })
                .unwrap();
        }
        let fail_back = |mirror: &str| Command::FailBackMirrorTopics {
            mirror: mirror.into(),
            topic_ids: vec![ORDERS],
        };
        // The mirror that failed the topic over does not take it back.
        let refused = image.apply(&fail_back("east"));
        assert!(
            matches!(&refused, Err(MetaError::InvalidRequest(m)) if m.contains("failed topic 'orders' over")),
            "{refused:?}"
        );
        image
            .apply(&Command::CreateMirror {
                mirror: Mirror::new("back", "west-1:9092", "orders"),
            })
            .unwrap();
        image.apply(&fail_back("back")).unwrap();
        assert!(image.mirror("east").unwrap().mirror_topics.is_empty());
        assert_eq!(
            image.mirror_feeding(ORDERS).map(|m| m.name.as_str()),
            Some("back"),
            "read-only from now on"
        );
        // Fed already: not taken twice.
        assert!(image.apply(&fail_back("back")).is_err());
        let prepared = |partition, leader_epoch, agreed_offset| Command::MirrorPartitionPrepared {
            topic_id: ORDERS,
            partition,
            broker: 1,
            leader_epoch,
            agreed_offset,
        };
        assert!(image.apply(&prepared(0, 0, 8)).is_err(), "an old epoch");
        image.apply(&prepared(0, 1, 8)).unwrap();
        let (_, topic) = image.mirror_topic(ORDERS).unwrap();
        assert!(matches!(topic.state, MirrorTopicState::Preparing { .. }));
        image.apply(&prepared(1, 1, 10)).unwrap();
        let (_, topic) = image.mirror_topic(ORDERS).unwrap();
        assert_eq!(topic.state, MirrorTopicState::Mirroring);
        assert_eq!(
            topic.cut(0),
            Some(&MirrorCut {
                last_mirrored_offset: 8,
                leader_epoch: 2
            })
        );
        assert_eq!(topic.cut(1).unwrap().last_mirrored_offset, 10);
        assert_eq!(image.topic("orders").unwrap().partitions[0].leader_epoch, 2);
        assert!(image.apply(&prepared(0, 2, 8)).is_err(), "reported already");
        // Failing over again: the failover's cut rules.
        image
            .apply(&Command::FailOverMirror {
                mirror: "back".into(),
                topics: vec![],
            })
            .unwrap();
        for partition in [0, 1] {
            image
                .apply(&Command::MirrorPartitionStopped {
                    topic_id: ORDERS,
                    partition,
                    broker: 1,
                    leader_epoch: 2,
                    last_mirrored_offset: 30,
                    max_producer_id: -1,
                })
                .unwrap();
        }
        let (_, topic) = image.mirror_topic(ORDERS).unwrap();
        assert_eq!(topic.cut(0).unwrap().last_mirrored_offset, 30);
        let json = serde_json::to_string(&image).unwrap();
        let back: MetadataImage = serde_json::from_str(&json).unwrap();
        assert_eq!(back, image);
    }

    #[test]
    fn a_topic_being_taken_back_can_fail_over_again() {
        let mut image = cluster_with_mirror();
        image
            .apply(&Command::CreateTopics {
                topics: vec![orders()],
            })
            .unwrap();
        image
            .apply(&Command::FailBackMirrorTopics {
                mirror: "east".into(),
                topic_ids: vec![ORDERS],
            })
            .unwrap();
        // The new primary went away before the logs were compared.
        image
            .apply(&Command::FailOverMirror {
                mirror: "east".into(),
                topics: vec!["orders".into()],
            })
            .unwrap();
        let (_, topic) = image.mirror_topic(ORDERS).unwrap();
        assert!(matches!(topic.state, MirrorTopicState::Stopping { .. }));
    }

    #[test]
    fn pausing_keeps_the_topics_read_only_and_deleting_the_mirror_frees_them() {
        let mut image = cluster_with_mirror();
        create_topics(&mut image, "east").unwrap();
        image
            .apply(&Command::SetMirrorPaused {
                name: "east".into(),
                paused: true,
            })
            .unwrap();
        assert!(image.mirror("east").unwrap().paused);
        assert!(image.mirror_feeding(ORDERS).is_some());
        let json = serde_json::to_string(&image).unwrap();
        let back: MetadataImage = serde_json::from_str(&json).unwrap();
        assert_eq!(back, image);
        image
            .apply(&Command::DeleteMirror {
                name: "east".into(),
            })
            .unwrap();
        assert!(image.mirror_feeding(ORDERS).is_none());
        assert!(image.topic("orders").is_some(), "the topic stays");
    }
}
