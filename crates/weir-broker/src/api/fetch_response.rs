//! The Fetch response, encoded by hand for versions 4–17 so that each
//! partition's records stay a region of a segment file, spliced into the
//! socket with `sendfile` instead of being copied into the response.
//!
//! ```text
//! header      correlation id i32, [v12+: tagged fields]
//! response    throttle i32, [v7+: error i16, session id i32],
//!             topics [ [v4-12: name string, v13+: topic id uuid],
//!               partitions [
//!               index i32, error i16, high watermark i64, last stable i64,
//!               [v5+: log start i64], aborted transactions [
//!                 producer id i64, first offset i64, [v12+: tagged fields] ],
//!               [v11+: preferred read replica i32], records bytes,
//!               [v12+: tagged fields: 1 = current leader] ],
//!               [v12+: tagged fields] ],
//!             [v12+: tagged fields: 0 = node endpoints (v16+)]
//! ```
//! v12+ is flexible: compact arrays, strings and bytes (unsigned varint
//! length + 1) and a tagged-field section after each structure.

use bytes::{BufMut, BytesMut};
use weir_log::{AbortedTxn, LogSlice};

use crate::fetch_sessions::TopicRef;
use crate::net::{Chunk, Outgoing};

/// The response's top-level fields.
pub(super) struct Header {
    /// How long the client is throttled for a quota (KIP-219).
    pub(super) throttle_time_ms: i32,
    pub(super) error_code: i16,
    /// The fetch session the client continues with; 0 for none.
    pub(super) session_id: i32,
}

/// One partition of the answer.
pub(super) struct FetchedPartition {
    pub(super) index: i32,
    pub(super) error_code: i16,
    pub(super) high_watermark: i64,
    pub(super) last_stable_offset: i64,
    pub(super) log_start_offset: i64,
    pub(super) records: LogSlice,
    /// For `read_committed`: the aborted transactions the records overlap.
    pub(super) aborted: Vec<AbortedTxn>,
    /// The partition's leader and leader epoch, told to a client that
    /// asked the wrong broker (KIP-951, v16+).
    pub(super) current_leader: Option<(i32, i32)>,
    /// The replica the leader sends the consumer to (KIP-392, v11+); -1
    /// for none.
    pub(super) preferred_read_replica: i32,
}

impl FetchedPartition {
    pub(super) fn error(index: i32, error_code: i16) -> Self {
        Self {
            index,
            error_code,
            high_watermark: -1,
            last_stable_offset: -1,
            log_start_offset: -1,
            records: LogSlice::default(),
            aborted: Vec::new(),
            current_leader: None,
            preferred_read_replica: -1,
        }
    }
}

/// Where to reach a leader named in a partition's `current_leader`.
pub(super) struct NodeEndpoint {
    pub(super) node_id: i32,
    pub(super) host: String,
    pub(super) port: i32,
    pub(super) rack: Option<String>,
}

