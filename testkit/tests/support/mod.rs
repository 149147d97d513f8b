//! A tiny test-only Kafka client: raw frames over a `TcpStream`, encoded and
//! decoded with `kafka-protocol` 0.18, so the scripted broker is tested
//! without the walfetch client; and the scripted cluster with a `wal` topic
//! the tests start it against.

#![allow(dead_code, unreachable_pub, missing_docs)]

use std::io;
use std::net::SocketAddr;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, FetchRequest, FetchResponse, ProduceRequest, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use uuid::Uuid;
use walfetch_codec::{BatchBuilder, Batches, Compression, DecodeOptions, EncodedBatch, NewRecord};
use walfetch_testkit::ScriptedCluster;

/// The largest response frame this client accepts.
pub const MAX_RESPONSE: usize = 64 << 20;

#[derive(Debug)]
pub enum ClientError {
    /// The broker closed the connection between frames.
    Closed,
    /// The broker closed the connection inside a frame.
    Truncated {
        expected: usize,
        got: usize,
    },
    /// A size prefix that is negative or larger than [`MAX_RESPONSE`].
    BadSize(u32),
    Io(io::Error),
    Decode(String),
    Correlation {
        expected: i32,
        got: i32,
    },
}

impl From<io::Error> for ClientError {
    fn from(e: io::Error) -> Self {
        ClientError::Io(e)
    }
}

pub struct RawClient {
    stream: TcpStream,
    next_correlation: i32,
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

impl RawClient {
    pub async fn connect(addr: SocketAddr) -> Self {
        let stream = TcpStream::connect(addr)
            .await
            .expect("connect to the scripted broker");
        Self {
            stream,
            next_correlation: 1,
            bytes_sent: 0,
            bytes_received: 0,
        }
    }

    /// Sends a request; returns its correlation id.
    pub async fn send<R: Request>(
        &mut self,
        version: i16,
        request: &R,
    ) -> Result<i32, ClientError> {
        let api_key =
            ApiKey::try_from(R::KEY).map_err(|_| ClientError::Decode("api key".into()))?;
        let correlation_id = self.next_correlation;
        self.next_correlation += 1;
        let mut header = RequestHeader::default();
        header.request_api_key = R::KEY;
        header.request_api_version = version;
        header.correlation_id = correlation_id;
        header.client_id = Some(StrBytes::from_static_str("testkit-tests"));
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        header
            .encode(&mut buf, api_key.request_header_version(version))
            .map_err(|e| ClientError::Decode(e.to_string()))?;
        request
            .encode(&mut buf, version)
            .map_err(|e| ClientError::Decode(e.to_string()))?;
        let size = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&size.to_be_bytes());
        self.send_raw(&buf).await?;
        Ok(correlation_id)
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) -> Result<(), ClientError> {
        self.stream.write_all(bytes).await?;
        self.bytes_sent += bytes.len() as u64;
        Ok(())
    }

    /// Reads one size-prefixed frame (without its prefix).
    pub async fn recv_frame(&mut self) -> Result<Bytes, ClientError> {
        let mut prefix = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            let n = self.stream.read(&mut prefix[got..]).await?;
            if n == 0 {
                return Err(if got == 0 {
                    ClientError::Closed
                } else {
                    ClientError::Truncated { expected: 4, got }
                });
            }
            got += n;
        }
        self.bytes_received += 4;
        let raw = u32::from_be_bytes(prefix);
        let size = i32::from_be_bytes(prefix);
        if size < 0 || size as usize > MAX_RESPONSE {
            return Err(ClientError::BadSize(raw));
        }
        let size = size as usize;
        let mut body = vec![0u8; size];
        let mut got = 0;
        while got < size {
            let n = self.stream.read(&mut body[got..]).await?;
            if n == 0 {
                return Err(ClientError::Truncated {
                    expected: size,
                    got,
                });
            }
            got += n;
            self.bytes_received += n as u64;
        }
        Ok(body.into())
    }

    /// Reads the response to a request sent with [`RawClient::send`].
    pub async fn recv<R: Request>(
        &mut self,
        version: i16,
        correlation_id: i32,
    ) -> Result<R::Response, ClientError> {
        let api_key =
            ApiKey::try_from(R::KEY).map_err(|_| ClientError::Decode("api key".into()))?;
        let mut frame = self.recv_frame().await?;
        let header_version = if api_key == ApiKey::ApiVersions {
            0
        } else {
            api_key.response_header_version(version)
        };
        let header = ResponseHeader::decode(&mut frame, header_version)
            .map_err(|e| ClientError::Decode(e.to_string()))?;
        if header.correlation_id != correlation_id {
            return Err(ClientError::Correlation {
                expected: correlation_id,
                got: header.correlation_id,
            });
        }
        let response = R::Response::decode(&mut frame, version)
            .map_err(|e| ClientError::Decode(e.to_string()))?;
        if !frame.is_empty() {
            return Err(ClientError::Decode(format!(
                "{} trailing bytes",
                frame.len()
            )));
        }
        Ok(response)
    }

    pub async fn call<R: Request>(
        &mut self,
        version: i16,
        request: &R,
    ) -> Result<R::Response, ClientError> {
        let id = self.send(version, request).await?;
        self.recv::<R>(version, id).await
    }

    /// Whether the broker has closed the connection (reads EOF).
    pub async fn is_closed(&mut self) -> bool {
        let mut byte = [0u8; 1];
        matches!(self.stream.read(&mut byte).await, Ok(0) | Err(_))
    }
}

