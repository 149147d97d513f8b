//! ListOffsets: every version.

use crate::common::*;

#[tokio::test]
async fn list_offsets_every_version() {
    let cluster = ScriptedCluster::start(2).await.expect("start");
    cluster.create_topic("wal", 2).expect("create");
    cluster
        .append("wal", 0, batch(3, 10, 100).bytes)
        .expect("append"); // 0..=2, ts 100..=102
    cluster
        .append("wal", 0, batch(3, 10, 200).bytes)
        .expect("append"); // 3..=5, ts 200..=202
    cluster
        .append("wal", 0, batch(2, 10, 150).bytes)
        .expect("append"); // 6..=7, ts 150..=151
    cluster.append("wal", 0, txn_batch(9, 2)).expect("append"); // 8..=9, open transaction
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    for version in 1..=7 {
        let ask = |ts: i64, isolation: i8| list_offsets("wal", 0, ts, isolation, -1);
        let mut check = vec![
            (ask(-2, 0), 0, -1),
            (ask(-1, 0), 10, -1),
            (ask(150, 0), 3, 200),
            (ask(101, 0), 1, 101),
            (ask(999, 0), -1, -1),
        ];
        if version >= 2 {
            check.push((ask(-1, 1), 8, -1));
        }
        if version >= 7 {
            check.push((ask(-3, 0), 5, 202));
        }
        for (request, offset, timestamp) in check {
            let response = client
                .call(version, &request)
                .await
                .unwrap_or_else(|e| panic!("ListOffsets v{version}: {e:?}"));
            let p = &response.topics[0].partitions[0];
            assert_eq!(
                (p.error_code, p.offset, p.timestamp),
                (0, offset, timestamp),
                "v{version} timestamp {}",
                request.topics[0].partitions[0].timestamp
            );
            if version >= 4 && offset >= 0 {
                assert_eq!(p.leader_epoch, 0);
            }
        }
    }
    let cases = [
        (
            list_offsets("wal", 1, -1, 0, -1),
            ResponseError::NotLeaderOrFollower,
        ),
        (
            list_offsets("wal", 5, -1, 0, -1),
            ResponseError::UnknownTopicOrPartition,
        ),
        (
            list_offsets("nope", 0, -1, 0, -1),
            ResponseError::UnknownTopicOrPartition,
        ),
        (
            list_offsets("wal", 0, -1, 0, 3),
            ResponseError::UnknownLeaderEpoch,
        ),
    ];
    for (request, error) in cases {
        let response = client.call(7, &request).await.expect("ListOffsets");
        assert_eq!(
            response.topics[0].partitions[0].error_code,
            error.code(),
            "{error:?}"
        );
    }
    cluster.move_leader("wal", 0, 1).expect("move"); // epoch 1, same leader
    let response = client
        .call(7, &list_offsets("wal", 0, -1, 0, 0))
        .await
        .expect("ListOffsets");
    assert_eq!(
        response.topics[0].partitions[0].error_code,
        code(ResponseError::FencedLeaderEpoch)
    );
}
