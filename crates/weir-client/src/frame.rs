//! Framing without I/O: a request becomes `size | header | body`; a
//! response body (after its size prefix) becomes a header, whose
//! correlation id must match, and a body.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// The largest response frame accepted: bigger sizes mean a stream out of
/// step (or not a Kafka broker) rather than a real response.
pub(crate) const MAX_RESPONSE_SIZE: usize = 1 << 30;

/// Why a frame could not be built or read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum FrameError {
    Encode(String),
    Size(i32),
    /// The answer began `HTTP`: an HTTP server, not a Kafka broker.
    Http,
    CorrelationMismatch {
        expected: i32,
        got: i32,
    },
    Decode(String),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Encode(reason) => write!(f, "cannot encode request: {reason}"),
            Self::Size(size) => write!(f, "invalid response size {size}"),
            Self::Http => write!(
                f,
                "it answered in HTTP, not the Kafka protocol: is this a broker's HTTP port? \
                 Give its Kafka port (9092 by default)"
            ),
            Self::CorrelationMismatch { expected, got } => {
                write!(f, "response has correlation id {got}, expected {expected}")
            }
            Self::Decode(reason) => write!(f, "cannot decode response: {reason}"),
        }
    }
}

/// A whole request frame, size prefix included. The header version
/// follows `ApiKey::request_header_version` (v1, or v2 with tagged fields
/// for flexible versions).
pub(crate) fn encode_request<R: Encodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    client_id: &str,
    request: &R,
) -> Result<BytesMut, FrameError> {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_string(client_id.to_owned())));
    let mut frame = BytesMut::with_capacity(64);
    frame.put_i32(0);
    header
        .encode(&mut frame, key.request_header_version(version))
        .map_err(|e| FrameError::Encode(format!("{key:?} v{version} header: {e}")))?;
    request
        .encode(&mut frame, version)
        .map_err(|e| FrameError::Encode(format!("{key:?} v{version}: {e}")))?;
    let size = i32::try_from(frame.len() - 4)
        .map_err(|_| FrameError::Encode(format!("{key:?} request over 2 GiB")))?;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    Ok(frame)
}

/// The length announced by a frame's size prefix.
pub(crate) fn frame_size(prefix: [u8; 4]) -> Result<usize, FrameError> {
    if &prefix == b"HTTP" {
        return Err(FrameError::Http);
    }
    let size = i32::from_be_bytes(prefix);
    match usize::try_from(size) {
        Ok(n) if n <= MAX_RESPONSE_SIZE => Ok(n),
        _ => Err(FrameError::Size(size)),
    }
}

/// The correlation id at the start of a response frame (every response
/// header version begins with it).
pub(crate) fn peek_correlation_id(body: &[u8]) -> Option<i32> {
    Some(i32::from_be_bytes(body.get(..4)?.try_into().ok()?))
}

