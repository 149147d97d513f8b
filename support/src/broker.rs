//! The broker matrix: one test body, run on Apache Kafka (the broker users
//! run) and on Tansu (the second real broker).
//!
//! [`on_brokers!`](crate::on_brokers) turns `async fn name(broker: &TestBroker)` bodies into a
//! `#[tokio::test]` per broker, `kafka::name` and `tansu::name`. Bodies
//! take their topic names from [`TestBroker::topic`]: Kafka's node is
//! shared by the test binary, so its names are made unique; every Tansu
//! test has a broker of its own.

use walfetch::cluster::{Cluster, ClusterConfig, NewTopic};
use walfetch_brokers::kafka::{find_kafka, KafkaCluster, KafkaConfig};

use crate::kafka;
use crate::tansu::Tansu;

/// Which real broker a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerKind {
    /// Apache Kafka, pinned release, single KRaft node.
    Kafka,
    /// Tansu 0.6, in-memory storage.
    Tansu,
}

/// A Kafka node a test runs on.
pub enum KafkaNode {
    /// The test binary's shared node.
    Shared(&'static KafkaCluster),
    /// A node of this test's own, for a test that stops its broker.
    Own(Box<KafkaCluster>),
}

impl std::ops::Deref for KafkaNode {
    type Target = KafkaCluster;

    fn deref(&self) -> &KafkaCluster {
        match self {
            Self::Shared(k) => k,
            Self::Own(k) => k,
        }
    }
}

/// A real broker a test body runs against.
pub enum TestBroker {
    /// A Kafka node.
    Kafka(KafkaNode),
    /// A Tansu broker of this test's own.
    Tansu(Tansu),
}

impl TestBroker {
    /// Starts (Tansu) or joins (Kafka) a broker of `kind`.
    pub async fn start(kind: BrokerKind) -> Self {
        match kind {
            BrokerKind::Kafka => Self::Kafka(KafkaNode::Shared(tokio::task::block_in_place(
                kafka::shared,
            ))),
            BrokerKind::Tansu => Self::Tansu(Tansu::start().await),
        }
    }

    /// A broker of `kind` that no other test uses: dropping it stops it.
    pub async fn start_own(kind: BrokerKind) -> Self {
        match kind {
            BrokerKind::Kafka => {
                let install = find_kafka().unwrap_or_else(|e| panic!("{e}"));
                let node = KafkaCluster::start(&install, KafkaConfig::nodes(1))
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                Self::Kafka(KafkaNode::Own(Box::new(node)))
            }
            BrokerKind::Tansu => Self::Tansu(Tansu::start().await),
        }
    }

    /// Which broker this is.
    pub fn kind(&self) -> BrokerKind {
        match self {
            Self::Kafka(_) => BrokerKind::Kafka,
            Self::Tansu(_) => BrokerKind::Tansu,
        }
    }

    /// `"kafka"` or `"tansu"`, for messages.
    pub fn name(&self) -> &'static str {
        match self.kind() {
            BrokerKind::Kafka => "kafka",
            BrokerKind::Tansu => "tansu",
        }
    }

    /// A topic name for this test: `base` itself on a broker of the test's
    /// own, made unique on a shared one.
    pub fn topic(&self, base: &str) -> String {
        match self {
            Self::Kafka(KafkaNode::Shared(_)) => kafka::unique_topic(base),
            Self::Kafka(KafkaNode::Own(_)) | Self::Tansu(_) => base.to_owned(),
        }
    }

    /// `127.0.0.1:PORT` of the plain-text listener.
    pub fn address(&self) -> String {
        match self {
            Self::Kafka(k) => k.address(0),
            Self::Tansu(t) => t.address(),
        }
    }

    /// What the broker logged so far.
    pub fn log_text(&self) -> String {
        match self {
            Self::Kafka(k) => k.log_text(0),
            Self::Tansu(t) => t.log_text(),
        }
    }

    /// A cluster config for this broker with test-sized timeouts.
    pub fn cluster_config(&self) -> ClusterConfig {
        match self {
            Self::Kafka(k) => k.cluster_config(),
            Self::Tansu(t) => t.cluster_config(),
        }
    }

    /// A cluster client bootstrapped from this broker.
    pub async fn cluster(&self) -> Cluster {
        Cluster::connect(self.cluster_config())
            .await
            .unwrap_or_else(|e| panic!("bootstrap from {} at {}: {e}", self.name(), self.address()))
    }

    /// A cluster client with a fresh topic `topic` of `partitions`
    /// partitions (pass a name from [`TestBroker::topic`]).
    pub async fn cluster_with_topic(&self, topic: &str, partitions: i32) -> Cluster {
        let cluster = self.cluster().await;
        cluster
            .create_topics(&[NewTopic::new(topic, partitions)])
            .await
            .unwrap_or_else(|e| panic!("create topic {topic:?} on {}: {e}", self.name()));
        cluster
    }
}

/// One `#[tokio::test]` per broker for each named body
/// `async fn name(broker: &TestBroker)`: `kafka::name` and `tansu::name`.
#[macro_export]
macro_rules! on_brokers {
    ($($name:ident),+ $(,)?) => {
        $crate::on_brokers!(@module kafka, Kafka, $($name),+);
        $crate::on_brokers!(@module tansu, Tansu, $($name),+);
    };
    (@module $module:ident, $kind:ident, $($name:ident),+) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let broker = $crate::broker::TestBroker::start(
                        $crate::broker::BrokerKind::$kind,
                    )
                    .await;
                    super::$name(&broker).await;
                }
            )+
        }
    };
}
