//! DescribeCluster: the brokers and the controller.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::broker::Broker;

pub(super) fn describe_cluster(
    broker: &Broker,
    _ctx: &RequestContext,
    _request: DescribeClusterRequest,
) -> DescribeClusterResponse {
    let brokers = broker.with_image(|image| {
        image
            .brokers()
            .map(|b| {
                DescribeClusterBroker::default()
                    .with_broker_id(BrokerId(b.id))
                    .with_host(StrBytes::from_string(b.host.clone()))
                    .with_port(i32::from(b.port))
                    .with_rack(b.rack.clone().map(StrBytes::from_string))
            })
            .collect()
    });
    DescribeClusterResponse::default()
        .with_cluster_id(StrBytes::from_string(broker.cluster_id().to_owned()))
        .with_controller_id(BrokerId(broker.config().node_id))
        .with_brokers(brokers)
}
