//! Produce is never written twice: not resent after a connection lost mid-request, retried once after an error code.

use crate::common::*;

/// Produces `value`, a batch of its own, to partition 0 (`after` says what
/// came before): it lands at the end of the log, once, and `expected`, the
/// log so far, holds it too.
async fn appends_once(
    s: &Setup,
    value: Bytes,
    expected: &mut Vec<(i64, Bytes)>,
    after: &FaultAction,
) {
    let base = s
        .produce(0, batch(std::slice::from_ref(&value)))
        .await
        .unwrap_or_else(|e| panic!("{after:?}: {e}"));
    assert_eq!(base, i64::try_from(expected.len()).expect("small"));
    expected.push((base, value));
    assert_eq!(log_records(&s.scripted, 0), *expected, "{after:?}");
}

/// After a connection lost with the Produce on the wire, the client cannot
/// know whether the batch was written, so it returns the error and does
/// not send the batch again. The log shows what the broker did: nothing
/// for a dropped request, the batch once for every other fault.
#[tokio::test(start_paused = true)]
async fn produce_is_not_resent_after_a_connection_lost_mid_request() {
    let s = setup().await;
    let mut actions = connection_faults();
    actions.push(FaultAction::Delay(FOREVER));
    let mut expected = s.records.clone();
    for (n, action) in actions.into_iter().enumerate() {
        s.fails_once_on_broker_1(ApiKey::Produce, &action);
        let value = Bytes::from(format!("produce {n}"));
        let started = Instant::now();
        let error = s
            .produce(0, batch(std::slice::from_ref(&value)))
            .await
            .expect_err("not retried");
        let lost = match &error {
            ClientError::Connection(e) => e.clone(),
            other => panic!("{action:?}: {other:?}"),
        };
        if let FaultAction::Delay(_) = action {
            assert!(
                matches!(
                    lost,
                    ConnectionError::RequestTimeout {
                        api: ApiKey::Produce,
                        ..
                    }
                ),
                "{lost:?}"
            );
            // The request timeout plus the Produce timeout.
            assert_eq!(
                started.elapsed(),
                REQUEST_TIMEOUT + Duration::from_millis(500)
            );
        } else {
            assert!(is_error_of(&action, &lost), "{action:?}: {lost:?}");
        }
        assert_eq!(s.requests(ApiKey::Produce), 1, "{action:?}: sent once");
        if action != FaultAction::DropRequest {
            let offset = i64::try_from(expected.len()).expect("small");
            expected.push((offset, value));
        }
        assert_eq!(log_records(&s.scripted, 0), expected, "{action:?}");
        s.assert_fault_fired(&action);
        // The client carries on, on a new connection.
        let value = Bytes::from(format!("produce {n} again"));
        appends_once(&s, value, &mut expected, &action).await;
    }
}

/// A retriable error code means the broker did not write the batch, so the
/// client sends it again; the log holds it once.
#[tokio::test]
async fn produce_retried_after_an_error_code_writes_the_batch_once() {
    let s = setup().await;
    // REQUEST_TIMED_OUT is left out: on Produce it may mean written (see
    // below).
    let mut cases: Vec<FaultAction> = RETRIABLE
        .iter()
        .filter(|&&(code, _)| code != 7)
        .map(|&(code, _)| FaultAction::PartitionError(code))
        .collect();
    cases.push(FaultAction::TopicError(6));
    let mut expected = s.records.clone();
    for (n, action) in cases.into_iter().enumerate() {
        s.fails_twice_on_broker_1(ApiKey::Produce, &action);
        appends_once(
            &s,
            Bytes::from(format!("produce {n}")),
            &mut expected,
            &action,
        )
        .await;
        assert_eq!(s.requests(ApiKey::Produce), 3, "{action:?}");
        s.assert_fault_fired(&action);
    }
}

/// Two retriable codes say the leader may have written the batch:
/// REQUEST_TIMED_OUT (the replicas did not acknowledge in time) and
/// NOT_ENOUGH_REPLICAS_AFTER_APPEND. Like a lost connection, they end a
/// Produce with the error instead of a resend that could write it twice.
#[tokio::test]
async fn produce_is_not_resent_after_an_error_code_that_may_mean_written() {
    let s = setup().await;
    for code in [7, 20] {
        s.scripted.reset_stats();
        s.scripted.script(
            Fault::on(ApiKey::Produce)
                .times(u32::MAX)
                .then(FaultAction::PartitionError(code)),
        );
        let error = s
            .produce(0, batch(&[Bytes::from_static(b"maybe written")]))
            .await
            .expect_err("not resent");
        assert_kafka_error(&s, &error, ApiKey::Produce, code);
        assert_eq!(s.requests(ApiKey::Produce), 1, "{code}: sent once");
        s.scripted.clear_faults();
        // Fetch retries the same codes.
        s.scripted
            .script(Fault::on(ApiKey::Fetch).then(FaultAction::PartitionError(code)));
        let fetched = s.fetch().await.expect("fetch retried");
        assert_eq!(decode(&fetched.records), s.records);
        assert_eq!(s.requests(ApiKey::Fetch), 2, "{code}");
    }
}

/// Failures before the Produce is sent — the leader lookup's Metadata
/// request lost, or the new connection to the leader failing its
/// ApiVersions handshake — are retried: the batch cannot have been written.
#[tokio::test]
async fn produce_is_retried_after_failures_before_it_was_sent() {
    let cases = [
        (ApiKey::ApiVersions, FaultAction::CutBeforeResponse),
        (ApiKey::ApiVersions, FaultAction::DropRequest),
        (
            ApiKey::ApiVersions,
            FaultAction::TruncatedFrame { missing: 10 },
        ),
        (ApiKey::Metadata, FaultAction::CutBeforeResponse),
        (ApiKey::Metadata, FaultAction::DropRequest),
    ];
    for (api, action) in cases {
        // Partition 1's leader is broker 2, which the client has not
        // connected to yet; the leader is looked up again, and every
        // broker's Metadata fails once.
        let s = setup().await;
        s.cluster.invalidate(TOPIC);
        let times = if api == ApiKey::Metadata { 2 } else { 1 };
        s.scripted
            .script(Fault::on(api).times(times).then(action.clone()));
        let value = Bytes::from_static(b"to partition 1");
        let base = s
            .produce(1, batch(std::slice::from_ref(&value)))
            .await
            .unwrap_or_else(|e| panic!("{api:?} {action:?}: {e}"));
        assert_eq!(base, 0);
        assert_eq!(log_records(&s.scripted, 1), vec![(0, value)]);
        assert_eq!(s.requests(ApiKey::Produce), 1, "{api:?} {action:?}");
        s.assert_fault_fired(&action);
    }
}
