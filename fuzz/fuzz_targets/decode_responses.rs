//! Arbitrary bytes as a response frame's payload, through the client's whole
//! decode path: response header, the bounds check (`guard`), the message
//! decoder, and for Fetch every partition's records through the codec. The
//! first input byte picks the API (every one walfetch sends), the second its
//! version.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| walfetch_codec_fuzz::decode_response(data));
