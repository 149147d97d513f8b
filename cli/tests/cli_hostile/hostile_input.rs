//! Input that is not what it claims: dump and index show stop at once on what they cannot hold, and read stdin.

use crate::common::*;

/// `dump /dev/zero` grew without bound: dump reads a batch at a time and
/// refuses a length it will not hold; `index show` and `replay --index`
/// look at the header before reading on (replay read 512 MiB first). All
/// read stdin for `-`.
#[test]
fn dump_and_index_show_stop_at_once_on_what_they_cannot_hold() {
    // (command, how long it may take, what it says.)
    let ten = Duration::from_secs(10);
    let twenty = Duration::from_secs(20);
    for (args, limit, message) in [
        (
            &["dump", "/dev/zero"][..],
            ten,
            "batch length 0 is below the 49-byte minimum",
        ),
        (
            &["index", "show", "/dev/zero"][..],
            ten,
            "not a walfetch index file",
        ),
        (
            &words("replay -b 127.0.0.1:1 -t wal --index /dev/zero --region 1")[..],
            ten,
            "not a walfetch index file",
        ),
        // Inputs held whole are read up to a bound, then refused.
        (
            &["index", "import-greptime", "/dev/zero", "--out", "x.idx"][..],
            twenty,
            "larger than 256 MiB",
        ),
        (
            &words("replay -b 127.0.0.1:1 -t wal --strategy scan --checkpoints /dev/zero")[..],
            twenty,
            "larger than 64 MiB",
        ),
    ] {
        let out = fails_within(args, limit);
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
    }

    // A header claiming a 2 GiB batch, then an endless stream: an error
    // naming the limit, at once.
    let mut head = vec![0u8; 8];
    head.extend_from_slice(&0x7fff_fff0_i32.to_be_bytes());
    head.extend_from_slice(&[0, 0, 0, 0, 2]);
    let dir = temp_dir("huge");
    let huge = dir.join("huge.log");
    std::fs::write(&huge, &head).unwrap();
    let out = fails_within(&["dump", path(&huge)], Duration::from_secs(10));
    assert!(
        stderr(&out).contains("over the") && stderr(&out).contains("--max-batch-bytes"),
        "{}",
        stderr(&out)
    );
}

/// `-` reads stdin, for dump and index show.
#[test]
fn dump_and_index_show_read_stdin() {
    let records: Vec<NewRecord> = (0..50)
        .map(|i| NewRecord::value(i, format!("record {i}")))
        .collect();
    let log = [
        BatchBuilder::new(0).encode(&records[..20]).unwrap().bytes,
        BatchBuilder::new(20).encode(&records[..30]).unwrap().bytes,
    ]
    .concat();
    let mut index = WalIndex::new();
    index.push(7, IndexEntry::offset_only(3)).unwrap();
    index.set_last_index(10);
    let dir = temp_dir("stdin");
    let index_file = dir.join("seven.idx");
    write_index_file(&index_file, &index).unwrap();
    for (args, input, want) in [
        (&["dump", "-"][..], log.clone(), "\"offset\":49"),
        (
            &["dump", "-", "--batches"][..],
            log.clone(),
            "\"position\":",
        ),
        (
            &["index", "show", "-"][..],
            std::fs::read(&index_file).unwrap(),
            "stdin: 1 regions, 1 entries, last_index 10",
        ),
    ] {
        let mut child = WALFETCH.spawn_piped(args);
        let mut stdin = child.stdin.take().unwrap();
        std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &input));
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        assert!(stdout(&out).contains(want), "{args:?}: {}", stdout(&out));
    }
    // The second batch's header says where it is in the whole input.
    let mut child = WALFETCH.spawn_piped(&["dump", "-", "--batches"]);
    let mut stdin = child.stdin.take().unwrap();
    let first_len = 12 + i32::from_be_bytes(log[8..12].try_into().unwrap()) as usize;
    std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &log));
    let out = child.wait_with_output().unwrap();
    let second: serde_json::Value =
        serde_json::from_str(stdout(&out).lines().nth(1).unwrap()).unwrap();
    assert_eq!(second["position"], first_len);
}
