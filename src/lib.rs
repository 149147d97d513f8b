#![doc = include_str!("../README.md")]

pub use walfetch_codec as codec;
