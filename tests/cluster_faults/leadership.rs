//! Leadership moves: every operation follows a leader moved to another broker.

use crate::common::*;

#[tokio::test]
async fn every_operation_follows_leadership_moved_to_another_broker() {
    for api in [
        ApiKey::Metadata,
        ApiKey::ListOffsets,
        ApiKey::Fetch,
        ApiKey::Produce,
    ] {
        let s = setup().await;
        if api == ApiKey::Metadata {
            s.cluster.invalidate(TOPIC);
        }
        // Broker 1 hands partition 0 to broker 2 as it gets the request,
        // then handles it: as the old leader, except Metadata, which
        // already names the new one.
        s.scripted.script(
            Fault::on(api)
                .broker(1)
                .topic(TOPIC)
                .partition(0)
                .then(FaultAction::MoveLeader { to: 2 }),
        );
        let value = Bytes::from_static(b"after the move");
        match api {
            ApiKey::ListOffsets => {
                assert_eq!(s.latest(0).await.expect("list_offsets"), Some(RECORDS));
            }
            ApiKey::Produce => {
                let base = s
                    .produce(0, batch(std::slice::from_ref(&value)))
                    .await
                    .expect("produce");
                assert_eq!(base, RECORDS);
            }
            _ => {
                let fetched = s.fetch().await.expect("fetch");
                assert_eq!(decode(&fetched.records), s.records, "{api:?}");
                assert_eq!(fetched.broker, s.addr(2), "{api:?}");
            }
        }
        s.assert_fault_fired(&api);
        let leader = s.scripted.leader(TOPIC, 0).expect("leader");
        assert_eq!((leader.node_id, leader.epoch), (2, 1), "{api:?}");
        let cached = s.cluster.leader(TOPIC, 0).await.expect("cached leader");
        assert_eq!(
            (cached.broker_id, cached.leader_epoch, cached.address),
            (2, 1, s.addr(2)),
            "{api:?}"
        );
        let (old, new) = (s.stats(1).requests_of(api), s.stats(2).requests_of(api));
        if api == ApiKey::Metadata {
            assert_eq!(s.requests(ApiKey::Fetch), 1);
            assert_eq!(s.stats(2).requests_of(ApiKey::Fetch), 1, "straight there");
        } else {
            assert_eq!((old, new), (1, 1), "{api:?}: refused by 1, done by 2");
        }
        if api == ApiKey::Produce {
            let mut expected = s.records.clone();
            expected.push((RECORDS, value));
            assert_eq!(log_records(&s.scripted, 0), expected, "written once");
        }
    }
}

/// Leadership moved behind the client's back (no fault on the request):
/// the old leader's refusal sends the client to the new one.
#[tokio::test]
async fn fetch_follows_a_leader_that_moved_between_requests() {
    let s = setup().await;
    for to in [2, 1] {
        s.scripted.move_leader(TOPIC, 0, to).expect("move");
        s.scripted.reset_stats();
        let fetched = s.fetch().await.expect("fetch");
        assert_eq!(decode(&fetched.records), s.records);
        assert_eq!(fetched.broker, s.addr(to));
        let from = 3 - to;
        assert_eq!(
            (
                s.stats(from).requests_of(ApiKey::Fetch),
                s.stats(to).requests_of(ApiKey::Fetch)
            ),
            (1, 1)
        );
    }
}
