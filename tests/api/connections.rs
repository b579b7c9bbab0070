//! Open API connections are bounded (issue #34 part 4.5): one client address holds at
//! most `--max-connections-per-client` (a further one is closed at once, other
//! addresses go on); when `--max-connections` are open, a newcomer takes the oldest
//! place of the address holding the most (so a few addresses trickling bodies cannot
//! keep everyone out), and waits until one closes only when no address holds more than
//! one above it. Before, 4,000 connections trickling a body were all held.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::support::{TestApp, app_with};

/// A connection from `from` that sent a request head promising a body it never sends.
async fn held(app: &TestApp, from: &str) -> TcpStream {
    let address = app.base_url.trim_start_matches("http://").to_owned();
    let socket = TcpSocket::new_v4().unwrap();
    socket
        .bind((from.parse::<IpAddr>().unwrap(), 0).into())
        .unwrap();
    let mut stream = socket.connect(address.parse().unwrap()).await.unwrap();
    let head = format!(
        "POST /v1/jobs HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\n\
         content-length: 100\r\n\r\n{{"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

fn client_from(address: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(address.parse::<IpAddr>().unwrap())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// True when the server closes a new connection from `from` without answering.
async fn closed_at_once(app: &TestApp, from: &str) -> bool {
    let mut stream = held(app, from).await;
    let mut buffer = [0u8; 64];
    match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer)).await {
        Ok(Ok(0)) | Ok(Err(_)) => true,
        Ok(Ok(_)) | Err(_) => false,
    }
}

#[tokio::test]
async fn one_address_holds_at_most_its_share_of_connections() {
    let app = app_with()
        .flag("--max-connections", 16)
        .flag("--max-connections-per-client", 3)
        .start()
        .await;
    let mut holding = Vec::new();
    for _ in 0..3 {
        holding.push(held(&app, "127.0.0.1").await);
    }
    assert!(
        closed_at_once(&app, "127.0.0.1").await,
        "a fourth from the address is closed"
    );
    let other = client_from("127.0.0.2");
    let served = other.get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(served.status(), 200, "another address is served");
    drop(holding.pop());
    // The place is free once the server has seen the close.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let response = client_from("127.0.0.1")
            .get(app.url("/healthz"))
            .send()
            .await;
        if response.is_ok_and(|r| r.status() == 200) {
            break;
        }
        assert!(Instant::now() < deadline, "the closed connection's place");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let metrics = other
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let refused = metrics
        .lines()
        .find_map(|l| l.strip_prefix("deferhook_connections_refused_total "))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .expect("the counter");
    assert!(refused >= 1, "{refused}");
}

#[tokio::test]
async fn when_every_place_is_taken_a_new_address_takes_one_of_the_heaviest() {
    // The probe's flood: a few addresses hold every place with bodies they never send.
    let app = app_with()
        .flag("--max-connections", 6)
        .flag("--max-connections-per-client", 4)
        .start()
        .await;
    let mut holding = Vec::new();
    for from in ["127.0.0.1", "127.0.0.5"] {
        for _ in 0..3 {
            holding.push(held(&app, from).await);
        }
    }
    // One more of a flooding address, under its share, with nobody heavier to shed:
    // closed at once, not held in front of the newcomer below (the second probe).
    assert!(
        closed_at_once(&app, "127.0.0.1").await,
        "an address holding places got another while every place was taken"
    );
    let served = client_from("127.0.0.2")
        .get(app.url("/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        served.status(),
        200,
        "a client of another address is served"
    );
    // One of the flood's connections was closed for it.
    let mut closed = 0;
    for stream in &mut holding {
        let mut buffer = [0u8; 64];
        if let Ok(Ok(0) | Err(_)) =
            tokio::time::timeout(Duration::from_millis(200), stream.read(&mut buffer)).await
        {
            closed += 1;
        }
    }
    assert!(closed >= 1, "no connection of the flood was shed");
}

#[tokio::test]
async fn over_the_total_limit_a_connection_waits_until_one_closes() {
    let app = app_with()
        .flag("--max-connections", 2)
        .flag("--max-connections-per-client", 2)
        .start()
        .await;
    // One place each for two addresses: no address is heavier than a newcomer by more
    // than one, so nobody is shed.
    let mut holding = vec![held(&app, "127.0.0.1").await, held(&app, "127.0.0.4").await];
    let url = app.url("/healthz");
    let mut waiting = tokio::spawn(async move {
        client_from("127.0.0.3")
            .get(url)
            .send()
            .await
            .map(|r| r.status().as_u16())
    });
    assert!(
        tokio::time::timeout(Duration::from_millis(500), &mut waiting)
            .await
            .is_err(),
        "not served while every place is held"
    );
    drop(holding.pop());
    let status = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("served once a place is free")
        .unwrap()
        .unwrap();
    assert_eq!(status, 200);
}
