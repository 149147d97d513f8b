//! Unit tests of the retry driver: deadlines, backoff, what is retried
//! and what is not, and operations' futures being `Send`.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use tokio::time::Instant;

use super::pool::Pool;
use super::*;
use crate::error_code::ErrorCode;

type SendFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

fn offline_cluster(retry: RetryPolicy) -> Cluster {
    let mut config = ClusterConfig::new(["127.0.0.1:1"]);
    config.retry = retry;
    Cluster {
        pool: Pool::new(config.connection.clone(), config.connections_per_broker),
        config,
        metadata: Mutex::new(ClusterMetadata::default()),
        refresh: tokio::sync::Mutex::new(()),
        topic_reads: Default::default(),
        preferred: Default::default(),
        unshared: Default::default(),
        runtime: None,
    }
}

fn kafka(code: ErrorCode) -> ClientError {
    ClientError::Kafka {
        api: ApiKey::Fetch,
        code,
        topic: Some("t".into()),
        partition: Some(0),
        broker: "127.0.0.1:1".into(),
        message: None,
    }
}

/// Runs `attempt` (given its number, from 1) under the retry driver as the
/// operation "op" on `topic`; returns the outcome and the attempts made.
async fn retry<T, A>(
    cluster: &Cluster,
    idempotent: bool,
    topic: Option<&str>,
    mut attempt: impl FnMut(u32) -> A,
) -> (Result<T, ClientError>, u32)
where
    A: Future<Output = Result<T, ClientError>>,
{
    let mut calls = 0;
    let outcome = cluster
        .retrying(
            || "op".into(),
            idempotent,
            topic,
            || {
                calls += 1;
                attempt(calls)
            },
        )
        .await;
    (outcome, calls)
}

/// A policy with no jitter that gives up after `deadline`.
fn exact_policy(deadline: Duration) -> RetryPolicy {
    RetryPolicy {
        jitter: 0.0,
        deadline,
        ..RetryPolicy::default()
    }
}

