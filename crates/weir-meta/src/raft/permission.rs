//! What each controller RPC needs of the peer that sends it, checked per
//! request (Kafka's `ControllerApis` authorizes every request it handles,
//! never a connection once).
//!
//! Raft's own traffic and the broker lifecycle (registration, heartbeats,
//! ISR changes, producer id blocks, fencing, remote segment metadata) need
//! `ClusterAction` on the cluster, as Kafka's inter-broker and Raft RPCs
//! do. A metadata change
//! needs exactly what the same change needs through the Kafka API:
//! CreateAcls and DeleteAcls ALTER on the cluster, a topic's creation
//! CREATE on the cluster or the topic, and so on. A broker that passes a
//! client's change on therefore sends it under its own principal, which
//! Kafka's deployments make a super user.

use crate::acl::{AclOperation, ResourceType, CLUSTER_RESOURCE_NAME};
use crate::command::Command;

/// One check: `operation` on the resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Needed<'a> {
    pub(crate) operation: AclOperation,
    pub(crate) resource_type: ResourceType,
    pub(crate) name: &'a str,
}

impl<'a> Needed<'a> {
    const fn on_cluster(operation: AclOperation) -> Self {
        Self {
            operation,
            resource_type: ResourceType::Cluster,
            name: CLUSTER_RESOURCE_NAME,
        }
    }

    const fn on(operation: AclOperation, resource_type: ResourceType, name: &'a str) -> Self {
        Self {
            operation,
            resource_type,
            name,
        }
    }
}

/// The checks of Raft's RPCs and of the broker lifecycle.
pub(crate) const CLUSTER_ACTION: Needed<'static> = Needed::on_cluster(AclOperation::ClusterAction);

/// What proposing `command` needs: any one of the returned checks passes
/// it (a topic may be created with CREATE on the cluster or on the topic).
pub(crate) fn needed_for(command: &Command) -> Vec<Needed<'_>> {
    use AclOperation::{Alter, AlterConfigs, Create, Delete};
    match command {
        Command::RegisterBroker(_)
        | Command::FenceBroker { .. }
        | Command::ControlledShutdown { .. }
        | Command::ReplicasOffline { .. }
        | Command::ElectPreferredLeaders
        | Command::AlterPartition { .. }
        | Command::SetClusterId { .. }
        | Command::AllocateProducerIds { .. }
        // Tiered storage metadata, written by partition leaders and by the
        // brokers that delete remote objects (Kafka's brokers write it to
        // `__remote_log_metadata` as inter-broker traffic).
        | Command::RemoteSegmentCopyStarted { .. }
        | Command::RemoteSegmentCopyFinished { .. }
        | Command::RemoteSegmentsDeleteStarted { .. }
        | Command::RemoteSegmentsDeleteFinished { .. }
        | Command::RemoteTopicPurged { .. }
        // A mirror partition's leader reporting its cut.
        | Command::MirrorPartitionStopped { .. }
        | Command::MirrorPartitionPrepared { .. } => vec![CLUSTER_ACTION],
        Command::CreateTopic { name, .. } => creating(name),
        // Each topic needs its own: see `requirements`.
        Command::CreateTopics { .. } => vec![Needed::on_cluster(Create)],
        Command::DeleteTopic { name } => vec![Needed::on(Delete, ResourceType::Topic, name)],
        Command::CreatePartitions { name, .. } => {
            vec![Needed::on(Alter, ResourceType::Topic, name)]
        }
        Command::AlterTopicConfigs { name, .. } => {
            vec![Needed::on(AlterConfigs, ResourceType::Topic, name)]
        }
        Command::AlterBrokerConfigs { .. } | Command::AlterClientQuotas { .. } => {
            vec![Needed::on_cluster(AlterConfigs)]
        }
        Command::AlterGroupConfigs { group, .. } => {
            vec![Needed::on(AlterConfigs, ResourceType::Group, group)]
        }
        Command::ReassignPartition { .. }
        | Command::AlterUserScramCredentials { .. }
        | Command::CreateAcls { .. }
        | Command::DeleteAcls { .. }
        | Command::ElectLeaders { .. }
        | Command::SetFeatureLevel { .. }
        // Mirrors, as KIP-1279 has them: ALTER on the cluster.
        | Command::CreateMirror { .. }
        | Command::DeleteMirror { .. }
        | Command::SetMirrorPaused { .. }
        | Command::CreateMirrorTopics { .. }
        | Command::FailOverMirror { .. }
        | Command::FailBackMirrorTopics { .. } => vec![Needed::on_cluster(Alter)],
    }
}

/// What proposing `command` needs: every returned group must pass, each
/// by any one of its checks. One group, [`needed_for`], but for
/// [`Command::CreateTopics`], whose every topic needs CREATE on the cluster
/// or on itself, as when created alone.
pub(crate) fn requirements(command: &Command) -> Vec<Vec<Needed<'_>>> {
    match command {
        Command::CreateTopics { topics } => topics.iter().map(|t| creating(&t.name)).collect(),
        other => vec![needed_for(other)],
    }
}

/// Creating topic `name`: CREATE on the cluster or on the topic.
fn creating(name: &str) -> Vec<Needed<'_>> {
    vec![
        Needed::on_cluster(AclOperation::Create),
        Needed::on(AclOperation::Create, ResourceType::Topic, name),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acl_and_user_changes_need_alter_on_the_cluster_not_cluster_action() {
        for command in [
            Command::CreateAcls {
                bindings: Vec::new(),
            },
            Command::DeleteAcls {
                filters: Vec::new(),
            },
            Command::AlterUserScramCredentials {
                deletions: Vec::new(),
                upsertions: Vec::new(),
            },
        ] {
            assert_eq!(
                needed_for(&command),
                vec![Needed::on_cluster(AclOperation::Alter)]
            );
        }
    }

    #[test]
    fn a_topic_is_created_with_create_on_the_cluster_or_on_the_topic() {
        let command = Command::CreateTopic {
            name: "orders".into(),
            id: uuid::Uuid::from_u128(1),
            partitions: 1,
            replicas: vec![vec![1]],
            configs: Default::default(),
            internal: false,
        };
        assert_eq!(
            needed_for(&command),
            vec![
                Needed::on_cluster(AclOperation::Create),
                Needed::on(AclOperation::Create, ResourceType::Topic, "orders"),
            ]
        );
    }

    #[test]
    fn each_topic_of_a_batch_needs_create_on_the_cluster_or_on_itself() {
        let topic = |name: &str| crate::command::TopicCreation {
            name: name.into(),
            id: uuid::Uuid::from_u128(1),
            replicas: vec![vec![1]],
            configs: Default::default(),
            internal: false,
        };
        let command = Command::CreateTopics {
            topics: vec![topic("a"), topic("b")],
        };
        let creating = |name| {
            vec![
                Needed::on_cluster(AclOperation::Create),
                Needed::on(AclOperation::Create, ResourceType::Topic, name),
            ]
        };
        assert_eq!(requirements(&command), vec![creating("a"), creating("b")]);
    }
}
