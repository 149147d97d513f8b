#[test]
fn raw_kafka_protocol_huge_count() {
    use kafka_protocol::protocol::Decodable;
    let mut b = bytes::Bytes::from_static(&[0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff]);
    let r = kafka_protocol::messages::FetchResponse::decode(&mut b, 4);
    println!("result: {:?}", r.map(|_| ()));
}
