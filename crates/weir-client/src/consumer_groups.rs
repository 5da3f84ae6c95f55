//! ConsumerGroupDescribe: groups of the consumer protocol (KIP-848), with
//! their epochs, assignor, and each member's assignment and target.

use kafka_protocol::messages::consumer_group_describe_response::Assignment;
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, GroupId, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::admin::with_subject;
use crate::error::{check, ClientError};
use crate::groups::{coordinator_loading, retry_while};
use crate::Client;

/// A consumer group as ConsumerGroupDescribe tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupDescription {
    pub group_id: String,
    /// `Empty`, `Assigning`, `Reconciling` or `Stable`.
    pub state: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    /// The server-side assignor, e.g. `uniform`.
    pub assignor: String,
    pub members: Vec<ConsumerGroupMember>,
}

/// One member of a [`ConsumerGroupDescription`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub member_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    /// The partitions the member owns now, sorted.
    pub assignment: Vec<(String, i32)>,
    /// The partitions it is reconciling towards, sorted.
    pub target_assignment: Vec<(String, i32)>,
    /// Whether it speaks the classic protocol (ConsumerGroupDescribe v1's
    /// member type 0): a classic member in a consumer group.
    pub classic: bool,
}

fn partitions(assignment: Assignment) -> Vec<(String, i32)> {
    sorted_partitions(
        assignment
            .topic_partitions
            .into_iter()
            .map(|t| (t.topic_name, t.partitions)),
    )
}

/// Each (topic, partitions) as (topic, partition) pairs, sorted.
pub(crate) fn sorted_partitions(
    topics: impl IntoIterator<Item = (TopicName, Vec<i32>)>,
) -> Vec<(String, i32)> {
    let mut partitions: Vec<(String, i32)> = topics
        .into_iter()
        .flat_map(|(name, partitions)| {
            let topic = name.0.to_string();
            partitions.into_iter().map(move |p| (topic.clone(), p))
        })
        .collect();
    partitions.sort();
    partitions
}

impl Client {
    /// Describes `groups` as consumer groups, in the order asked: `None`
    /// for a group that is not one (a classic group, or none at all), and
    /// for every group when the broker does not speak ConsumerGroupDescribe.
    /// Asked again while the coordinator is still loading a group.
    pub async fn describe_consumer_groups(
        &mut self,
        groups: &[&str],
    ) -> Result<Vec<Option<ConsumerGroupDescription>>, ClientError> {
        retry_while!(
            self,
            coordinator_loading,
            self.describe_consumer_groups_once(groups)
        )
    }

    async fn describe_consumer_groups_once(
        &mut self,
        groups: &[&str],
    ) -> Result<Vec<Option<ConsumerGroupDescription>>, ClientError> {
        let Some(version) = self.version(ApiKey::ConsumerGroupDescribe) else {
            return Ok(vec![None; groups.len()]);
        };
        let request = ConsumerGroupDescribeRequest::default().with_group_ids(
            groups
                .iter()
                .map(|g| GroupId(StrBytes::from_string((*g).to_owned())))
                .collect(),
        );
        let response: ConsumerGroupDescribeResponse = self
            .call_version(ApiKey::ConsumerGroupDescribe, version, &request)
            .await?;
        let mut described = Vec::with_capacity(groups.len());
        for wanted in groups {
            let Some(group) = response
                .groups
                .iter()
                .find(|g| g.group_id.as_str() == *wanted)
            else {
                described.push(None);
                continue;
            };
            if group.error_code == ResponseError::GroupIdNotFound.code() {
                described.push(None);
                continue;
            }
            check(
                group.error_code,
                group.error_message.as_ref().map(|m| m.to_string()),
            )
            .map_err(|e| with_subject(e, "group", wanted))?;
            let group = group.clone();
            described.push(Some(ConsumerGroupDescription {
                group_id: group.group_id.0.to_string(),
                state: group.group_state.to_string(),
                group_epoch: group.group_epoch,
                assignment_epoch: group.assignment_epoch,
                assignor: group.assignor_name.to_string(),
                members: group
                    .members
                    .into_iter()
                    .map(|m| ConsumerGroupMember {
                        member_id: m.member_id.to_string(),
                        instance_id: m.instance_id.map(|s| s.to_string()),
                        member_epoch: m.member_epoch,
                        client_id: m.client_id.to_string(),
                        client_host: m.client_host.to_string(),
                        subscribed_topic_names: m
                            .subscribed_topic_names
                            .iter()
                            .map(|t| t.0.to_string())
                            .collect(),
                        subscribed_topic_regex: m.subscribed_topic_regex.map(|s| s.to_string()),
                        assignment: partitions(m.assignment),
                        target_assignment: partitions(m.target_assignment),
                        classic: m.member_type == 0,
                    })
                    .collect(),
            }));
        }
        Ok(described)
    }
}
