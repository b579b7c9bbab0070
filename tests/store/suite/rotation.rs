//! Secret rotation (docs/DESIGN.md §4, §5): the new secret is current at once; the one it
//! replaced comes back with every claim, with its expiry, until its grace period ends;
//! only one previous secret is kept; a rotation without grace, or a PUT with a secret,
//! keeps none.

use deferhook::domain::secret::{PreviousSecret, SigningSecret, SigningSecrets};
use deferhook::store::{SecretRotation, SharedStore, SubscriberPut};

use crate::support::{add_subscriber, at, claim, claim_one, create_due, subscriber_put};

/// Rotates `id`'s secret to a fresh one at `now` with `grace_ms`; returns the new
/// secret.
async fn rotate(store: &SharedStore, id: &str, grace_ms: u64, now_ms: i64) -> SigningSecret {
    let secret = SigningSecret::generate();
    let rotation = SecretRotation {
        subscriber_id: id.to_owned(),
        secret: secret.clone(),
        grace_ms,
    };
    let rotated = store
        .rotate_secret(rotation, at(now_ms))
        .await
        .expect("rotate_secret")
        .expect("the subscriber exists");
    assert_eq!(rotated.subscriber.id, id);
    assert_eq!(rotated.subscriber.updated_at, at(now_ms));
    let expected = (grace_ms > 0).then(|| at(now_ms).plus_ms(grace_ms));
    assert_eq!(rotated.previous_secret_expires_at, expected);
    secret
}

/// The secrets of one claim of a job of `id` due at `START`, made at `now_ms`.
async fn claimed_secrets(store: &SharedStore, id: &str, now_ms: i64) -> SigningSecrets {
    create_due(store, id, at(0)).await;
    claim_one(store, "w", at(now_ms))
        .await
        .secrets
        .expect("readable secrets")
}

store_case!(
    rotation_keeps_the_previous_secret_until_it_expires,
    async |store: SharedStore| {
        let old = add_subscriber(&store, "s").await;
        let new = rotate(&store, "s", 60_000, 1_000).await;
        assert_ne!(new, old);

        let secrets = claimed_secrets(&store, "s", 2_000).await;
        assert_eq!(
            secrets,
            SigningSecrets {
                current: new.clone(),
                previous: Some(PreviousSecret {
                    secret: old.clone(),
                    expires_at: at(61_000),
                }),
            }
        );
        assert_eq!(secrets.active_at(at(2_000)), [new.clone(), old.clone()]);
        assert_eq!(secrets.active_at(at(61_000)), std::slice::from_ref(&new));

        // Claimed at the expiry (exclusive), the previous secret is no longer returned.
        create_due(&store, "s", at(0)).await;
        let later = claim(&store, at(61_000), 10).await;
        assert!(!later.is_empty());
        for claimed in later {
            let secrets = claimed.secrets.expect("readable secrets");
            assert_eq!(secrets, SigningSecrets::single(new.clone()));
        }
    }
);

store_case!(
    a_second_rotation_replaces_the_previous_secret,
    async |store: SharedStore| {
        let first = add_subscriber(&store, "s").await;
        let second = rotate(&store, "s", 60_000, 1_000).await;
        // During the first grace period: `second` becomes the previous secret, `first`
        // is gone although its own grace period has not ended.
        let third = rotate(&store, "s", 10_000, 2_000).await;

        let secrets = claimed_secrets(&store, "s", 3_000).await;
        assert_eq!(secrets.current, third);
        assert_eq!(
            secrets.previous,
            Some(PreviousSecret {
                secret: second.clone(),
                expires_at: at(12_000),
            })
        );
        assert!(!secrets.active_at(at(3_000)).contains(&first));
        assert_eq!(secrets.active_at(at(3_000)), [third, second]);
    }
);

store_case!(
    a_rotation_without_grace_keeps_no_previous_secret,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        rotate(&store, "s", 60_000, 1_000).await;
        let new = rotate(&store, "s", 0, 2_000).await;

        let secrets = claimed_secrets(&store, "s", 3_000).await;
        assert_eq!(secrets, SigningSecrets::single(new));
    }
);

store_case!(
    rotating_an_unknown_subscriber_changes_nothing,
    async |store: SharedStore| {
        add_subscriber(&store, "s").await;
        let rotation = SecretRotation {
            subscriber_id: "t".into(),
            secret: SigningSecret::generate(),
            grace_ms: 1_000,
        };
        let rotated = store.rotate_secret(rotation, at(1_000)).await.unwrap();
        assert_eq!(rotated, None);
        assert_eq!(store.get_subscriber("t").await.unwrap(), None);
        let s = store.get_subscriber("s").await.unwrap().unwrap();
        assert_eq!(s.updated_at, at(0));
    }
);

store_case!(
    a_put_with_a_secret_ends_the_grace_period,
    async |store: SharedStore| {
        let old = add_subscriber(&store, "s").await;
        let new = rotate(&store, "s", 60_000, 1_000).await;

        // A PUT without a secret (a new URL) keeps the grace period.
        let put = SubscriberPut {
            url: "https://moved.example.test/hook".into(),
            ..subscriber_put("s")
        };
        store.put_subscriber(put, at(1_500)).await.unwrap();
        let secrets = claimed_secrets(&store, "s", 2_000).await;
        assert_eq!(secrets.active_at(at(2_000)), [new.clone(), old]);

        // A PUT with a secret replaces it at once: no previous secret signs any more.
        let chosen = SigningSecret::generate();
        let put = SubscriberPut {
            secret: Some(chosen.clone()),
            ..subscriber_put("s")
        };
        store.put_subscriber(put, at(2_500)).await.unwrap();
        create_due(&store, "s", at(0)).await;
        let claimed = claim(&store, at(3_000), 10).await;
        assert!(!claimed.is_empty());
        for c in claimed {
            assert_eq!(c.secrets.unwrap(), SigningSecrets::single(chosen.clone()));
        }
    }
);
