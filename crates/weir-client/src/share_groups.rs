//! Share groups (KIP-932) for operators: ShareGroupDescribe and
//! DescribeShareGroupOffsets.

use kafka_protocol::messages::alter_share_group_offsets_request::{
    AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, ApiKey,
    DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, GroupId,
    ShareGroupDescribeRequest, ShareGroupDescribeResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::admin::with_subject;
use crate::error::{check, ClientError};
use crate::Client;

/// A share group as ShareGroupDescribe tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareGroupDescription {
    pub group_id: String,
    /// `Empty` or `Stable`.
    pub state: String,
    pub group_epoch: i32,
    pub members: Vec<ShareGroupMember>,
}

/// One member of a [`ShareGroupDescription`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareGroupMember {
    pub member_id: String,
    pub member_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    /// The partitions it fetches from, sorted (a partition may have
    /// several members).
    pub assignment: Vec<(String, i32)>,
}

/// Where a share group stands in one partition.
#[derive(Debug)]
pub struct ShareGroupOffset {
    pub topic: String,
    pub partition: i32,
    /// The share-partition start offset: every record before it is
    /// acknowledged or archived; `None` while the group has no state for
    /// the partition.
    pub start_offset: Result<Option<i64>, ClientError>,
}

fn group_id(group: &str) -> GroupId {
    GroupId(StrBytes::from_string(group.to_owned()))
}

impl Client {
    /// Describes the share group `group` (on its coordinator).
    pub async fn describe_share_group(
        &mut self,
        group: &str,
    ) -> Result<ShareGroupDescription, ClientError> {
        let request = ShareGroupDescribeRequest::default().with_group_ids(vec![group_id(group)]);
        let response: ShareGroupDescribeResponse =
            self.call(ApiKey::ShareGroupDescribe, &request).await?;
        let described = response
            .groups
            .into_iter()
            .next()
            .ok_or_else(|| self.missing("ShareGroupDescribe", group))?;
        check(
            described.error_code,
            described.error_message.map(|m| m.to_string()),
        )
        .map_err(|e| with_subject(e, "group", group))?;
        Ok(ShareGroupDescription {
            group_id: described.group_id.0.to_string(),
            state: described.group_state.to_string(),
            group_epoch: described.group_epoch,
            members: described
                .members
                .into_iter()
                .map(|m| {
                    let assignment = crate::consumer_groups::sorted_partitions(
                        m.assignment
                            .topic_partitions
                            .into_iter()
                            .map(|t| (t.topic_name, t.partitions)),
                    );
                    ShareGroupMember {
                        member_id: m.member_id.to_string(),
                        member_epoch: m.member_epoch,
                        client_id: m.client_id.to_string(),
                        client_host: m.client_host.to_string(),
                        assignment,
                    }
                })
                .collect(),
        })
    }

    /// The start offsets of share group `group` in every partition of the
    /// topics it subscribes to (on its coordinator), sorted.
    pub async fn share_group_offsets(
        &mut self,
        group: &str,
    ) -> Result<Vec<ShareGroupOffset>, ClientError> {
        let request = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
            DescribeShareGroupOffsetsRequestGroup::default()
                .with_group_id(group_id(group))
                .with_topics(None),
        ]);
        let response: DescribeShareGroupOffsetsResponse = self
            .call(ApiKey::DescribeShareGroupOffsets, &request)
            .await?;
        let answer = response
            .groups
            .into_iter()
            .next()
            .ok_or_else(|| self.missing("DescribeShareGroupOffsets", group))?;
        check(
            answer.error_code,
            answer.error_message.map(|m| m.to_string()),
        )
        .map_err(|e| with_subject(e, "group", group))?;
        let mut offsets: Vec<ShareGroupOffset> = answer
            .topics
            .into_iter()
            .flat_map(|t| {
                let topic = t.topic_name.0.to_string();
                t.partitions.into_iter().map(move |p| ShareGroupOffset {
                    topic: topic.clone(),
                    partition: p.partition_index,
                    start_offset: check(p.error_code, p.error_message.map(|m| m.to_string()))
                        .map(|()| (p.start_offset >= 0).then_some(p.start_offset)),
                })
            })
            .collect();
        offsets.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        Ok(offsets)
    }

    /// Starts the share-partitions of `group` in `offsets` (topic,
    /// partition, start offset) over at those offsets, nothing in flight;
    /// only while the group has no members. The first partition error
    /// fails the call.
    pub async fn alter_share_group_offsets(
        &mut self,
        group: &str,
        offsets: &[(String, i32, i64)],
    ) -> Result<(), ClientError> {
        let mut topics: Vec<AlterShareGroupOffsetsRequestTopic> = Vec::new();
        for (topic, partition, offset) in offsets {
            let partition = AlterShareGroupOffsetsRequestPartition::default()
                .with_partition_index(*partition)
                .with_start_offset(*offset);
            match topics.iter_mut().find(|t| t.topic_name.0.as_str() == topic) {
                Some(t) => t.partitions.push(partition),
                None => topics.push(
                    AlterShareGroupOffsetsRequestTopic::default()
                        .with_topic_name(TopicName(StrBytes::from_string(topic.clone())))
                        .with_partitions(vec![partition]),
                ),
            }
        }
        let request = AlterShareGroupOffsetsRequest::default()
            .with_group_id(group_id(group))
            .with_topics(topics);
        let response: AlterShareGroupOffsetsResponse =
            self.call(ApiKey::AlterShareGroupOffsets, &request).await?;
        check(
            response.error_code,
            response.error_message.map(|m| m.to_string()),
        )
        .map_err(|e| with_subject(e, "group", group))?;
        for topic in response.responses {
            for p in topic.partitions {
                let subject = format!("{}-{}", topic.topic_name.0, p.partition_index);
                check(p.error_code, p.error_message.map(|m| m.to_string()))
                    .map_err(|e| with_subject(e, "partition", &subject))?;
            }
        }
        Ok(())
    }
}
