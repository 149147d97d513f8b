//! Arbitrary bytes as a Fetch response's `records`, decoded with the default
//! options (CRC32C checked, 64 MiB decompression cap): every batch, record
//! and header, then the partial batch's unverified records.
#![no_main]

use libfuzzer_sys::fuzz_target;
use walfetch_codec::DecodeOptions;

fuzz_target!(|data: &[u8]| walfetch_codec_fuzz::decode(data, DecodeOptions::default()));