/// Encodes the response frame, size prefix included.
pub(super) fn encode(
    version: i16,
    correlation_id: i32,
    header: &Header,
    topics: &[(&TopicRef, Vec<FetchedPartition>)],
    endpoints: &[NodeEndpoint],
) -> Outgoing {
    let flexible = version >= 12;
    let mut out = Writer {
        chunks: Vec::new(),
        buf: BytesMut::with_capacity(256),
        flexible,
    };
    out.buf.put_i32(correlation_id);
    out.tagged_fields();
    out.buf.put_i32(header.throttle_time_ms);
    if version >= 7 {
        out.buf.put_i16(header.error_code);
        out.buf.put_i32(header.session_id);
    }
    out.array_len(topics.len());
    for (topic, partitions) in topics {
        match *topic {
            TopicRef::Id(id) if version >= 13 => out.buf.put_slice(id.as_bytes()),
            TopicRef::Name(name) if version < 13 => out.string(name),
            // A request names topics one way, and its answer follows it.
            _ => unreachable!("a v{version} fetch answered with {topic:?}"),
        }
        out.array_len(partitions.len());
        for p in partitions {
            out.buf.put_i32(p.index);
            out.buf.put_i16(p.error_code);
            out.buf.put_i64(p.high_watermark);
            out.buf.put_i64(p.last_stable_offset);
            if version >= 5 {
                out.buf.put_i64(p.log_start_offset);
            }
            out.array_len(p.aborted.len());
            for txn in &p.aborted {
                out.buf.put_i64(txn.producer_id);
                out.buf.put_i64(txn.first_offset as i64);
                out.tagged_fields();
            }
            if version >= 11 {
                out.buf.put_i32(p.preferred_read_replica);
            }
            out.records(&p.records);
            match p.current_leader {
                Some((leader_id, leader_epoch)) if flexible => {
                    let mut field = BytesMut::with_capacity(9);
                    field.put_i32(leader_id);
                    field.put_i32(leader_epoch);
                    field.put_u8(0); // its own tagged fields
                    out.tagged_field(1, &field);
                }
                _ => out.tagged_fields(),
            }
        }
        out.tagged_fields();
    }
    if version >= 16 && !endpoints.is_empty() {
        let mut field = Writer {
            chunks: Vec::new(),
            buf: BytesMut::new(),
            flexible: true,
        };
        field.array_len(endpoints.len());
        for node in endpoints {
            field.buf.put_i32(node.node_id);
            field.string(&node.host);
            field.buf.put_i32(node.port);
            match &node.rack {
                Some(rack) => field.string(rack),
                None => field.varint(0), // null
            }
            field.tagged_fields();
        }
        out.tagged_field(0, &field.buf);
    } else {
        out.tagged_fields();
    }
    out.finish()
}

struct Writer {
    chunks: Vec<Chunk>,
    buf: BytesMut,
    flexible: bool,
}

impl Writer {
    fn varint(&mut self, mut n: u32) {
        while n >= 0x80 {
            self.buf.put_u8((n as u8) | 0x80);
            n >>= 7;
        }
        self.buf.put_u8(n as u8);
    }

    fn array_len(&mut self, len: usize) {
        if self.flexible {
            self.varint(len as u32 + 1);
        } else {
            self.buf.put_i32(len as i32);
        }
    }

    fn string(&mut self, s: &str) {
        if self.flexible {
            self.varint(s.len() as u32 + 1);
        } else {
            self.buf.put_i16(s.len() as i16);
        }
        self.buf.put_slice(s.as_bytes());
    }

    fn tagged_fields(&mut self) {
        if self.flexible {
            self.buf.put_u8(0);
        }
    }

    /// A tagged-field section holding one field.
    fn tagged_field(&mut self, tag: u32, value: &[u8]) {
        self.varint(1);
        self.varint(tag);
        self.varint(value.len() as u32);
        self.buf.put_slice(value);
    }

    fn records(&mut self, records: &LogSlice) {
        let len = records.len() as usize;
        self.array_len(len);
        if len > 0 {
            let head = self.buf.split().freeze();
            self.chunks.push(Chunk::Bytes(head));
            self.chunks.push(Chunk::File(records.clone()));
        }
    }

    /// The frame: the size prefix, then everything written.
    fn finish(mut self) -> Outgoing {
        self.chunks.push(Chunk::Bytes(self.buf.split().freeze()));
        Outgoing::from_chunks(self.chunks).with_size_prefix()
    }
}

#[cfg(test)]
mod tests {
    use bytes::{Buf, Bytes};
    use kafka_protocol::messages::{FetchResponse, ResponseHeader};
    use kafka_protocol::protocol::Decodable;
    use weir_log::testing::BatchBuilder;
    use weir_log::{Log, LogConfig};

    use super::*;