/// `brokers` scripted brokers with topic `wal` of `partitions` partitions
/// (broker 1 leads partition 0), whose partition 0 holds `batch(n,
/// value_len, 0)` for each `(n, value_len)` of `batches`; and `wal`'s id.
pub async fn wal_cluster(
    brokers: usize,
    partitions: i32,
    batches: &[(i32, usize)],
) -> (ScriptedCluster, Uuid) {
    let cluster = ScriptedCluster::start(brokers).await.expect("start");
    let id = cluster.create_topic("wal", partitions).expect("create");
    for &(n, value_len) in batches {
        cluster
            .append("wal", 0, batch(n, value_len, 0).bytes)
            .expect("append");
    }
    (cluster, id)
}

/// An uncompressed batch of `n` records, each `value_len` bytes, timestamps
/// `ts0, ts0 + 1, ...`.
pub fn batch(n: i32, value_len: usize, ts0: i64) -> EncodedBatch {
    batch_with(n, value_len, ts0, Compression::None)
}

pub fn batch_with(n: i32, value_len: usize, ts0: i64, compression: Compression) -> EncodedBatch {
    let records: Vec<_> = (0..n)
        .map(|i| NewRecord {
            offset_delta: i,
            timestamp: ts0 + i64::from(i),
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(vec![b'a' + (i % 26) as u8; value_len])),
            headers: Vec::new(),
        })
        .collect();
    BatchBuilder::new(0)
        .compression(compression)
        .encode(&records)
        .expect("encode a test batch")
}

/// One partition to fetch.
#[derive(Clone, Copy)]
pub struct Want<'a> {
    pub topic: &'a str,
    pub topic_id: Uuid,
    pub partition: i32,
    pub offset: i64,
    pub partition_max_bytes: i32,
    pub current_leader_epoch: i32,
}

impl<'a> Want<'a> {
    pub fn new(
        topic: &'a str,
        topic_id: Uuid,
        partition: i32,
        offset: i64,
        partition_max_bytes: i32,
    ) -> Self {
        Self {
            topic,
            topic_id,
            partition,
            offset,
            partition_max_bytes,
            current_leader_epoch: -1,
        }
    }
}

/// A Fetch request at `version` for `wants` (one topic entry per want).
pub fn fetch_request(
    version: i16,
    wants: &[Want<'_>],
    max_bytes: i32,
    isolation_level: i8,
) -> FetchRequest {
    let mut request = FetchRequest::default();
    request.max_wait_ms = 0;
    request.min_bytes = 0;
    request.max_bytes = max_bytes;
    request.isolation_level = isolation_level;
    request.topics = wants
        .iter()
        .map(|w| {
            let mut topic = FetchTopic::default();
            if version >= 13 {
                topic.topic_id = w.topic_id;
            } else {
                topic.topic = TopicName(StrBytes::from_string(w.topic.to_owned()));
            }
            let mut p = FetchPartition::default();
            p.partition = w.partition;
            p.fetch_offset = w.offset;
            p.partition_max_bytes = w.partition_max_bytes;
            if version >= 9 {
                p.current_leader_epoch = w.current_leader_epoch;
            }
            topic.partitions = vec![p];
            topic
        })
        .collect();
    request
}

/// A Produce request (acks = all) of one partition's records.
pub fn produce_request(topic: &str, partition: i32, records: Bytes, acks: i16) -> ProduceRequest {
    let mut p = PartitionProduceData::default();
    p.index = partition;
    p.records = Some(records);
    let mut t = TopicProduceData::default();
    t.name = TopicName(StrBytes::from_string(topic.to_owned()));
    t.partition_data = vec![p];
    let mut request = ProduceRequest::default();
    request.acks = acks;
    request.timeout_ms = 5000;
    request.topic_data = vec![t];
    request
}

/// What a fetched partition's `records` held.
#[derive(Debug, PartialEq, Eq)]
pub struct Fetched {
    /// Base offsets of the complete batches.
    pub batches: Vec<i64>,
    /// Offsets of the records in the complete batches.
    pub offsets: Vec<i64>,
    /// `(base offset, bytes present, bytes needed)` of a trailing partial batch.
    pub partial: Option<(Option<i64>, usize, Option<usize>)>,
    /// Bytes of records.
    pub len: usize,
}

pub fn decode_records(records: &Bytes) -> Fetched {
    let mut batches = Batches::new(records.clone(), DecodeOptions::default());
    let mut out = Fetched {
        batches: Vec::new(),
        offsets: Vec::new(),
        partial: None,
        len: records.len(),
    };
    for batch in batches.by_ref() {
        let batch = batch.expect("a valid batch");
        out.batches.push(batch.base_offset());
        for record in batch.records().expect("records") {
            out.offsets.push(record.expect("a valid record").offset());
        }
    }
    out.partial = batches
        .partial()
        .map(|p| (p.base_offset(), p.present(), p.needed()));
    out
}

/// What the single partition of a one-partition Fetch response held.
pub fn only_records(response: &FetchResponse) -> Fetched {
    decode_records(only_partition(response).records.as_ref().expect("records"))
}

/// The single partition of a one-partition Fetch response.
pub fn only_partition(
    response: &FetchResponse,
) -> &kafka_protocol::messages::fetch_response::PartitionData {
    assert_eq!(response.responses.len(), 1, "one topic");
    assert_eq!(response.responses[0].partitions.len(), 1, "one partition");
    &response.responses[0].partitions[0]
}
