//! Topic creation: how long a broker takes to create many topics, as an
//! application creating them through librdkafka's admin API sees it (Kafka's
//! CreateTopics). Every request waits for its topics' commit
//! (`operation_timeout`), so the time runs from the first request to the
//! last answer, and each topic's outcome is checked.

use std::time::{Duration, Instant};

use anyhow::Context;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::ClientConfig;
use serde_json::json;

use crate::CreateTopicsArgs;

/// Creates `args.topics` topics of `args.partitions` partitions, named
/// `{prefix}-{i}`, in requests of `args.per_request` topics, one request at
/// a time; prints the time taken and fails if any topic was not created.
pub(crate) fn run(bootstrap: &str, args: &CreateTopicsArgs, json: bool) -> anyhow::Result<()> {
    // librdkafka drops a request unanswered for `socket.timeout.ms` (60 s):
    // a long operation timeout needs a longer one.
    let socket_timeout = args.operation_timeout + Duration::from_secs(5);
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("socket.timeout.ms", socket_timeout.as_millis().to_string())
        .create()
        .context("creating the librdkafka admin client")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let options = AdminOptions::new()
        .operation_timeout(Some(args.operation_timeout))
        .request_timeout(Some(socket_timeout));
    let names: Vec<String> = (0..args.topics)
        .map(|i| format!("{}-{i}", args.prefix))
        .collect();
    let mut failures = Vec::new();
    let started = Instant::now();
    for chunk in names.chunks(args.per_request.max(1)) {
        let topics: Vec<NewTopic> = chunk
            .iter()
            .map(|name| {
                NewTopic::new(
                    name,
                    args.partitions,
                    TopicReplication::Fixed(args.replication_factor),
                )
            })
            .collect();
        let results = runtime
            .block_on(admin.create_topics(&topics, &options))
            .context("CreateTopics failed")?;
        failures.extend(results.into_iter().filter_map(Result::err));
    }
    let seconds = started.elapsed().as_secs_f64();
    let created = names.len() - failures.len();
    if json {
        println!(
            "{}",
            json!({
                "mode": "create-topics",
                "topics": args.topics,
                "partitions": args.partitions,
                "replication_factor": args.replication_factor,
                "per_request": args.per_request,
                "seconds": (seconds * 1000.0).round() / 1000.0,
                "created": created,
            })
        );
    } else {
        println!(
            "created {created} of {} topics of {} partitions (replication factor {}, {} per request) in {seconds:.3} s",
            args.topics, args.partitions, args.replication_factor, args.per_request
        );
    }
    if let Some((name, error)) = failures.first() {
        anyhow::bail!(
            "{} topics not created; the first, {name}: {error}",
            failures.len()
        );
    }
    Ok(())
}
