//! A bare Kafka protocol connection for tests that need exact bytes.

#![allow(dead_code, unreachable_pub)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

pub struct Raw {
    pub stream: TcpStream,
    next_correlation: i32,
    client_id: String,
}

impl Raw {
    pub fn connect(addr: &str) -> Self {
        Self::connect_as(addr, "raw-test")
    }

    /// Connects as a client with its own `client.id`.
    pub fn connect_as(addr: &str, client_id: &str) -> Self {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Self {
            stream,
            next_correlation: 1,
            client_id: client_id.to_owned(),
        }
    }

    /// A client on a connection already open (say, from another source
    /// address).
    pub fn from_stream(stream: TcpStream) -> Self {
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Self {
            stream,
            next_correlation: 1,
            client_id: "raw-test".to_owned(),
        }
    }

    /// Sends raw frame bytes (size prefix included).
    pub fn send_bytes(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Encodes and sends a request; returns its correlation id.
    pub fn send<R: Encodable>(&mut self, key: ApiKey, version: i16, request: &R) -> i32 {
        let correlation_id = self.next_correlation;
        self.next_correlation += 1;
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_string(self.client_id.clone())));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, key.request_header_version(version))
            .unwrap();
        request.encode(&mut body, version).unwrap();
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        self.stream.write_all(&frame).unwrap();
        correlation_id
    }

    /// Reads one response frame; `None` if the broker closed the connection.
    pub fn read_frame(&mut self) -> Option<Bytes> {
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).ok()?;
        let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut body).ok()?;
        Some(Bytes::from(body))
    }

    pub fn receive<R: Decodable>(&mut self, key: ApiKey, version: i16, correlation_id: i32) -> R {
        let mut frame = self.read_frame().expect("response");
        let header =
            ResponseHeader::decode(&mut frame, key.response_header_version(version)).unwrap();
        assert_eq!(header.correlation_id, correlation_id);
        R::decode(&mut frame, version).unwrap()
    }

    pub fn call<Q: Encodable, R: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Q,
    ) -> R {
        let id = self.send(key, version, request);
        self.receive(key, version, id)
    }

    /// [`call`](Self::call) that reports, rather than panics on, what a
    /// sweep must tell apart: a request that does not encode at `version`,
    /// a connection the broker closed (or a response that never came), a
    /// response that is not `R` at `version`.
    pub fn try_call<Q: Encodable, R: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Q,
    ) -> Result<R, String> {
        let correlation_id = self.next_correlation;
        self.next_correlation += 1;
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_string(self.client_id.clone())));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, key.request_header_version(version))
            .map_err(|e| format!("the request header does not encode: {e}"))?;
        request
            .encode(&mut body, version)
            .map_err(|e| format!("the request does not encode: {e}"))?;
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        self.stream
            .write_all(&frame)
            .map_err(|e| format!("cannot send: {e}"))?;
        let mut size = [0u8; 4];
        self.stream
            .read_exact(&mut size)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                    "no response within the read timeout".to_owned()
                }
                _ => format!("the broker closed the connection ({e})"),
            })?;
        let mut frame = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream
            .read_exact(&mut frame)
            .map_err(|e| format!("the response frame was cut short ({e})"))?;
        let mut frame = Bytes::from(frame);
        let header = ResponseHeader::decode(&mut frame, key.response_header_version(version))
            .map_err(|e| format!("the response header does not decode: {e}"))?;
        if header.correlation_id != correlation_id {
            return Err(format!(
                "correlation id {} answers request {correlation_id}",
                header.correlation_id
            ));
        }
        R::decode(&mut frame, version).map_err(|e| format!("the response does not decode: {e}"))
    }

    /// True if a response (or the connection's end) has arrived and waits
    /// to be read; never blocks.
    pub fn has_answered(&mut self) -> bool {
        self.stream.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 1];
        let ready = !matches!(
            self.stream.peek(&mut buf),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
        );
        self.stream.set_nonblocking(false).unwrap();
        ready
    }

    /// True if the broker closed the connection (read returns EOF or reset).
    pub fn is_closed(&mut self) -> bool {
        let mut buf = [0u8; 1];
        matches!(self.stream.read(&mut buf), Ok(0) | Err(_))
    }
}

