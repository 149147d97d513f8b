//! Broker habits: never cut, skip the containing batch, repeat the last batch, omit or empty hurried fetches, segment ends.

use crate::common::*;

#[tokio::test]
async fn habits_never_cut_skip_containing_batch_and_repeat_last_batch() {
    let cluster = ScriptedCluster::start(2).await.expect("start");
    let id = cluster.create_topic("wal", 1).expect("create");
    let sizes = four_batches(&cluster);
    cluster.move_leader("wal", 0, 2).expect("move");
    cluster.set_habits(2, Habits::TANSU_0_6).expect("habits");
    let mut client = RawClient::connect(cluster.addr(2).expect("addr")).await;
    // The request's limit is the partition's: Tansu ignores the latter.
    let fetch = |offset: i64, pmb: usize| {
        fetch_request(
            11,
            &[Want::new("wal", id, 0, offset, pmb as i32)],
            pmb as i32,
            0,
        )
    };
    // A limit inside the second batch: whole batches only, added while
    // the bytes counted without batch headers are below the limit, so the
    // second batch comes whole.
    let response = client
        .call(11, &fetch(0, sizes[0].1 + 30))
        .await
        .expect("Fetch");
    let fetched = only_records(&response);
    assert_eq!((fetched.batches, fetched.partial), (vec![0, 10], None));
    // The first batch counted without its header reaches the limit: it
    // alone.
    let response = client
        .call(11, &fetch(0, sizes[0].1 - HEADER_LEN))
        .await
        .expect("Fetch");
    let fetched = only_records(&response);
    assert_eq!((fetched.batches, fetched.partial), (vec![0], None));
    // A limit of 1 byte: still one batch.
    let response = client.call(11, &fetch(0, 1)).await.expect("Fetch");
    assert_eq!(only_records(&response).batches, vec![0]);
    // Mid-batch offset 3: starts at the next batch (10); reaching the
    // log's end, the last batch comes twice.
    let response = client.call(11, &fetch(3, 1 << 20)).await.expect("Fetch");
    assert_eq!(only_records(&response).batches, vec![10, 20, 25, 25]);
    // Only broker 2 has the habit; back on Kafka's rules after a reset.
    cluster.set_habits(2, Habits::KAFKA).expect("habits");
    let response = client.call(11, &fetch(3, 1 << 20)).await.expect("Fetch");
    assert_eq!(only_records(&response).batches, vec![0, 10, 20, 25]);
}

/// A one-broker cluster with [`four_batches`] in `wal` partition 0 and
/// `habits`, a client of it, and a v11 fetch of the partition from offset 0
/// (1 MiB, no wait yet).
async fn a_fetch_of_four_batches_from(
    habits: Habits,
) -> (ScriptedCluster, RawClient, FetchRequest) {
    let cluster = ScriptedCluster::start(1).await.expect("start");
    let id = cluster.create_topic("wal", 1).expect("create");
    four_batches(&cluster);
    cluster.set_habits(1, habits).expect("habits");
    let client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    let request = fetch_request(11, &[Want::new("wal", id, 0, 0, 1 << 20)], i32::MAX, 0);
    (cluster, client, request)
}

/// Allowed to wait 50 ms, a fetch of [`a_fetch_of_four_batches_from`] gets
/// the partition's four batches, at once.
async fn answers_all_four_when_allowed_50_ms(client: &mut RawClient, request: &mut FetchRequest) {
    request.max_wait_ms = 50;
    let response = client.call(11, request).await.expect("Fetch");
    assert_eq!(only_records(&response).batches, vec![0, 10, 20, 25]);
}

#[tokio::test]
async fn habit_omit_below_wait_leaves_the_partition_out_of_hurried_fetches() {
    let (_cluster, mut client, mut request) =
        a_fetch_of_four_batches_from(Habits::OMITS_WHEN_HURRIED).await;
    // max_wait_ms 0 (and 49): the topic is there, the partition is not.
    for wait in [0, 49] {
        request.max_wait_ms = wait;
        let response = client.call(11, &request).await.expect("Fetch");
        assert_eq!(response.error_code, 0);
        assert_eq!(response.responses.len(), 1);
        assert!(response.responses[0].partitions.is_empty(), "wait {wait}");
    }
    answers_all_four_when_allowed_50_ms(&mut client, &mut request).await;
}

#[tokio::test]
async fn habit_empty_below_wait_answers_hurried_fetches_with_no_records() {
    let (_cluster, mut client, mut request) =
        a_fetch_of_four_batches_from(Habits::EMPTY_WHEN_HURRIED).await;
    // max_wait_ms 0 (and 49): the partition, no error, its high watermark,
    // and no records.
    for wait in [0, 49] {
        request.max_wait_ms = wait;
        let response = client.call(11, &request).await.expect("Fetch");
        let partition = only_partition(&response);
        assert_eq!(partition.error_code, 0);
        assert_eq!(partition.high_watermark, 30, "wait {wait}");
        assert_eq!(partition.records.as_ref().map(Bytes::len), Some(0));
    }
    answers_all_four_when_allowed_50_ms(&mut client, &mut request).await;
}

/// Kafka reads one segment a response: with segments rolled by size, a
/// response stops at the end of the segment its first batch is in.
#[tokio::test]
async fn segments_end_a_response_at_the_segment_end() {
    let cluster = ScriptedCluster::start(1).await.expect("start");
    let id = cluster.create_topic("wal", 1).expect("create");
    let lens: Vec<usize> = four_batches(&cluster).iter().map(|b| b.1).collect();
    // Two batches a segment.
    let segment_bytes = u32::try_from(lens[0] + lens[1]).expect("small");
    cluster
        .set_habits(
            1,
            Habits {
                segment_bytes,
                ..Habits::KAFKA
            },
        )
        .expect("habits");
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    for (offset, batches) in [(0, vec![0, 10]), (5, vec![0, 10]), (22, vec![20, 25])] {
        let request = fetch_request(11, &[Want::new("wal", id, 0, offset, 1 << 20)], i32::MAX, 0);
        let response = client.call(11, &request).await.expect("Fetch");
        let records = only_partition(&response).records.clone().expect("records");
        let got = decode_records(&records);
        assert_eq!(
            (got.batches, got.partial),
            (batches, None),
            "offset {offset}"
        );
    }
}
