//! Structured records and batch settings → encode → decode: every header
//! field, record field, record range, bounded iteration, prefix and
//! transaction marker must round-trip exactly.
#![no_main]

use libfuzzer_sys::fuzz_target;
use walfetch_codec_fuzz::roundtrip::{check, Input};

fuzz_target!(|input: Input| check(input));