/// An attempt cut at the deadline after others failed reports the last
/// failure, not "no cause": the bootstrap under `with_timeout` failed
/// its first handshake, started a second and was cut in it.
#[tokio::test(start_paused = true)]
async fn an_attempt_cut_at_the_deadline_reports_the_previous_attempts_error() {
    let cluster = offline_cluster(exact_policy(Duration::from_secs(1)));
    let (outcome, _) = retry(&cluster, true, None, |n| async move {
        if n > 1 {
            std::future::pending::<()>().await;
        }
        Err::<(), _>(kafka(ErrorCode::NotLeaderOrFollower))
    })
    .await;
    match &outcome.expect_err("cut") {
        ClientError::RetriesExhausted {
            attempts: 2,
            last: Some(last),
            ..
        } => assert_eq!(last.code(), Some(ErrorCode::NotLeaderOrFollower)),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn retriable_errors_are_retried_with_backoff_until_the_deadline() {
    let cluster = offline_cluster(exact_policy(Duration::from_secs(1)));
    let started = Instant::now();
    let (outcome, calls) = retry(&cluster, true, Some("t"), |_| async {
        Err::<(), _>(kafka(ErrorCode::NotLeaderOrFollower))
    })
    .await;
    let err = outcome.expect_err("gives up");
    // Delays 50, 100, 200, 400 ms (750 ms); the next (800 ms) would pass the deadline.
    assert_eq!(calls, 5);
    assert_eq!(started.elapsed(), Duration::from_millis(750));
    match &err {
        ClientError::RetriesExhausted {
            attempts,
            last: Some(last),
            ..
        } => {
            assert_eq!(*attempts, 5);
            assert_eq!(last.code(), Some(ErrorCode::NotLeaderOrFollower));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        err.to_string().contains("gave up on op after 5 attempt(s)"),
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn non_retriable_errors_surface_at_once_and_success_ends_retries() {
    let cluster = offline_cluster(RetryPolicy::default());
    let (outcome, calls) = retry(&cluster, true, None, |_| async {
        Err::<(), _>(kafka(ErrorCode::OffsetOutOfRange))
    })
    .await;
    let err = outcome.expect_err("fatal");
    assert_eq!((calls, err.code()), (1, Some(ErrorCode::OffsetOutOfRange)));

    let (outcome, _) = retry(&cluster, true, None, |n| async move {
        if n < 3 {
            Err(kafka(ErrorCode::LeaderNotAvailable))
        } else {
            Ok(n)
        }
    })
    .await;
    assert_eq!(outcome.expect("third attempt succeeds"), 3);
}

#[tokio::test(start_paused = true)]
async fn a_hung_attempt_is_cut_at_the_deadline() {
    let cluster = offline_cluster(RetryPolicy {
        deadline: Duration::from_millis(300),
        ..RetryPolicy::default()
    });
    let (outcome, _) = retry(&cluster, true, None, |_| {
        std::future::pending::<Result<(), ClientError>>()
    })
    .await;
    let err = outcome.expect_err("deadline");
    assert!(
        matches!(
            err,
            ClientError::RetriesExhausted {
                last: None,
                attempts: 1,
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn produce_is_not_resent_after_a_connection_lost_mid_request() {
    let cluster = offline_cluster(RetryPolicy::default());
    let lost = || {
        ClientError::Connection(crate::connection::ConnectionError::ClosedByPeer {
            broker: "127.0.0.1:1".into(),
        })
    };
    let (outcome, calls) = retry(&cluster, false, None, |_| async { Err::<(), _>(lost()) }).await;
    let err = outcome.expect_err("not retried");
    assert_eq!(calls, 1);
    assert!(matches!(err, ClientError::Connection(_)), "{err:?}");
    // The same failure is retried for an idempotent operation.
    assert!(lost().is_retriable(true));
}

#[tokio::test(start_paused = true)]
async fn bootstrap_without_a_broker_gives_up_with_the_connect_error() {
    let mut config = ClusterConfig::new(["127.0.0.1:1"]);
    config.retry.deadline = Duration::from_millis(500);
    let err = Cluster::connect(config).await.expect_err("no broker");
    let msg = err.to_string();
    assert!(msg.contains("gave up on bootstrap"), "{msg}");
    assert!(msg.contains("127.0.0.1:1"), "{msg}");
    let err = Cluster::connect(ClusterConfig::new(Vec::<String>::new()))
        .await
        .expect_err("no bootstrap list");
    assert!(matches!(err, ClientError::InvalidArgument(_)), "{err:?}");
}

/// The operations' futures are `Send` even when boxed generically (as a
/// consumer keeping several fetches in flight does), so they can be
/// spawned and stored. A compile-time check.
#[allow(dead_code)]
fn operations_are_send(cluster: Arc<Cluster>, params: FetchParams) -> Vec<SendFuture<()>> {
    let c = Arc::clone(&cluster);
    let fetch: SendFuture<()> = Box::pin(async move {
        let _ = c.fetch(&params).await;
    });
    let c = Arc::clone(&cluster);
    let list: SendFuture<()> = Box::pin(async move {
        let _ = c
            .list_offsets("t", 0, OffsetSpec::Latest, IsolationLevel::ReadCommitted)
            .await;
    });
    let c = Arc::clone(&cluster);
    let produce: SendFuture<()> = Box::pin(async move {
        let _ = c.produce("t", 0, Bytes::new()).await;
    });
    let admin: SendFuture<()> = Box::pin(async move {
        let _ = cluster.create_topics(&[NewTopic::new("t", 1)]).await;
        let _ = cluster.metadata(None).await;
        let _ = cluster.leader_connection("t", 0).await;
        let _ = Cluster::connect(ClusterConfig::new(["127.0.0.1:1"])).await;
    });
    vec![fetch, list, produce, admin]
}
