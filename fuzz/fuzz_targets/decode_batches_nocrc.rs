//! As `decode_batches` with the CRC check off, so corrupt batches reach the
//! record parsers and the decompressors, under a 1 MiB decompression cap.
#![no_main]

use libfuzzer_sys::fuzz_target;
use walfetch_codec::DecodeOptions;

const OPTS: DecodeOptions = DecodeOptions {
    verify_crc: false,
    max_decompressed_bytes: 1 << 20,
};

fuzz_target!(|data: &[u8]| walfetch_codec_fuzz::decode(data, OPTS));
