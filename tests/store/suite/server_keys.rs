//! The server's own keys (issue #34 item 5.4): the first offer of a name is kept, and
//! every instance on the database, and a restarted one, gets that key.

use deferhook::store::SharedStore;

use crate::support::{Backend, at};

store_case!(
    the_first_key_offered_is_kept_for_every_instance,
    async |backend: Backend| {
        let store: SharedStore = backend.store.clone();
        let first = store
            .server_key("cursor", "Zmlyc3Q=".into(), at(0))
            .await
            .unwrap();
        assert_eq!(first, "Zmlyc3Q=");
        let again = store
            .server_key("cursor", "c2Vjb25k".into(), at(1))
            .await
            .unwrap();
        assert_eq!(again, "Zmlyc3Q=", "the first offer is kept");
        let other = deferhook::store::open(&backend.url).await.unwrap();
        let seen = other
            .server_key("cursor", "dGhpcmQ=".into(), at(2))
            .await
            .unwrap();
        assert_eq!(seen, "Zmlyc3Q=", "another instance gets it too");
        let named = other
            .server_key("other", "b3RoZXI=".into(), at(3))
            .await
            .unwrap();
        assert_eq!(named, "b3RoZXI=", "one key per name");
    }
);

store_case!(
    instances_offering_keys_at_once_agree_on_one,
    async |backend: Backend| {
        let stores = [
            deferhook::store::open(&backend.url).await.unwrap(),
            deferhook::store::open(&backend.url).await.unwrap(),
            backend.store.clone(),
        ];
        let offers = stores.iter().enumerate().map(|(n, store)| {
            let store = store.clone();
            tokio::spawn(async move { store.server_key("cursor", format!("key-{n}"), at(0)).await })
        });
        let mut keys = Vec::new();
        for offer in offers.collect::<Vec<_>>() {
            keys.push(offer.await.unwrap().unwrap());
        }
        assert!(keys.iter().all(|k| *k == keys[0]), "{keys:?}");
    }
);
