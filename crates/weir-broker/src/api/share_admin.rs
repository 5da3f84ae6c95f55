//! The operators' view of share groups: DescribeShareGroupOffsets, each
//! share-partition's start offset as `__share_group_state` holds it.

use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup as ResponseGroup,
    DescribeShareGroupOffsetsResponsePartition as ResponsePartition,
    DescribeShareGroupOffsetsResponseTopic as ResponseTopic,
};
use kafka_protocol::messages::{
    DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use weir_meta::{AclOperation, ResourceType};

use super::RequestContext;
use crate::broker::Broker;
use crate::share::state_records::SharePartitionKey;
use crate::share_persister::STATE_LOADING;

fn message(text: String) -> Option<StrBytes> {
    Some(StrBytes::from_string(text))
}

/// DescribeShareGroupOffsets: for each group, the start offset of each
/// share-partition asked for (of every topic it subscribed to when
/// none are named), -1 where it has no state yet. Topics the principal
/// may not describe, and unknown ones, are left out, as Kafka does.
pub(super) fn describe_offsets(
    broker: &Broker,
    ctx: &RequestContext,
    request: DescribeShareGroupOffsetsRequest,
) -> DescribeShareGroupOffsetsResponse {
    let image = broker.image();
    let groups = request
        .groups
        .into_iter()
        .map(|asked| {
            let group = asked.group_id.as_str().to_owned();
            let answer = ResponseGroup::default().with_group_id(asked.group_id.clone());
            if !ctx.authorized(broker, AclOperation::Describe, ResourceType::Group, &group) {
                return answer.with_error_code(ResponseError::GroupAuthorizationFailed.code());
            }
            if let Err(code) = broker.check_coordinator(&group) {
                return answer.with_error_code(code);
            }
            let Some(description) = broker.share_groups().describe(&group) else {
                let text = if broker.groups().state(&group).is_some()
                    || broker.consumer_groups().hosts(&group)
                {
                    format!("Group {group} is not a share group.")
                } else {
                    format!("Group {group} not found.")
                };
                return answer
                    .with_error_code(ResponseError::GroupIdNotFound.code())
                    .with_error_message(message(text));
            };
            let asked_topics: Vec<(String, Option<Vec<i32>>)> = match asked.topics {
                Some(topics) => topics
                    .into_iter()
                    .map(|t| (t.topic_name.0.to_string(), Some(t.partitions)))
                    .collect(),
                None => description
                    .state
                    .topics_seen
                    .iter()
                    .map(|name| (name.clone(), None))
                    .collect(),
            };
            let topics = asked_topics
                .into_iter()
                .filter(|(name, _)| {
                    ctx.authorized(broker, AclOperation::Describe, ResourceType::Topic, name)
                })
                .filter_map(|(name, partitions)| {
                    let topic = image.topic(&name)?;
                    let partitions = partitions
                        .unwrap_or_else(|| (0..topic.partition_count()).collect())
                        .into_iter()
                        .map(|index| {
                            let answer = ResponsePartition::default().with_partition_index(index);
                            if topic.partition(index).is_none() {
                                return answer
                                    .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                                    .with_start_offset(-1)
                                    .with_leader_epoch(-1);
                            }
                            let key = SharePartitionKey {
                                group: group.clone(),
                                topic_id: topic.id,
                                partition: index,
                            };
                            match broker.share_partitions().persisted_start(broker, &key) {
                                Ok(start) => answer
                                    .with_start_offset(start.unwrap_or(-1))
                                    .with_leader_epoch(-1),
                                Err(code) => {
                                    let code = if code == STATE_LOADING {
                                        ResponseError::CoordinatorLoadInProgress.code()
                                    } else {
                                        code
                                    };
                                    answer
                                        .with_error_code(code)
                                        .with_start_offset(-1)
                                        .with_leader_epoch(-1)
                                }
                            }
                        })
                        .collect();
                    Some(
                        ResponseTopic::default()
                            .with_topic_name(TopicName(StrBytes::from_string(name)))
                            .with_topic_id(topic.id)
                            .with_partitions(partitions),
                    )
                })
                .collect();
            answer.with_topics(topics)
        })
        .collect();
    DescribeShareGroupOffsetsResponse::default().with_groups(groups)
}
