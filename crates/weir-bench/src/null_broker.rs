//! `null-broker`: the least a Kafka broker can be for a client. It
//! answers ApiVersions, Metadata (every topic asked for exists, with N
//! partitions led by this one node), Produce (every partition
//! acknowledged at once with increasing base offsets, nothing stored;
//! acks=0 gets no response), ListOffsets (every log starts at 0) and Fetch
//! (an endless log: copies of one prebuilt batch of records of
//! `--record-size` bytes, renumbered from the offset asked for), and closes
//! the connection on anything else.
//!
//! The same client benchmarked against it and against a real broker gives
//! the client's own ceiling on this machine, and so how much of the
//! difference is the broker's.
//!
//! Each connection is one task: it decodes every complete request in its
//! input buffer, appends the responses to an output buffer in request order
//! and writes them in one go, so pipelined requests get pipelined answers.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context as _};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, FetchRequest, FetchResponse, ListOffsetsRequest,
    ListOffsetsResponse, MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse,
    RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::ResponseError;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The APIs served, with the versions advertised: those librdkafka 2.12
/// uses for producing (it caps them at its own maximum).
const SERVED: [(ApiKey, i16, i16); 5] = [
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::Produce, 3, 9),
    (ApiKey::ListOffsets, 1, 7),
    (ApiKey::Fetch, 4, 11),
];

/// The size of the batch a fetch returns copies of.
const FETCH_BATCH_BYTES: usize = 256 * 1024;

/// The high watermark of the endless log: far beyond any benchmark.
const ENDLESS: i64 = 1 << 50;

/// This node's id.
const NODE_ID: i32 = 1;

/// The largest request accepted (Kafka's `socket.request.max.bytes`).
const MAX_REQUEST: usize = 100 * 1024 * 1024;

/// Runs until the process is stopped (Ctrl-C exits cleanly).
pub(crate) fn run(listen: &str, partitions: i32, record_size: usize) -> anyhow::Result<()> {
    anyhow::ensure!(partitions >= 1, "--partitions must be at least 1");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(async {
        let listener = TcpListener::bind(listen)
            .await
            .with_context(|| format!("listening on {listen}"))?;
        let address = advertised(listener.local_addr()?);
        println!("weir-bench null-broker ready: kafka={address} partitions={partitions}");
        let state = Arc::new(State::new(address, partitions).with_fetch_batch(record_size));
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let (stream, _) = accepted.context("accepting a connection")?;
                    let state = state.clone();
                    tokio::spawn(async move {
                        if let Err(error) = serve(stream, &state).await {
                            eprintln!("weir-bench null-broker: connection closed: {error:#}");
                        }
                    });
                }
                _ = tokio::signal::ctrl_c() => return Ok(()),
            }
        }
    })
}

