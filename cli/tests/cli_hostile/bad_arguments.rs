//! Arguments that cannot be right: absurd counts, negative offsets, two checkpoints for a region, stdin given twice.

use crate::common::*;

/// Runs `walfetch` with `args`, which it must refuse; what it said.
fn refused(args: &[&str]) -> String {
    let out = WALFETCH.run(args);
    assert!(!out.status.success(), "{args:?}: {}", stderr(&out));
    stderr(&out)
}

/// `walfetch calibrate --samples 4294967295` aborted on a 64 GiB
/// allocation: every count is bounded, and `--help` says the bound.
#[test]
fn counts_from_the_command_line_are_bounded() {
    for (args, bound) in [
        (
            &words("calibrate -b 127.0.0.1:1 -t wal --samples 4294967295")[..],
            "1..=1000",
        ),
        (
            &words("calibrate -b 127.0.0.1:1 -t wal --samples 0")[..],
            "1..=1000",
        ),
        (
            &["demo", "-b", "127.0.0.1:1", "--entries", "1000000000000"][..],
            "1..=200000",
        ),
        (
            &["demo", "-b", "127.0.0.1:1", "--regions", "0"][..],
            "1..=100000",
        ),
        (
            &["dump", "x.log", "--max-batch-bytes", "9999999999"][..],
            "61..=2147483647",
        ),
        (
            &words("replay -b 127.0.0.1:1 -t wal --region 1 --round-trip-us 99999999999")[..],
            "0..=60000000",
        ),
    ] {
        let out = WALFETCH.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(bound), "{args:?}: {}", stderr(&out));
    }
    for (command, bound) in [
        (&["calibrate", "--help"][..], "(1 to 1000)"),
        (&["demo", "--help"][..], "(1 to 200000)"),
        (&["demo", "--help"][..], "(1 to 100000)"),
        (&["dump", "--help"][..], "(61 to 2147483647)"),
        (&["replay", "--help"][..], "up to 60000000"),
    ] {
        let help = stdout(&WALFETCH.run(command));
        assert!(help.contains(bound), "{command:?}: {help}");
    }
}

/// `--from=-5` said the range "is empty": a negative offset or partition is
/// named as such, in every command that takes one.
#[test]
fn a_negative_offset_is_named() {
    for args in [
        &words("replay -b 127.0.0.1:1 -t wal --region 1 --from=-5")[..],
        &words("replay -b 127.0.0.1:1 -t wal --region 1 --from -5")[..],
        &words("replay -b 127.0.0.1:1 -t wal --region 1 --to=-1")[..],
        &words("index build -b 127.0.0.1:1 -t wal --out x.idx --from=-5")[..],
        &words("capture -b 127.0.0.1:1 -t wal --out x.bin --from=-5")[..],
    ] {
        let err = refused(args);
        assert!(
            err.contains("-5 is a negative offset") || err.contains("-1 is a negative offset"),
            "{args:?}: {err}"
        );
    }
    for args in [
        &words("replay -b 127.0.0.1:1 -t wal:-1 --region 1 --strategy scan")[..],
        &["calibrate", "-b", "127.0.0.1:1", "-t", "wal", "-p", "-1"][..],
    ] {
        let err = refused(args);
        assert!(
            err.contains("-1 is a negative partition"),
            "{args:?}: {err}"
        );
    }
}

/// A checkpoints file with two checkpoints for one region (`"3"` and
/// `"03"`, or the key `"3"` twice) was read as one of them, silently: the
/// wrong one loses entries or replays them twice. It is refused, naming
/// the region and both offsets, before connecting. An empty file was said
/// to be missing ("give --region R or --checkpoints FILE").
#[test]
fn a_checkpoints_file_with_two_checkpoints_for_a_region_is_refused() {
    let dir = temp_dir("checkpoints-conflict");
    let index = dir.join("empty.idx");
    write_index_file(&index, &WalIndex::new()).unwrap();
    let file = dir.join("checkpoints.json");
    // Port 1: a file that is refused fails before connecting; one that is
    // accepted fails to connect, naming the address.
    let replay = |text: &str| {
        std::fs::write(&file, text).unwrap();
        WALFETCH.run(&[
            "replay",
            "-b",
            "127.0.0.1:1",
            "-t",
            "wal",
            "--index",
            path(&index),
            "--checkpoints",
            path(&file),
            "--timeout",
            "1s",
        ])
    };
    for (text, first, second) in [
        (
            r#"{"3": 100, "03": 2000}"#,
            "100 (as \"3\")",
            "2000 (as \"03\")",
        ),
        (
            r#"{"3": 100, "3": 2000}"#,
            "100 (as \"3\")",
            "2000 (as \"3\")",
        ),
    ] {
        let out = replay(text);
        assert!(!out.status.success());
        let err = stderr(&out);
        assert!(
            err.contains("region 3 has two checkpoints")
                && err.contains(first)
                && err.contains(second)
                && !err.contains("127.0.0.1:1"),
            "{text}: {err}"
        );
    }
    // The same checkpoint twice is no conflict: the file is accepted.
    let out = replay(r#"{"3": 100, "03": 100}"#);
    assert!(stderr(&out).contains("127.0.0.1:1"), "{}", stderr(&out));
    let out = replay("{}");
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("the checkpoints file lists no regions"),
        "{}",
        stderr(&out)
    );
}

/// stdin can be read once: `--index -` given for two partitions read the
/// index for the first and nothing for the second, which failed as "not a
/// walfetch index file". It is refused, saying why.
#[test]
fn stdin_given_twice_is_refused() {
    let dir = temp_dir("stdin-twice");
    let index = dir.join("wal.idx");
    write_index_file(&index, &WalIndex::new()).unwrap();
    let bytes = std::fs::read(&index).unwrap();
    for extra in [
        &[
            "-t", "wal:0", "-t", "wal:1", "--index", "-", "--index", "-", "--region", "1",
        ][..],
        &["-t", "wal:0", "--index", "-", "--checkpoints", "-"][..],
        &["-t", "wal:0", "--index", "-", "-F", "/dev/stdin"][..],
        &words("-t wal:0 --index /dev/stdin --region 1 -F /dev/fd/0")[..],
    ] {
        let mut child =
            WALFETCH.spawn_piped(&[&["replay", "-b", "127.0.0.1:1"][..], extra].concat());
        let mut stdin = child.stdin.take().unwrap();
        // The command may refuse before it reads: a closed pipe is fine.
        let _ = std::io::Write::write_all(&mut stdin, &bytes);
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        let err = stderr(&out);
        assert!(!out.status.success(), "{extra:?}: {err}");
        assert!(
            err.contains("stdin can be read once") && !err.contains("127.0.0.1:1"),
            "{extra:?}: {err}"
        );
    }
}
