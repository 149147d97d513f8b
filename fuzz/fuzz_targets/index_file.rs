//! Arbitrary bytes as a walfetch index file (any version): decoding never
//! panics, and a file that decodes encodes back to a file that decodes to
//! the same index.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| walfetch_codec_fuzz::index_file(data));