/// The address clients are told to use: the listener's, with loopback in
/// place of an unspecified IP.
fn advertised(mut address: SocketAddr) -> SocketAddr {
    if address.ip().is_unspecified() {
        address.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    address
}

/// The broker's only state: the next offset of every partition it was sent.
#[derive(Debug)]
struct State {
    address: SocketAddr,
    partitions: i32,
    next_offsets: Mutex<HashMap<String, Vec<i64>>>,
    /// The batch fetches return, and how many records it holds.
    fetch_batch: Bytes,
    fetch_batch_records: i64,
}

impl State {
    fn new(address: SocketAddr, partitions: i32) -> Self {
        Self {
            address,
            partitions,
            next_offsets: Mutex::new(HashMap::new()),
            fetch_batch: Bytes::new(),
            fetch_batch_records: 0,
        }
    }

    /// Fetches return copies of one batch of records of `record_size` bytes.
    fn with_fetch_batch(mut self, record_size: usize) -> Self {
        use kafka_protocol::records::{
            Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
        };
        let count = (FETCH_BATCH_BYTES / (record_size + 16)).max(1);
        let value = Bytes::from(vec![b'x'; record_size]);
        let records: Vec<Record> = (0..count)
            .map(|i| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                // One batch needs offset - sequence constant; only the base
                // sequence (-1: no producer) is encoded.
                sequence: i as i32 - 1,
                timestamp: 0,
                key: None,
                value: Some(value.clone()),
                headers: Default::default(),
            })
            .collect();
        let mut batch = BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        RecordBatchEncoder::encode(&mut batch, &records, &options).expect("a batch encodes");
        self.fetch_batch = batch.freeze();
        self.fetch_batch_records = count as i64;
        self
    }

    /// Every log starts at offset 0 and never ends.
    fn list_offsets(&self, request: ListOffsetsRequest) -> ListOffsetsResponse {
        use kafka_protocol::messages::list_offsets_response::{
            ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
        };
        let topics = request
            .topics
            .into_iter()
            .map(|topic| {
                let partitions = topic
                    .partitions
                    .into_iter()
                    .map(|p| {
                        let offset = if p.timestamp == -1 { ENDLESS } else { 0 };
                        ListOffsetsPartitionResponse::default()
                            .with_partition_index(p.partition_index)
                            .with_timestamp(-1)
                            .with_offset(offset)
                    })
                    .collect();
                ListOffsetsTopicResponse::default()
                    .with_name(topic.name)
                    .with_partitions(partitions)
            })
            .collect();
        ListOffsetsResponse::default().with_topics(topics)
    }

    /// Copies of the prebuilt batch, renumbered from the fetch offset, up to
    /// the partition's byte limit (at least one).
    fn fetch(&self, request: FetchRequest) -> FetchResponse {
        use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
        let topics = request
            .topics
            .into_iter()
            .map(|topic| {
                let partitions = topic
                    .partitions
                    .into_iter()
                    .map(|p| {
                        let limit = p.partition_max_bytes.max(0) as usize;
                        let copies = (limit / self.fetch_batch.len()).max(1);
                        let mut records = BytesMut::with_capacity(copies * self.fetch_batch.len());
                        for copy in 0..copies as i64 {
                            let base = p.fetch_offset + copy * self.fetch_batch_records;
                            records.put_i64(base);
                            records.put_slice(&self.fetch_batch[8..]);
                        }
                        PartitionData::default()
                            .with_partition_index(p.partition)
                            .with_high_watermark(ENDLESS)
                            .with_last_stable_offset(ENDLESS)
                            .with_log_start_offset(0)
                            .with_records(Some(records.freeze()))
                    })
                    .collect();
                FetchableTopicResponse::default()
                    .with_topic(topic.topic)
                    .with_partitions(partitions)
            })
            .collect();
        FetchResponse::default().with_responses(topics)
    }

    fn metadata(&self, request: MetadataRequest) -> MetadataResponse {
        let broker = MetadataResponseBroker::default()
            .with_node_id(BrokerId(NODE_ID))
            .with_host(StrBytes::from_string(self.address.ip().to_string()))
            .with_port(i32::from(self.address.port()));
        // Every topic asked for exists; a request for all topics gets none.
        let topics = request
            .topics
            .unwrap_or_default()
            .into_iter()
            .map(|topic| match topic.name {
                Some(name) => MetadataResponseTopic::default()
                    .with_topic_id(topic_id(&name))
                    .with_name(Some(name))
                    .with_partitions(
                        (0..self.partitions)
                            .map(|index| {
                                MetadataResponsePartition::default()
                                    .with_partition_index(index)
                                    .with_leader_id(BrokerId(NODE_ID))
                                    .with_replica_nodes(vec![BrokerId(NODE_ID)])
                                    .with_isr_nodes(vec![BrokerId(NODE_ID)])
                            })
                            .collect(),
                    ),
                None => MetadataResponseTopic::default()
                    .with_topic_id(topic.topic_id)
                    .with_error_code(ResponseError::UnknownTopicId.code()),
            })
            .collect();
        MetadataResponse::default()
            .with_brokers(vec![broker])
            .with_cluster_id(Some(StrBytes::from_static_str("weir-bench-null")))
            .with_controller_id(BrokerId(NODE_ID))
            .with_topics(topics)
    }

    fn produce(&self, request: ProduceRequest) -> ProduceResponse {
        let mut next_offsets = self.next_offsets.lock().expect("offsets lock");
        let responses = request
            .topic_data
            .into_iter()
            .map(|topic| {
                if !next_offsets.contains_key(topic.name.0.as_str()) {
                    next_offsets
                        .insert(topic.name.0.to_string(), vec![0; self.partitions as usize]);
                }
                let offsets = next_offsets
                    .get_mut(topic.name.0.as_str())
                    .expect("just inserted");
                let partitions = topic
                    .partition_data
                    .into_iter()
                    .map(|data| {
                        let response = PartitionProduceResponse::default()
                            .with_index(data.index)
                            .with_log_append_time_ms(-1);
                        let Some(next) = usize::try_from(data.index)
                            .ok()
                            .and_then(|i| offsets.get_mut(i))
                        else {
                            return response
                                .with_error_code(ResponseError::UnknownTopicOrPartition.code());
                        };
                        let base = *next;
                        *next += record_count(data.records.as_deref().unwrap_or_default());
                        response.with_base_offset(base)
                    })
                    .collect();
                TopicProduceResponse::default()
                    .with_name(topic.name)
                    .with_partition_responses(partitions)
            })
            .collect();
        ProduceResponse::default().with_responses(responses)
    }
}