    /// Every version decodes with the reference codec to the same answer,
    /// the records byte for byte.
    #[test]
    fn every_version_decodes_as_kafka_encodes_it() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), LogConfig::default()).unwrap();
        log.append(&BatchBuilder::new(3).build(), 0).unwrap();
        log.append(&BatchBuilder::new(2).build(), 0).unwrap();
        let slice = log.read(0, 1 << 20, 5).unwrap();
        let stored = slice.to_bytes().unwrap();
        let orders_id = uuid::Uuid::from_u128(0x1234);
        let empty_id = uuid::Uuid::from_u128(0x5678);
        for version in 4..=17 {
            let name_or_id = |name: &str, id| {
                if version >= 13 {
                    TopicRef::Id(id)
                } else {
                    TopicRef::Name(name.into())
                }
            };
            let (orders, empty) = (
                name_or_id("orders", orders_id),
                name_or_id("empty", empty_id),
            );
            let mut not_leader = FetchedPartition::error(1, 6);
            not_leader.current_leader = Some((2, 9));
            let topics = [
                (
                    &orders,
                    vec![
                        FetchedPartition {
                            index: 0,
                            error_code: 0,
                            high_watermark: 5,
                            last_stable_offset: 5,
                            log_start_offset: 0,
                            records: slice.clone(),
                            aborted: vec![
                                AbortedTxn {
                                    producer_id: 7,
                                    first_offset: 1,
                                    last_offset: 9,
                                    last_stable_offset: 10,
                                },
                                AbortedTxn {
                                    producer_id: 8,
                                    first_offset: 3,
                                    last_offset: 11,
                                    last_stable_offset: 12,
                                },
                            ],
                            current_leader: None,
                            preferred_read_replica: 3,
                        },
                        not_leader,
                    ],
                ),
                (&empty, vec![FetchedPartition::error(0, 3)]),
            ];
            let endpoints = [NodeEndpoint {
                node_id: 2,
                host: "broker-2".into(),
                port: 9093,
                rack: None,
            }];
            let header = Header {
                throttle_time_ms: 0,
                error_code: 0,
                session_id: 42,
            };
            let frame = encode(version, 77, &header, &topics, &endpoints);
            let mut bytes: Bytes = frame.to_bytes().unwrap();
            assert_eq!(bytes.len(), frame.len());
            assert_eq!(bytes.get_i32() as usize, frame.len() - 4, "v{version}");
            let header_version = if version >= 12 { 1 } else { 0 };
            let header = ResponseHeader::decode(&mut bytes, header_version).unwrap();
            assert_eq!(header.correlation_id, 77);
            let response = FetchResponse::decode(&mut bytes, version).unwrap();
            assert!(!bytes.has_remaining(), "v{version}: trailing bytes");
            if version >= 7 {
                assert_eq!((response.error_code, response.session_id), (0, 42));
            }
            assert_eq!(response.responses.len(), 2);
            let orders = &response.responses[0];
            if version >= 13 {
                assert_eq!(orders.topic_id, orders_id);
            } else {
                assert_eq!(orders.topic.as_str(), "orders");
            }
            let p0 = &orders.partitions[0];
            assert_eq!((p0.partition_index, p0.error_code), (0, 0));
            assert_eq!((p0.high_watermark, p0.last_stable_offset), (5, 5));
            if version >= 5 {
                assert_eq!(p0.log_start_offset, 0);
            }
            assert_eq!(p0.records.as_deref(), Some(&stored[..]), "v{version}");
            let aborted: Vec<(i64, i64)> = p0
                .aborted_transactions
                .iter()
                .flatten()
                .map(|t| (t.producer_id.0, t.first_offset))
                .collect();
            assert_eq!(aborted, vec![(7, 1), (8, 3)], "v{version}");
            if version >= 11 {
                assert_eq!(p0.preferred_read_replica.0, 3, "v{version}");
            }
            let p1 = &orders.partitions[1];
            assert_eq!((p1.partition_index, p1.error_code), (1, 6));
            assert_eq!(p1.preferred_read_replica.0, -1);
            assert_eq!(p1.records.as_deref(), Some(&[][..]));
            if version >= 12 {
                let leader = &p1.current_leader;
                assert_eq!((leader.leader_id.0, leader.leader_epoch), (2, 9));
            }
            if version >= 16 {
                let nodes: Vec<_> = response
                    .node_endpoints
                    .iter()
                    .map(|n| (n.node_id.0, n.host.as_str(), n.port, n.rack.clone()))
                    .collect();
                assert_eq!(nodes, vec![(2, "broker-2", 9093, None)]);
            }
            if version >= 13 {
                assert_eq!(response.responses[1].topic_id, empty_id);
            } else {
                assert_eq!(response.responses[1].topic.as_str(), "empty");
            }
            assert_eq!(response.responses[1].partitions[0].error_code, 3);
        }
    }
}
