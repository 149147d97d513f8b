//! Arbitrary bytes as a SCRAM server's two messages (server-first, then
//! server-final) to walfetch's SCRAM client: reading them never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| walfetch_codec_fuzz::sasl_scram(data));
