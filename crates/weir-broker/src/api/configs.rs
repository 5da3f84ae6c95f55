//! DescribeConfigs for topics and this broker.

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::RequestContext;
use crate::broker::Broker;
use crate::config::BROKER_CONFIGS;
use crate::topic_configs::{self, ConfigSource};

const TOPIC: i8 = 2;
const BROKER: i8 = 4;

pub(super) fn describe_configs(
    broker: &Broker,
    _ctx: &RequestContext,
    request: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let results = request
        .resources
        .into_iter()
        .map(|resource| {
            let name = resource.resource_name.to_string();
            let wanted = |config: &str| {
                resource
                    .configuration_keys
                    .as_ref()
                    .is_none_or(|keys| keys.iter().any(|k| k.as_str() == config))
            };
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            let entry =
                |name: &str, value: &str, source: ConfigSource, config_type: i8, doc: &str| {
                    DescribeConfigsResourceResult::default()
                        .with_name(StrBytes::from_string(name.to_owned()))
                        .with_value(Some(StrBytes::from_string(value.to_owned())))
                        .with_config_source(source as i8)
                        .with_config_type(config_type)
                        .with_documentation(
                            request
                                .include_documentation
                                .then(|| StrBytes::from_string(doc.to_owned())),
                        )
                };
            match resource.resource_type {
                TOPIC => {
                    let Some(overrides) =
                        broker.with_image(|image| image.topic(&name).map(|t| t.configs.clone()))
                    else {
                        return result
                            .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                            .with_error_message(Some(StrBytes::from_string(format!(
                                "Topic '{name}' does not exist."
                            ))));
                    };
                    let configs = topic_configs::effective(broker.config(), &overrides)
                        .into_iter()
                        .filter(|c| wanted(c.def.name))
                        .map(|c| {
                            entry(
                                c.def.name,
                                &c.value,
                                c.source,
                                c.def.config_type.describe_configs_type(),
                                c.def.doc,
                            )
                        })
                        .collect();
                    result.with_configs(configs)
                }
                BROKER if name.is_empty() || name == broker.config().node_id.to_string() => {
                    let config = broker.config();
                    let configs = BROKER_CONFIGS
                        .iter()
                        .filter(|def| wanted(def.name))
                        .map(|def| {
                            let source = if config.overridden.iter().any(|o| o == def.name) {
                                ConfigSource::StaticBrokerConfig
                            } else {
                                ConfigSource::DefaultConfig
                            };
                            entry(def.name, &config.values[def.name], source, 0, def.doc)
                                .with_read_only(true)
                        })
                        .collect();
                    result.with_configs(configs)
                }
                BROKER => result
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "Broker id {name} is not this broker ({})",
                        broker.config().node_id
                    )))),
                other => result
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "Unsupported resource type {other}"
                    )))),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}