impl Raw {
    /// FindCoordinator v3 for `key` (`key_type` 0: a group, 1: a
    /// transactional id), asked again while the broker answers
    /// COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS (the
    /// internal topic is created on first use), as clients do.
    pub fn find_coordinator(
        &mut self,
        key_type: i8,
        key: &str,
    ) -> kafka_protocol::messages::FindCoordinatorResponse {
        use kafka_protocol::messages::{FindCoordinatorRequest, FindCoordinatorResponse};
        let request = FindCoordinatorRequest::default()
            .with_key_type(key_type)
            .with_key(StrBytes::from_string(key.to_owned()));
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let found: FindCoordinatorResponse = self.call(ApiKey::FindCoordinator, 3, &request);
            if ![14, 15].contains(&found.error_code) || std::time::Instant::now() > deadline {
                return found;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Produces one partition's records (acks=all); returns the error code
    /// and base offset.
    pub fn produce(&mut self, topic: &str, partition: i32, records: Vec<u8>) -> (i16, i64) {
        let p = self.produce_answer(topic, partition, records);
        (p.error_code, p.base_offset)
    }

    /// [`produce`](Self::produce)'s whole answer for the partition.
    pub fn produce_answer(
        &mut self,
        topic: &str,
        partition: i32,
        records: Vec<u8>,
    ) -> kafka_protocol::messages::produce_response::PartitionProduceResponse {
        use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
        use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(records.into()))])]);
        let mut response: ProduceResponse = self.call(ApiKey::Produce, 9, &request);
        response.responses.remove(0).partition_responses.remove(0)
    }

    /// Metadata for one topic, creating it if auto-creation allows. As in
    /// Kafka, a creation is answered at once (UNKNOWN_TOPIC_OR_PARTITION)
    /// and done in the background: asks again, as clients do, until the
    /// topic exists and each of its partitions is served by its leader.
    pub fn topic_metadata(&mut self, topic: &str) -> kafka_protocol::messages::MetadataResponse {
        use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
        use kafka_protocol::messages::{MetadataRequest, TopicName};
        const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
        const LEADER_NOT_AVAILABLE: i16 = 5;
        let request = MetadataRequest::default()
            .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(
                TopicName(StrBytes::from_string(topic.to_owned())),
            ))]))
            .with_allow_auto_topic_creation(true);
        for _ in 0..200 {
            let metadata: kafka_protocol::messages::MetadataResponse =
                self.call(ApiKey::Metadata, 9, &request);
            let found = &metadata.topics[0];
            let pending = match found.error_code {
                UNKNOWN_TOPIC_OR_PARTITION | LEADER_NOT_AVAILABLE => true,
                0 => found.partitions.iter().any(|p| {
                    self.latest_offset_error(topic, p.partition_index) == LEADER_NOT_AVAILABLE
                }),
                _ => false,
            };
            if !pending {
                return metadata;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("topic {topic} was not created within 10 s");
    }

    /// The log end offset of one partition (ListOffsets, latest).
    pub fn latest_offset(&mut self, topic: &str, partition: i32) -> i64 {
        let answer = self.latest_offset_answer(topic, partition);
        assert_eq!(answer.error_code, 0, "{answer:?}");
        answer.offset
    }

    /// One transactional record of `producer` (id, epoch) at `sequence`
    /// for partition 0 of `topic`, in Produce `version`; the error code.
    pub fn produce_transactional(
        &mut self,
        transactional_id: &str,
        producer: (i64, i16),
        sequence: i32,
        topic: &str,
        version: i16,
    ) -> i16 {
        use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
        use kafka_protocol::messages::{
            ProduceRequest, ProduceResponse, TopicName, TransactionalId,
        };
        let batch = weir_log::testing::BatchBuilder::new(1)
            .producer(producer.0, producer.1, sequence)
            .transactional()
            .build();
        let request = ProduceRequest::default()
            .with_transactional_id(Some(TransactionalId(StrBytes::from_string(
                transactional_id.to_owned(),
            ))))
            .with_acks(-1)
            .with_timeout_ms(10_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch.into()))])]);
        let r: ProduceResponse = self.call(ApiKey::Produce, version, &request);
        r.responses[0].partition_responses[0].error_code
    }

    /// The latest offset of partition 0 of `topic` a read_committed
    /// consumer is given: its last stable offset.
    pub fn last_stable_offset(&mut self, topic: &str) -> i64 {
        use kafka_protocol::messages::list_offsets_request::{
            ListOffsetsPartition, ListOffsetsTopic,
        };
        use kafka_protocol::messages::{
            BrokerId, ListOffsetsRequest, ListOffsetsResponse, TopicName,
        };
        let response: ListOffsetsResponse = self.call(
            ApiKey::ListOffsets,
            7,
            &ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_isolation_level(1)
                .with_topics(vec![ListOffsetsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                    .with_partitions(vec![ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(-1)])]),
        );
        let partition = &response.topics[0].partitions[0];
        assert_eq!(partition.error_code, 0);
        partition.offset
    }

    /// The error of a ListOffsets (latest) for one partition.
    fn latest_offset_error(&mut self, topic: &str, partition: i32) -> i16 {
        self.latest_offset_answer(topic, partition).error_code
    }

    fn latest_offset_answer(
        &mut self,
        topic: &str,
        partition: i32,
    ) -> kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse {
        use kafka_protocol::messages::list_offsets_request::{
            ListOffsetsPartition, ListOffsetsTopic,
        };
        use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse, TopicName};
        let request = ListOffsetsRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(partition)
                    .with_timestamp(-1)])]);
        let response: ListOffsetsResponse = self.call(ApiKey::ListOffsets, 4, &request);
        response.topics[0].partitions[0].clone()
    }
}

/// Per topic of an ElectLeaders answer, its partitions' (partition, error
/// code, error message).
pub type Elections = Vec<(String, Vec<(i32, i16, Option<String>)>)>;

pub fn elections(response: &kafka_protocol::messages::ElectLeadersResponse) -> Elections {
    response
        .replica_election_results
        .iter()
        .map(|t| {
            let partitions = t
                .partition_result
                .iter()
                .map(|p| {
                    let message = p.error_message.as_ref().map(|m| m.to_string());
                    (p.partition_id, p.error_code, message)
                })
                .collect();
            (t.topic.0.to_string(), partitions)
        })
        .collect()
}
