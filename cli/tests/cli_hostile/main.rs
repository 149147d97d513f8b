//! The CLI under hostile input (issue #12, "The CLI survives hostile
//! input"): a closed stdout, absurd counts, negative offsets, files that are
//! not what they claim, and messages that say plainly what is wrong. The
//! commands that talk to Kafka run against the scripted in-process broker.
#![allow(clippy::unwrap_used)]

// Shared by the modules below: the scripted WAL the commands read, running the CLI (with its stdout closed, within a limit) and reading its output.
mod common;

// A closed stdout (or a closed pipe holding stderr too) ends every command cleanly.
mod closed_stdout;
// Arguments that cannot be right: absurd counts, negative offsets, two checkpoints for a region, stdin given twice.
mod bad_arguments;
// Input that is not what it claims: dump and index show stop at once on what they cannot hold, and read stdin.
mod hostile_input;
// The stats line: it counts what was printed, comes last when a replay fails, lists lost offsets bounded and once.
mod stats_line;
// What the commands report: the last index as a number, labelled region lines, what capture captured, help pages.
mod reports_and_help;
// I/O errors: printed once, no temporary file left, a full disk an error.
mod io_errors;
// Replays: a region given twice replayed once, a properties file read once, Ctrl-C ending at a line with its stats.
mod replays;
