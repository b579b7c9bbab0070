//! Secrets at rest: with a key, the columns hold `enc:v1:` values that are not the
//! secret, and the claim still returns the secret in clear; plaintext values written
//! without a key stay readable and are sealed when next written; a value sealed with
//! another key fails that subscriber's claims only, naming it and nothing secret.
//!
//! Each case opens stores with and without a key on the backend's one database, and
//! reads the columns with its own SQL connection.

use deferhook::domain::secret::{PreviousSecret, SigningSecret, SigningSecrets};
use deferhook::store::sealing::{SEALED_PREFIX, UnsealError};
use deferhook::store::{Sealer, SecretRotation, SharedStore};
use sqlx::Connection;

use crate::support::{Backend, add_subscriber, at, claim, claim_one, create_due};

const KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
const OTHER_KEY: &str = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=";

/// Another store on `backend`'s database, sealing with `key`.
async fn keyed(backend: &Backend, key: &str) -> SharedStore {
    let sealer = Sealer::from_base64_key(key).unwrap();
    deferhook::store::open_with_sealer_unchecked(&backend.url, sealer)
        .await
        .expect("open a second store on the same database")
}

/// `secret` and `previous_secret` of subscriber `id`, as stored.
async fn columns(backend: &Backend, id: &str) -> (String, Option<String>) {
    if backend.url.starts_with("sqlite:") {
        let mut connection = sqlx::SqliteConnection::connect(&backend.url).await.unwrap();
        sqlx::query_as("SELECT secret, previous_secret FROM subscribers WHERE id = ?1")
            .bind(id)
            .fetch_one(&mut connection)
            .await
            .unwrap()
    } else {
        let mut connection = sqlx::PgConnection::connect(&backend.url).await.unwrap();
        sqlx::query_as("SELECT secret, previous_secret FROM subscribers WHERE id = $1")
            .bind(id)
            .fetch_one(&mut connection)
            .await
            .unwrap()
    }
}

/// A column value that is sealed and does not contain `secret` (nor its key's base64).
fn assert_sealed(stored: &str, secret: &SigningSecret) {
    assert!(stored.starts_with(SEALED_PREFIX), "not sealed: {stored}");
    let encoded = secret.expose().strip_prefix("whsec_").unwrap();
    assert!(
        !stored.contains(encoded),
        "the secret is readable in {stored}"
    );
}

/// Rotates subscriber `id` to a fresh secret at `now_ms`; returns it.
pub async fn rotate(store: &SharedStore, id: &str, grace_ms: u64, now_ms: i64) -> SigningSecret {
    let secret = SigningSecret::generate();
    let rotation = SecretRotation {
        subscriber_id: id.to_owned(),
        secret: secret.clone(),
        grace_ms,
    };
    store
        .rotate_secret(rotation, at(now_ms))
        .await
        .unwrap()
        .expect("the subscriber exists");
    secret
}

store_case!(
    secrets_are_stored_sealed_and_claimed_in_clear,
    async |backend: Backend| {
        let store = keyed(&backend, KEY).await;
        let old = add_subscriber(&store, "s").await;
        let (secret, previous) = columns(&backend, "s").await;
        assert_sealed(&secret, &old);
        assert_eq!(previous, None);

        let new = rotate(&store, "s", 60_000, 1_000).await;
        let (secret, previous) = columns(&backend, "s").await;
        assert_sealed(&secret, &new);
        assert_sealed(&previous.expect("the previous secret is kept"), &old);

        create_due(&store, "s", at(0)).await;
        let claimed = claim_one(&store, "w", at(2_000)).await;
        assert_eq!(
            claimed.secrets.unwrap(),
            SigningSecrets {
                current: new,
                previous: Some(PreviousSecret {
                    secret: old,
                    expires_at: at(61_000),
                }),
            }
        );
    }
);

store_case!(
    plaintext_secrets_stay_readable_and_are_sealed_when_next_written,
    async |backend: Backend| {
        // Written before a key was configured: plaintext.
        let old = add_subscriber(&backend.store, "legacy").await;
        assert_eq!(
            columns(&backend, "legacy").await,
            (old.expose().to_owned(), None)
        );

        // The same database, now with a key: the plaintext value still reads.
        let store = keyed(&backend, KEY).await;
        create_due(&store, "legacy", at(0)).await;
        let claimed = claim_one(&store, "w", at(1_000)).await;
        assert_eq!(
            claimed.secrets.unwrap(),
            SigningSecrets::single(old.clone())
        );

        // The next write of the secrets seals both, the moved plaintext one included.
        let new = rotate(&store, "legacy", 60_000, 2_000).await;
        let (secret, previous) = columns(&backend, "legacy").await;
        assert_sealed(&secret, &new);
        assert_sealed(&previous.expect("the previous secret is kept"), &old);
        create_due(&store, "legacy", at(0)).await;
        let claimed = claim_one(&store, "w", at(3_000)).await;
        assert_eq!(claimed.secrets.unwrap().active_at(at(3_000)), [new, old]);
    }
);

store_case!(
    a_wrong_key_fails_only_its_subscribers_claims,
    async |backend: Backend| {
        let sealing = keyed(&backend, KEY).await;
        let sealed = add_subscriber(&sealing, "sealed").await;
        let plain = add_subscriber(&backend.store, "plain").await;
        create_due(&sealing, "sealed", at(0)).await;
        create_due(&sealing, "plain", at(0)).await;

        let wrong = keyed(&backend, OTHER_KEY).await;
        let claimed = claim(&wrong, at(1_000), 10).await;
        assert_eq!(claimed.len(), 2, "the claim itself does not fail");
        for job in claimed {
            match job.subscriber_id.as_str() {
                "plain" => assert_eq!(job.secrets.unwrap(), SigningSecrets::single(plain.clone())),
                "sealed" => {
                    let error = job.secrets.unwrap_err();
                    assert_eq!(error.subscriber_id, "sealed");
                    assert_eq!(error.reason, UnsealError::WrongKey);
                    let message = format!("{error} {error:?}");
                    assert!(message.contains("`sealed`"), "{message}");
                    let encoded = sealed.expose().strip_prefix("whsec_").unwrap();
                    assert!(!message.contains(encoded), "{message}");
                    assert!(!message.contains(KEY) && !message.contains(OTHER_KEY));
                }
                other => panic!("unexpected subscriber {other}"),
            }
        }

        // Without any key, a sealed secret is unreadable too, and says why.
        create_due(&sealing, "sealed", at(0)).await;
        let claimed = claim(&backend.store, at(2_000), 10).await;
        let job = claimed
            .iter()
            .find(|c| c.subscriber_id == "sealed")
            .expect("a sealed subscriber's job is claimed");
        let error = job.secrets.as_ref().unwrap_err();
        assert_eq!(error.reason, UnsealError::NoKey);
    }
);
