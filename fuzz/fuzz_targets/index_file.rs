//! Arbitrary bytes as a walfetch index file (any version) and as a
//! GreptimeDB `index.json`: reading never panics, and an index read either
//! way encodes to a walfetch index file that decodes to the same index.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| walfetch_codec_fuzz::index_file(data));
