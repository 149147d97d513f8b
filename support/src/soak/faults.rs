//! The random faults queued for a round: those of a recovery and those of a writer.

use super::common::*;
use super::world::*;

/// A random fault of the replay side, and its kind.
pub(crate) fn replay_fault(rng: &mut StdRng, world: &World) -> (&'static str, Fault) {
    let api = match rng.random_range(0..20) {
        0..=13 => Some(ApiKey::Fetch),
        14..=15 => Some(ApiKey::ListOffsets),
        16..=17 => Some(ApiKey::Metadata),
        _ => None,
    };
    let mut fault = match api {
        Some(api) => Fault::on(api),
        None => Fault::any(),
    };
    if rng.random_bool(0.5) {
        fault = fault.broker(rng.random_range(1..=BROKERS));
    }
    if rng.random_bool(0.3) {
        fault = fault
            .topic(TOPIC)
            .partition(rng.random_range(0..PARTITIONS));
    }
    fault = fault.times(if rng.random_bool(0.2) { 2 } else { 1 });
    let fetch = api == Some(ApiKey::Fetch);
    let (kind, action) = loop {
        let pick = rng.random_range(0..17);
        let action = match pick {
            0 => ("drop_request", FaultAction::DropRequest),
            1 => ("cut_before_response", FaultAction::CutBeforeResponse),
            2 => {
                let bytes = rng.random_bool(0.7).then(|| rng.random_range(1..120));
                ("cut_mid_frame", FaultAction::CutDuringResponse { bytes })
            }
            3 => ("cut_after_response", FaultAction::CutAfterResponse),
            4 => (
                "partial_frame",
                FaultAction::TruncatedFrame {
                    missing: rng.random_range(1..5000),
                },
            ),
            5 => {
                let lengths = [0x8000_0000, 0xFFFF_FFFF, 0x7FFF_FFFF, 300 << 20];
                let length = lengths[rng.random_range(0..lengths.len())];
                ("oversized_frame", FaultAction::OversizedFrame { length })
            }
            6 => (
                "leader_move",
                FaultAction::MoveLeader {
                    to: rng.random_range(1..=BROKERS),
                },
            ),
            7 => {
                // Now and then slower than the request timeout.
                let ms = if rng.random_bool(0.05) {
                    1000
                } else {
                    rng.random_range(1..80)
                };
                (
                    "slow_response",
                    FaultAction::Delay(Duration::from_millis(ms)),
                )
            }
            8 => (
                "throttled_response",
                FaultAction::Throttle(Duration::from_millis(rng.random_range(1..80))),
            ),
            9 | 10 => {
                // NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE,
                // UNKNOWN_TOPIC_OR_PARTITION, REQUEST_TIMED_OUT,
                // NOT_ENOUGH_REPLICAS, KAFKA_STORAGE_ERROR,
                // FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH.
                let codes = [6, 5, 3, 7, 19, 56, 74, 75];
                let code = codes[rng.random_range(0..codes.len())];
                ("retriable_error", FaultAction::PartitionError(code))
            }
            11 => {
                // Rare: each ends a recovery. TOPIC_AUTHORIZATION_FAILED,
                // UNSUPPORTED_VERSION, INVALID_REQUEST, UNKNOWN_SERVER_ERROR.
                if !rng.random_bool(0.25) {
                    continue;
                }
                let codes = [29, 35, 42, -1];
                let code = codes[rng.random_range(0..codes.len())];
                ("fatal_error", FaultAction::PartitionError(code))
            }
            12 if fetch => {
                if !rng.random_bool(0.3) {
                    continue;
                }
                ("corrupt_batch", FaultAction::CorruptRecords)
            }
            13 if fetch => (
                "truncated_batch",
                FaultAction::TruncateRecords {
                    keep: rng.random_range(0..400),
                },
            ),
            14 | 15 if fetch && world.fetch_v11 => {
                // Fetch v11, one topic "wal", first partition:
                // 18 responses count, 27 partitions count, 61 aborted
                // transactions count, 22 topic name length (i16),
                // 69 records length, 81 first batch length.
                let (kind, at, bytes): (&'static str, usize, Vec<u8>) = match rng.random_range(0..6)
                {
                    0 => ("absurd_count", 18, 0x7FFF_FFFFu32.to_be_bytes().to_vec()),
                    1 => ("absurd_count", 27, 0x4000_0000u32.to_be_bytes().to_vec()),
                    2 => ("absurd_count", 61, 0x7FFF_FFF0u32.to_be_bytes().to_vec()),
                    3 => ("absurd_length", 22, 0x7FFFu16.to_be_bytes().to_vec()),
                    4 => ("absurd_length", 69, 0x7FFF_FFFFu32.to_be_bytes().to_vec()),
                    _ => ("absurd_length", 81, 0x7FFF_FF00u32.to_be_bytes().to_vec()),
                };
                (kind, FaultAction::PatchFrame { at, bytes })
            }
            16 => (
                "response_error",
                FaultAction::ResponseError(if rng.random_bool(0.5) { 6 } else { 70 }),
            ),
            _ => continue,
        };
        break action;
    };
    (kind, fault.then(action))
}

/// A random fault for a writer's Produce requests, and its kind.
pub(crate) fn produce_fault(rng: &mut StdRng) -> (&'static str, Fault) {
    let fault = Fault::on(ApiKey::Produce);
    let (kind, action) = match rng.random_range(0..9) {
        0 => ("produce_drop_request", FaultAction::DropRequest),
        1 => (
            "produce_cut_before_response",
            FaultAction::CutBeforeResponse,
        ),
        2 => (
            "produce_cut_mid_frame",
            FaultAction::CutDuringResponse {
                bytes: Some(rng.random_range(1..30)),
            },
        ),
        3 => (
            "produce_leader_move",
            FaultAction::MoveLeader {
                to: rng.random_range(1..=BROKERS),
            },
        ),
        4 => (
            "produce_slow_response",
            FaultAction::Delay(Duration::from_millis(rng.random_range(1..60))),
        ),
        5 | 6 => {
            // NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS (not appended),
            // REQUEST_TIMED_OUT (may be appended: not retried).
            let codes = [6, 19, 7];
            let code = codes[rng.random_range(0..codes.len())];
            ("produce_error", FaultAction::PartitionError(code))
        }
        7 => {
            // Refused for good: INVALID_RECORD (the batch fails, the
            // producer's sequence taken back), MESSAGE_TOO_LARGE (a batch
            // of several entries split and sent again).
            let codes = [87, 10];
            let code = codes[rng.random_range(0..codes.len())];
            ("produce_refused", FaultAction::PartitionError(code))
        }
        _ => (
            "produce_partial_frame",
            FaultAction::TruncatedFrame {
                missing: rng.random_range(1..100),
            },
        ),
    };
    (kind, fault.then(action))
}