/// A topic id made from the name, the same for every request.
fn topic_id(name: &str) -> uuid::Uuid {
    // FNV-1a, twice with different offsets: stable across runs and builds.
    let fnv = |seed: u64| {
        name.bytes().fold(seed, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    uuid::Uuid::from_u64_pair(fnv(0xcbf2_9ce4_8422_2325), fnv(0x8422_2325_cbf2_9ce4) | 1)
}

/// The offsets a record set takes: `lastOffsetDelta + 1` of each v2 batch
/// whose header is there (anything after it too short for a header, or in
/// an older message format, counts one).
fn record_count(mut records: &[u8]) -> i64 {
    // baseOffset 8, batchLength 4, partitionLeaderEpoch 4, magic 1, crc 4,
    // attributes 2, then lastOffsetDelta.
    const BATCH_LENGTH: usize = 8;
    const MAGIC: usize = 16;
    const LAST_OFFSET_DELTA: usize = 23;
    let mut count = 0;
    while records.len() >= LAST_OFFSET_DELTA + 4 && records[MAGIC] == 2 {
        let length = i32::from_be_bytes(
            records[BATCH_LENGTH..BATCH_LENGTH + 4]
                .try_into()
                .expect("4 bytes"),
        );
        let delta = i32::from_be_bytes(
            records[LAST_OFFSET_DELTA..LAST_OFFSET_DELTA + 4]
                .try_into()
                .expect("4 bytes"),
        );
        count += i64::from(delta.max(0)) + 1;
        let Some(next) = usize::try_from(length)
            .ok()
            .and_then(|length| records.get(12 + length..))
        else {
            return count;
        };
        records = next;
    }
    count + i64::from(!records.is_empty())
}

/// The versions served, with `error_code` (0 for none).
fn api_versions(error_code: i16) -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(error_code)
        .with_api_keys(
            SERVED
                .iter()
                .map(|&(key, min, max)| {
                    ApiVersion::default()
                        .with_api_key(key as i16)
                        .with_min_version(min)
                        .with_max_version(max)
                })
                .collect(),
        )
}

fn served(key: ApiKey, version: i16) -> bool {
    SERVED
        .iter()
        .any(|&(k, min, max)| k == key && (min..=max).contains(&version))
}

/// One connection: requests in, responses out, in order.
async fn serve(stream: TcpStream, state: &State) -> anyhow::Result<()> {
    stream.set_nodelay(true)?;
    let (mut reader, mut writer) = stream.into_split();
    let mut input = BytesMut::with_capacity(256 * 1024);
    let mut output = BytesMut::with_capacity(64 * 1024);
    loop {
        let mut open = true;
        while open && input.len() >= 4 {
            let size = i32::from_be_bytes(input[..4].try_into().expect("4 bytes"));
            let Some(size) = usize::try_from(size).ok().filter(|&s| s <= MAX_REQUEST) else {
                bail!("request of {size} bytes");
            };
            if input.len() < 4 + size {
                input.reserve(4 + size - input.len());
                break;
            }
            input.advance(4);
            let request = input.split_to(size).freeze();
            open = respond(state, request, &mut output)?;
        }
        if !output.is_empty() {
            writer.write_all(&output).await?;
            output.clear();
        }
        if !open {
            return Ok(());
        }
        if input.capacity() - input.len() < 16 * 1024 {
            input.reserve(64 * 1024);
        }
        if reader.read_buf(&mut input).await? == 0 {
            return Ok(());
        }
    }
}

/// Appends the response to `request` (if it gets one) to `output`; false
/// if the connection is to be closed.
fn respond(state: &State, mut request: Bytes, output: &mut BytesMut) -> anyhow::Result<bool> {
    if request.len() < 8 {
        bail!("request shorter than a header");
    }
    let raw_key = i16::from_be_bytes([request[0], request[1]]);
    let version = i16::from_be_bytes([request[2], request[3]]);
    let correlation_id = i32::from_be_bytes([request[4], request[5], request[6], request[7]]);
    let key = match ApiKey::try_from(raw_key) {
        Ok(ApiKey::ApiVersions) if !served(ApiKey::ApiVersions, version) => {
            // Kafka's answer to an ApiVersions it does not know: v0 with
            // UNSUPPORTED_VERSION and the versions it has, so the client
            // asks again with one of them.
            let body = api_versions(ResponseError::UnsupportedVersion.code());
            encode(output, ApiKey::ApiVersions, 0, correlation_id, &body);
            return Ok(true);
        }
        Ok(key) if served(key, version) => key,
        _ => {
            eprintln!(
                "weir-bench null-broker: closing a connection: API key {raw_key} v{version} is not served"
            );
            return Ok(false);
        }
    };
    RequestHeader::decode(&mut request, key.request_header_version(version))
        .context("decoding a request header")?;
    match key {
        ApiKey::ApiVersions => {
            let body = api_versions(0);
            encode(output, key, version, correlation_id, &body);
        }
        ApiKey::Metadata => {
            let body = MetadataRequest::decode(&mut request, version)
                .context("decoding a Metadata request")?;
            encode(output, key, version, correlation_id, &state.metadata(body));
        }
        ApiKey::Produce => {
            let body = ProduceRequest::decode(&mut request, version)
                .context("decoding a Produce request")?;
            let acks = body.acks;
            let response = state.produce(body);
            if acks != 0 {
                encode(output, key, version, correlation_id, &response);
            }
        }
        ApiKey::ListOffsets => {
            let body = ListOffsetsRequest::decode(&mut request, version)
                .context("decoding a ListOffsets request")?;
            encode(
                output,
                key,
                version,
                correlation_id,
                &state.list_offsets(body),
            );
        }
        ApiKey::Fetch => {
            let body =
                FetchRequest::decode(&mut request, version).context("decoding a Fetch request")?;
            encode(output, key, version, correlation_id, &state.fetch(body));
        }
        _ => unreachable!("only served APIs get here"),
    }
    Ok(true)
}

/// Appends a size-prefixed response to `output`.
fn encode<R: Encodable>(
    output: &mut BytesMut,
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &R,
) {
    let start = output.len();
    output.put_i32(0);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(output, key.response_header_version(version))
        .expect("response header encodes");
    body.encode(output, version)
        .expect("responses are built within their version's schema");
    let size = (output.len() - start - 4) as i32;
    output[start..start + 4].copy_from_slice(&size.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::ApiVersionsRequest;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    fn batch(out: &mut BytesMut, records: usize) {
        let records: Vec<Record> = (0..records)
            .map(|i| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                sequence: -1,
                timestamp: 0,
                key: None,
                value: Some(Bytes::from_static(b"value")),
                headers: Default::default(),
            })
            .collect();
        let options = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        RecordBatchEncoder::encode(out, &records, &options).unwrap();
    }

    #[test]
    fn record_sets_take_one_offset_per_record() {
        let mut records = BytesMut::new();
        batch(&mut records, 3);
        assert_eq!(record_count(&records), 3);
        let first = records.len();
        batch(&mut records, 5);
        assert_eq!(record_count(&records), 8);
        // A batch cut short counts what its header says; a piece too
        // short for a header counts one.
        assert_eq!(record_count(&records[..records.len() - 1]), 8);
        assert_eq!(record_count(&records[..first + 10]), 4);
        assert_eq!(record_count(&[]), 0);
    }

    /// A request frame body (without the size prefix).
    fn request<R: Encodable>(key: ApiKey, version: i16, correlation_id: i32, body: &R) -> Bytes {
        let mut buf = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .encode(&mut buf, key.request_header_version(version))
            .unwrap();
        body.encode(&mut buf, version).unwrap();
        buf.freeze()
    }

    /// The response in `output`: correlation id and body.
    fn response<R: Decodable>(output: &mut BytesMut, key: ApiKey, version: i16) -> (i32, R) {
        let size = output.get_i32() as usize;
        let mut frame = output.split_to(size).freeze();
        let header =
            ResponseHeader::decode(&mut frame, key.response_header_version(version)).unwrap();
        (
            header.correlation_id,
            R::decode(&mut frame, version).unwrap(),
        )
    }

    fn state() -> State {
        State::new("127.0.0.1:9999".parse().unwrap(), 2)
    }

    #[test]
    fn api_versions_lists_what_is_served_and_answers_newer_versions_with_v0() {
        let state = state();
        let mut output = BytesMut::new();
        let body = ApiVersionsRequest::default();
        assert!(respond(
            &state,
            request(ApiKey::ApiVersions, 3, 7, &body),
            &mut output
        )
        .unwrap());
        let (id, versions): (_, ApiVersionsResponse) =
            response(&mut output, ApiKey::ApiVersions, 3);
        assert_eq!(id, 7);
        assert_eq!(versions.error_code, 0);
        let keys: Vec<_> = versions
            .api_keys
            .iter()
            .map(|v| (v.api_key, v.min_version, v.max_version))
            .collect();
        assert_eq!(
            keys,
            vec![(18, 0, 3), (3, 0, 12), (0, 3, 9), (2, 1, 7), (1, 4, 11)]
        );

        assert!(respond(
            &state,
            request(ApiKey::ApiVersions, 4, 8, &body),
            &mut output
        )
        .unwrap());
        let (id, versions): (_, ApiVersionsResponse) =
            response(&mut output, ApiKey::ApiVersions, 0);
        assert_eq!(id, 8);
        assert_eq!(
            versions.error_code,
            ResponseError::UnsupportedVersion.code()
        );
        assert_eq!(versions.api_keys.len(), SERVED.len());
    }

    #[test]
    fn every_topic_asked_for_exists_and_produce_offsets_increase() {
        use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
        use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
        use kafka_protocol::messages::TopicName;

        let state = state();
        let mut output = BytesMut::new();
        let name = TopicName(StrBytes::from_static_str("t"));
        let metadata = MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name.clone())),
        ]));
        assert!(respond(
            &state,
            request(ApiKey::Metadata, 12, 1, &metadata),
            &mut output
        )
        .unwrap());
        let (_, metadata): (_, MetadataResponse) = response(&mut output, ApiKey::Metadata, 12);
        assert_eq!(metadata.brokers.len(), 1);
        assert_eq!(metadata.brokers[0].port, 9999);
        let topic = &metadata.topics[0];
        assert_eq!(topic.error_code, 0);
        assert_eq!(topic.name.as_ref(), Some(&name));
        assert_eq!(topic.topic_id, topic_id("t"));
        assert_eq!(topic.partitions.len(), 2);
        assert!(topic
            .partitions
            .iter()
            .all(|p| p.leader_id == BrokerId(NODE_ID)));

        let mut records = BytesMut::new();
        batch(&mut records, 4);
        let records = records.freeze();
        let produce = |acks: i16| {
            ProduceRequest::default()
                .with_acks(acks)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(name.clone())
                    .with_partition_data(vec![
                        PartitionProduceData::default()
                            .with_index(1)
                            .with_records(Some(records.clone())),
                        PartitionProduceData::default()
                            .with_index(2)
                            .with_records(Some(records.clone())),
                    ])])
        };
        for (correlation_id, base) in [(2, 0), (3, 4)] {
            let frame = request(ApiKey::Produce, 9, correlation_id, &produce(1));
            assert!(respond(&state, frame, &mut output).unwrap());
            let (id, response): (_, ProduceResponse) = response(&mut output, ApiKey::Produce, 9);
            assert_eq!(id, correlation_id);
            let partitions = &response.responses[0].partition_responses;
            assert_eq!(
                (partitions[0].error_code, partitions[0].base_offset),
                (0, base)
            );
            assert_eq!(
                partitions[1].error_code,
                ResponseError::UnknownTopicOrPartition.code()
            );
        }
        // acks=0: counted, not answered.
        assert!(respond(
            &state,
            request(ApiKey::Produce, 9, 4, &produce(0)),
            &mut output
        )
        .unwrap());
        assert!(output.is_empty());
        assert!(respond(
            &state,
            request(ApiKey::Produce, 9, 5, &produce(1)),
            &mut output
        )
        .unwrap());
        let (_, response): (_, ProduceResponse) = response(&mut output, ApiKey::Produce, 9);
        assert_eq!(response.responses[0].partition_responses[0].base_offset, 12);
    }

    #[test]
    fn anything_else_closes_the_connection() {
        let state = state();
        let mut output = BytesMut::new();
        let delete = kafka_protocol::messages::DeleteTopicsRequest::default();
        assert!(!respond(
            &state,
            request(ApiKey::DeleteTopics, 4, 1, &delete),
            &mut output
        )
        .unwrap());
        let produce = ProduceRequest::default();
        assert!(!respond(
            &state,
            request(ApiKey::Produce, 10, 1, &produce),
            &mut output
        )
        .unwrap());
        assert!(output.is_empty());
        assert!(respond(&state, Bytes::from_static(&[0, 18]), &mut output).is_err());
    }

    #[test]
    fn fetches_read_an_endless_log_from_the_offset_asked_for() {
        use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
        use kafka_protocol::records::RecordBatchDecoder;
        let state = state().with_fetch_batch(100);
        let fetch = FetchRequest::default().with_topics(vec![FetchTopic::default()
            .with_topic(kafka_protocol::messages::TopicName(
                StrBytes::from_static_str("t"),
            ))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(1234)
                .with_partition_max_bytes(1 << 20)])]);
        let response = state.fetch(fetch);
        let partition = &response.responses[0].partitions[0];
        assert!(state.fetch_batch_records > 1000);
        assert_eq!(partition.high_watermark, ENDLESS);
        let mut records = partition.records.clone().unwrap();
        let mut next = 1234;
        while records.has_remaining() {
            let set = RecordBatchDecoder::decode(&mut records).unwrap();
            for record in set.records {
                assert_eq!(record.offset, next);
                assert_eq!(record.value.unwrap().len(), 100);
                next += 1;
            }
        }
        assert_eq!(next - 1234, 4 * state.fetch_batch_records);
        let offsets = state.list_offsets(ListOffsetsRequest::default().with_topics(vec![
                kafka_protocol::messages::list_offsets_request::ListOffsetsTopic::default()
                    .with_partitions(vec![
                    kafka_protocol::messages::list_offsets_request::ListOffsetsPartition::default()
                        .with_timestamp(-2),
                ]),
            ]));
        assert_eq!(offsets.topics[0].partitions[0].offset, 0);
    }

    #[test]
    fn topic_ids_are_stable_and_distinct() {
        assert_eq!(topic_id("a"), topic_id("a"));
        assert_ne!(topic_id("a"), topic_id("b"));
        assert!(!topic_id("").is_nil());
        assert_eq!(
            advertised("0.0.0.0:9093".parse().unwrap()),
            "127.0.0.1:9093".parse().unwrap()
        );
    }
}
