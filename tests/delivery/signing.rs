//! C-07 (without rotation): the signed bytes are the bytes sent, identical on every
//! attempt, and the signature verifies with the subscriber's secret.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::app::Db;
use crate::receiver::{Receiver, Recorded, Reply};
use crate::setup::{instance, step_until};

const C07_PAYLOAD: &str = r#"{"b":1,"a":"\u001B é \u2028 😀","n":12345678901234567890,"f":1.0}"#;

/// Verifies `webhook-signature` over the received bytes, independently of deferhook's
/// own signing code.
pub(crate) fn verifies(secret: &str, request: &Recorded) -> bool {
    let key = STANDARD
        .decode(secret.strip_prefix("whsec_").unwrap())
        .unwrap();
    let signed = [
        request.header("webhook-id").as_bytes(),
        b".",
        request.header("webhook-timestamp").as_bytes(),
        b".",
        &request.body,
    ]
    .concat();
    request.header("webhook-signature").split(' ').any(|sig| {
        let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
        mac.update(&signed);
        let expected = STANDARD.decode(sig.strip_prefix("v1,").unwrap()).unwrap();
        mac.verify_slice(&expected).is_ok()
    })
}

async fn c07_the_exact_bytes_are_sent_and_signed_on_every_attempt(db: Db) {
    let receiver = Receiver::start(vec![Reply::status(500), Reply::status(200)]).await;
    let app = instance(db).start().await;
    let secret = app.subscriber("s", &receiver.url("/"), None).await;
    let body = format!(r#"{{"subscriber_id":"s","event_id":"evt-c07","payload":{C07_PAYLOAD}}}"#);
    let job = app.job_raw(&body).await;
    step_until(&app, &job, "delivered", 3).await;
    let requests = receiver.requests();
    assert_eq!(requests.len(), 2);
    let attempts = app.attempts(&job).await;
    for (request, attempt) in requests.iter().zip(&attempts) {
        assert_eq!(&request.body[..], C07_PAYLOAD.as_bytes());
        assert_eq!(request.header("webhook-id"), "evt-c07");
        // Signed at the time of sending, by the instance's clock.
        let sent_at: i64 = request.header("webhook-timestamp").parse().unwrap();
        let started = attempt["started_at"].as_str().unwrap();
        let now = deferhook::domain::Timestamp::parse_rfc3339(started)
            .unwrap()
            .as_unix_seconds();
        assert_eq!(sent_at, now, "timestamp {sent_at} vs now {now}");
        assert!(request.header("webhook-signature").starts_with("v1,"));
        assert!(verifies(&secret, request), "signature does not verify");
    }
    // A signature from another secret does not verify.
    let other = deferhook::domain::secret::SigningSecret::generate();
    assert!(!verifies(other.expose(), &requests[0]));
}

async fn the_example_secret_of_the_spec_signs_as_the_spec_says(db: Db) {
    let receiver = Receiver::ok().await;
    let app = instance(db).start().await;
    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    app.subscriber("s", &receiver.url("/"), Some(secret)).await;
    let job = app
        .job_raw(r#"{"subscriber_id":"s","event_id":"msg_p5jXN8AQM9LWM0D4loKWxJek","payload":{"test": 2432232314}}"#)
        .await;
    app.run_pending().await;
    assert_eq!(app.job_now(&job).await["state"], "delivered");
    let request = &receiver.requests()[0];
    assert_eq!(&request.body[..], br#"{"test": 2432232314}"#);
    assert!(verifies(secret, request));
}

crate::on_both_backends!(
    c07_the_exact_bytes_are_sent_and_signed_on_every_attempt,
    the_example_secret_of_the_spec_signs_as_the_spec_says,
);
