//! The replay core fed a structured input: a log of real batches, an index
//! (right or wrong), regions, options, and arbitrary answers to its fetches
//! in any order. No panic; per region, offsets strictly increasing inside
//! its range; nothing after the error that ended the replay.
#![no_main]

use libfuzzer_sys::fuzz_target;
use walfetch_codec_fuzz::replay::{run, Input};

fuzz_target!(|input: Input| {
    run(&input);
});