/// Decodes a response frame (without its size prefix): checks the
/// correlation id, then decodes the body at `version`.
pub(crate) fn decode_response<R: Decodable>(
    key: ApiKey,
    version: i16,
    expected_correlation_id: i32,
    mut body: Bytes,
) -> Result<R, FrameError> {
    let got = peek_correlation_id(&body)
        .ok_or_else(|| FrameError::Decode(format!("{key:?} response of {} bytes", body.len())))?;
    if got != expected_correlation_id {
        return Err(FrameError::CorrelationMismatch {
            expected: expected_correlation_id,
            got,
        });
    }
    ResponseHeader::decode(&mut body, key.response_header_version(version))
        .map_err(|e| FrameError::Decode(format!("{key:?} v{version} header: {e}")))?;
    R::decode(&mut body, version)
        .map_err(|e| FrameError::Decode(format!("{key:?} v{version}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{
        ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse,
    };

    #[test]
    fn request_header_v1_for_classic_versions() {
        // Metadata v8 is not flexible: header v1 = key, version,
        // correlation id, nullable string client id; then the body.
        let request = MetadataRequest::default()
            .with_topics(None)
            .with_allow_auto_topic_creation(false);
        let frame = encode_request(ApiKey::Metadata, 8, 7, "cli", &request).unwrap();
        let mut expected = vec![];
        expected.extend_from_slice(&3i16.to_be_bytes()); // Metadata
        expected.extend_from_slice(&8i16.to_be_bytes());
        expected.extend_from_slice(&7i32.to_be_bytes());
        expected.extend_from_slice(&3i16.to_be_bytes());
        expected.extend_from_slice(b"cli");
        expected.extend_from_slice(&(-1i32).to_be_bytes()); // null topics
        expected.push(0); // allow_auto_topic_creation
        expected.push(0); // include_cluster_authorized_operations
        expected.push(0); // include_topic_authorized_operations
        let size = i32::from_be_bytes(frame[..4].try_into().unwrap());
        assert_eq!(size as usize, frame.len() - 4);
        assert_eq!(&frame[4..], &expected[..]);
    }

    #[test]
    fn request_header_v2_for_flexible_versions() {
        // ApiVersions v3 is flexible: header v2 adds an empty tagged-field
        // section after the client id (the client id stays a classic
        // string).
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("w"))
            .with_client_software_version(StrBytes::from_static_str("1"));
        let frame = encode_request(ApiKey::ApiVersions, 3, 1, "c", &request).unwrap();
        let mut expected = vec![];
        expected.extend_from_slice(&18i16.to_be_bytes());
        expected.extend_from_slice(&3i16.to_be_bytes());
        expected.extend_from_slice(&1i32.to_be_bytes());
        expected.extend_from_slice(&1i16.to_be_bytes());
        expected.extend_from_slice(b"c");
        expected.push(0); // header tagged fields
        expected.extend_from_slice(&[2, b'w', 2, b'1', 0]); // compact strings, tags
        assert_eq!(&frame[4..], &expected[..]);
    }

    fn response_frame(correlation_id: i32, header_version: i16, version: i16) -> Bytes {
        let mut buf = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(correlation_id)
            .encode(&mut buf, header_version)
            .unwrap();
        MetadataResponse::default()
            .with_controller_id(kafka_protocol::messages::BrokerId(4))
            .encode(&mut buf, version)
            .unwrap();
        buf.freeze()
    }

    #[test]
    fn responses_decode_with_the_matching_header_version() {
        // Metadata v12 is flexible: response header v1 (tagged fields).
        assert_eq!(ApiKey::Metadata.response_header_version(12), 1);
        let frame = response_frame(9, 1, 12);
        let response: MetadataResponse = decode_response(ApiKey::Metadata, 12, 9, frame).unwrap();
        assert_eq!(response.controller_id.0, 4);
        // ApiVersions responses keep header v0 even in flexible versions,
        // so that a client can always read the broker's answer.
        assert_eq!(ApiKey::ApiVersions.response_header_version(3), 0);
        let mut buf = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(2)
            .encode(&mut buf, 0)
            .unwrap();
        ApiVersionsResponse::default()
            .with_throttle_time_ms(17)
            .encode(&mut buf, 3)
            .unwrap();
        let response: ApiVersionsResponse =
            decode_response(ApiKey::ApiVersions, 3, 2, buf.freeze()).unwrap();
        assert_eq!(response.throttle_time_ms, 17);
    }

    #[test]
    fn a_foreign_correlation_id_is_refused() {
        let frame = response_frame(5, 1, 12);
        let decoded: Result<MetadataResponse, _> = decode_response(ApiKey::Metadata, 12, 6, frame);
        assert_eq!(
            decoded.unwrap_err(),
            FrameError::CorrelationMismatch {
                expected: 6,
                got: 5
            }
        );
    }

    #[test]
    fn sizes_out_of_range_are_refused() {
        assert_eq!(frame_size(12i32.to_be_bytes()), Ok(12));
        assert_eq!(frame_size((-1i32).to_be_bytes()), Err(FrameError::Size(-1)));
        assert_eq!(frame_size(*b"HTTP"), Err(FrameError::Http));
        assert!(frame_size(i32::MAX.to_be_bytes()).is_err());
    }
}
