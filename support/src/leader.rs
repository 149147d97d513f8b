//! A Fetch sent as built on the connection to a partition's leader, with
//! the leader's epoch and topic id: what tests of a broker's Fetch answers
//! send, below the client's retries.

use walfetch::cluster::{fetch_on, ClientError, FetchParams, FetchedPartition, PartitionLeader};
use walfetch::connection::Connection;

/// `params` fetched on `connection`, the connection to `leader`, with the
/// leader's epoch and topic id, at `version` (`None`: the highest both
/// sides speak).
pub async fn fetch_on_leader(
    connection: &Connection,
    leader: &PartitionLeader,
    params: &FetchParams,
    version: Option<i16>,
) -> Result<FetchedPartition, ClientError> {
    fetch_on(
        connection,
        params,
        leader.leader_epoch,
        leader.topic_id,
        version,
    )
    .await
}
