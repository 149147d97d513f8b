//! ApiVersions: every version, unsupported ones, limited versions advertised and enforced.

use crate::common::*;

#[tokio::test]
async fn api_versions_every_version_and_unsupported() {
    let cluster = ScriptedCluster::start(1).await.expect("start");
    let addr = cluster.addr(1).expect("broker 1");
    let mut client = RawClient::connect(addr).await;
    let mut expected: Vec<(i16, i16, i16)> = SERVED
        .iter()
        .map(|(k, r)| (*k as i16, r.min, r.max))
        .collect();
    expected.sort();
    for version in 0..=3 {
        let response = client
            .call(version, &ApiVersionsRequest::default())
            .await
            .unwrap_or_else(|e| panic!("ApiVersions v{version}: {e:?}"));
        assert_eq!(response.error_code, 0);
        let got: Vec<_> = response
            .api_keys
            .iter()
            .map(|k| (k.api_key, k.min_version, k.max_version))
            .collect();
        assert_eq!(got, expected, "v{version}");
    }
    // v4 is not served: UNSUPPORTED_VERSION in a v0 body, header v0.
    let id = client
        .send(4, &ApiVersionsRequest::default())
        .await
        .expect("send");
    let response: ApiVersionsResponse = client
        .recv::<ApiVersionsRequest>(0, id)
        .await
        .expect("a v0 answer");
    assert_eq!(response.error_code, code(ResponseError::UnsupportedVersion));
    assert_eq!(response.api_keys.len(), SERVED.len());
    // The connection is still usable.
    assert!(client.call(3, &ApiVersionsRequest::default()).await.is_ok());
}

#[tokio::test]
async fn limited_versions_are_advertised_and_enforced() {
    let cluster = ScriptedCluster::start(1).await.expect("start");
    cluster
        .limit_versions(1, ApiKey::Fetch, Some(VersionRange::new(0, 6)))
        .expect("limit");
    cluster
        .limit_versions(1, ApiKey::Produce, None)
        .expect("limit");
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    let response = client
        .call(3, &ApiVersionsRequest::default())
        .await
        .expect("ApiVersions");
    let fetch = response
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::Fetch as i16)
        .expect("fetch");
    assert_eq!((fetch.min_version, fetch.max_version), (4, 6));
    assert!(!response
        .api_keys
        .iter()
        .any(|k| k.api_key == ApiKey::Produce as i16));
    // Fetch v7 is now refused: the connection closes.
    let request = fetch_request(7, &[], 1024, 0);
    assert!(client.call(7, &request).await.is_err());
    cluster.reset_versions(1).expect("reset");
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    assert!(client.call(7, &request).await.is_ok());
}
