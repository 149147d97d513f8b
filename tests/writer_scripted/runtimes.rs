//! Writers outside a tokio runtime: made outside one, and stopped with their runtime.

use crate::common::*;

/// The runtime running a writer shuts down (a server stopping) while a
/// batch it sent waits for its answer, and the broker has appended it.
/// Its entry was told "the writer is closed", which says it was not
/// written (only `MaybeWritten` and `WrittenOffsetUnknown` say otherwise):
/// a caller appending it again wrote it twice. It now says it may have
/// been written; an entry never sent still says the writer is closed.
#[test]
fn a_writer_stopped_with_its_runtime_says_which_entries_may_be_written() {
    let brokers = tokio::runtime::Runtime::new().unwrap();
    let scripted = brokers.block_on(async {
        let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
        scripted.create_topic(TOPIC, 1).expect("topic");
        scripted
    });
    // Appended, never answered.
    scripted.script(
        Fault::on(ApiKey::Produce)
            .times(u32::MAX)
            .then(FaultAction::LoseResponse),
    );
    let server = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (writer, sent, unsent) = server.block_on(async {
        let config = ClusterConfig::new([scripted.bootstrap()]);
        let cluster = Arc::new(Cluster::connect(config).await.expect("bootstrap"));
        let config = WriterConfig::new(TOPIC, 0)
            .with_max_in_flight(1)
            .with_linger(Duration::ZERO);
        let writer = WalWriter::new(cluster, config);
        let sent = writer.append(WalEntry::new(1, "in the log")).await.unwrap();
        while scripted.high_watermark(TOPIC, 0).unwrap() < 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Behind the request in flight: never sent.
        let unsent = writer.append(WalEntry::new(2, "not sent")).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        (writer, sent, unsent)
    });
    drop(server);
    let (sent, unsent) = brokers.block_on(async { (sent.await, unsent.await) });
    assert!(
        matches!(&sent, Err(Error::MaybeWritten { partition: 0, .. })),
        "{sent:?}"
    );
    let said = sent.unwrap_err().to_string();
    assert!(said.contains("runtime shut down"), "{said}");
    assert!(
        matches!(&unsent, Err(Error::WriterClosed { partition: 0, .. })),
        "{unsent:?}"
    );
    assert_eq!(scripted.high_watermark(TOPIC, 0).unwrap(), 1);
    drop(writer);
}

/// A writer made in synchronous code, outside any tokio runtime (a
/// server's setup on a thread of its own): `WalWriter::new` panicked ("no
/// reactor running"). Its task now runs in the runtime the cluster was
/// connected in.
#[test]
fn a_writer_made_outside_a_runtime_runs_in_its_clusters() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (scripted, cluster) = runtime.block_on(scripted());
    let writer = std::thread::spawn(move || WalWriter::new(cluster, config(WriterMode::Clustered)))
        .join()
        .expect("made without a panic");
    let offset = runtime.block_on(async {
        let appended = writer.append(WalEntry::new(1, "x")).await.unwrap();
        let offset = appended.await.expect("written");
        writer.close().await.expect("closed");
        offset
    });
    assert_eq!(offset, 0);
    assert_eq!(scripted.high_watermark(TOPIC, 0).unwrap(), 1);
}
