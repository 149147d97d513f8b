#![doc = include_str!("../README.md")]

pub use walfetch_codec as codec;

#[doc(hidden)]
pub mod calibrate;
pub mod cluster;
pub mod connection;
pub mod consumer;
pub mod error;
pub mod error_code;
pub mod index;
#[doc(hidden)]
pub mod local_broker;
pub mod plan;
pub mod replay;
pub mod scan;
pub mod writer;
