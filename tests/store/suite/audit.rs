//! The audit trail (issue #16 part 9): entries listed newest first, paginated,
//! filtered by action and target, purged oldest first before a cutoff. Every field
//! reads back as written, the server's request id (issue #34 part 4.10) and its absence
//! (an entry recorded before migration 0020) included.

use deferhook::domain::Timestamp;
use deferhook::domain::ids::new_id;
use deferhook::store::{
    AuditEntry, AuditFilter, AuditSettlement, NewAuditEntry, PageRequest, SharedStore,
};
use uuid::Uuid;

use crate::support::at;

fn entry(action: &str, target: Option<&str>, when: Timestamp) -> NewAuditEntry {
    NewAuditEntry {
        id: new_id(when),
        at: when,
        action: action.to_owned(),
        target: target.map(str::to_owned),
        parameters: Some(r#"{"enabled":true}"#.to_owned()),
        actor: Some("sha256:0123456789abcdef".to_owned()),
        status: Some(200),
        request_id: Some("req-1".to_owned()),
        server_request_id: Some(new_id(when)),
    }
}

async fn page(
    store: &SharedStore,
    filter: &AuditFilter,
    after: Option<Uuid>,
    limit: u32,
) -> Vec<AuditEntry> {
    store
        .list_audit(filter, PageRequest { after, limit })
        .await
        .unwrap()
}

store_case!(
    entries_are_listed_newest_first_paginated_and_filtered,
    async |store: SharedStore| {
        let mut written = [
            entry("job.cancel", Some("j1"), at(1)),
            entry("subscriber.patch", Some("acme"), at(2)),
            entry("subscriber.resume", None, at(3)),
            entry("subscriber.patch", Some("other"), at(4)),
        ];
        // as recorded before migration 0020: without the server's id
        written[2].server_request_id = None;
        assert_ne!(written[0].server_request_id, written[1].server_request_id);
        for e in &written {
            store.record_audit(e.clone()).await.unwrap();
        }
        let all = AuditFilter::default();
        let first = page(&store, &all, None, 3).await;
        let expected: Vec<AuditEntry> = written.iter().rev().take(3).cloned().collect();
        assert_eq!(first, expected, "newest first, every field kept");
        let rest = page(&store, &all, Some(first[2].id), 3).await;
        assert_eq!(rest, [written[0].clone()]);

        let patches = AuditFilter {
            action: Some("subscriber.patch".into()),
            ..AuditFilter::default()
        };
        let ids: Vec<Uuid> = page(&store, &patches, None, 10)
            .await
            .iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(ids, [written[3].id, written[1].id]);
        let about_acme = AuditFilter {
            target: Some("acme".into()),
            ..AuditFilter::default()
        };
        assert_eq!(
            page(&store, &about_acme, None, 10).await,
            [written[1].clone()]
        );
        let both = AuditFilter {
            action: Some("job.cancel".into()),
            target: Some("acme".into()),
        };
        assert!(page(&store, &both, None, 10).await.is_empty());
    }
);

store_case!(
    a_begun_entry_is_listed_without_status_until_settled_once_or_withdrawn,
    async |store: SharedStore| {
        // issue #34 part 1: an entry is written before its action and settled after
        let mut created = entry("replay.create", None, at(1_000));
        created.status = None;
        let mut refused = entry("job.cancel", Some("j1"), at(2_000));
        refused.status = None;
        let mut crashed = entry("subscriber.delete", Some("acme"), at(3_000));
        crashed.status = None;
        for e in [&created, &refused, &crashed] {
            store.record_audit(e.clone()).await.unwrap();
        }
        let all = AuditFilter::default();
        let listed = page(&store, &all, None, 10).await;
        assert_eq!(listed, [crashed.clone(), refused.clone(), created.clone()]);
        assert!(listed.iter().all(|e| e.status.is_none()));

        let answered = AuditSettlement::Answered {
            status: 202,
            target: Some("replay-7".into()),
            at: at(1_500),
        };
        store.settle_audit(created.id, answered).await.unwrap();
        store
            .settle_audit(refused.id, AuditSettlement::Withdrawn)
            .await
            .unwrap();
        // a settled entry is settled once: neither a second answer nor a withdrawal
        // changes it
        let again = AuditSettlement::Answered {
            status: 500,
            target: None,
            at: at(9_000),
        };
        store.settle_audit(created.id, again).await.unwrap();
        store
            .settle_audit(created.id, AuditSettlement::Withdrawn)
            .await
            .unwrap();
        // an answer without a target keeps the one begun with
        let mut kept = entry("job.retry", Some("j2"), at(4_000));
        kept.status = None;
        store.record_audit(kept.clone()).await.unwrap();
        let plain = AuditSettlement::Answered {
            status: 200,
            target: None,
            at: at(4_100),
        };
        store.settle_audit(kept.id, plain).await.unwrap();

        let listed = page(&store, &all, None, 10).await;
        let settled_created = AuditEntry {
            status: Some(202),
            target: Some("replay-7".into()),
            at: at(1_500),
            ..created
        };
        let settled_kept = AuditEntry {
            status: Some(200),
            at: at(4_100),
            ..kept
        };
        assert_eq!(listed, [settled_kept, crashed, settled_created]);
    }
);

store_case!(
    a_purge_deletes_entries_before_the_cutoff_oldest_first,
    async |store: SharedStore| {
        for n in 0..5 {
            store
                .record_audit(entry("job.retry", Some("j"), at(n * 1_000)))
                .await
                .unwrap();
        }
        assert_eq!(store.purge_audit(at(3_000), 2).await.unwrap(), 2);
        assert_eq!(store.purge_audit(at(3_000), 2).await.unwrap(), 1);
        assert_eq!(store.purge_audit(at(3_000), 2).await.unwrap(), 0);
        let left: Vec<Timestamp> = page(&store, &AuditFilter::default(), None, 10)
            .await
            .iter()
            .map(|e| e.at)
            .collect();
        assert_eq!(left, [at(4_000), at(3_000)]);
    }
);

store_case!(
    retention_purges_old_entries_and_emptied_tombstones,
    async |store: SharedStore| {
        use deferhook::delivery::retention::{RetentionSettings, purge_once, purge_records_once};
        use tokio_util::sync::CancellationToken;

        let settings = RetentionSettings {
            retain_finished_ms: Some(1_000),
            retain_dead_ms: Some(5_000),
            batch: 2,
            pause: std::time::Duration::ZERO,
            ..RetentionSettings::default()
        };
        for n in 0..5 {
            store
                .record_audit(entry("job.retry", Some("j"), at(n * 1_000)))
                .await
                .unwrap();
        }
        crate::support::add_subscriber(&store, "acme").await;
        crate::support::create_due(&store, "acme", at(60_000)).await;
        store.delete_subscriber("acme", at(0)).await.unwrap();
        let stop = CancellationToken::new();

        // at 8 s: entries older than 3 s go (the longer retention is 5 s); the
        // tombstone stays while its dead job is not purged
        let (audit, tombstones) = purge_records_once(&store, at(8_000), &settings, &stop)
            .await
            .unwrap();
        assert_eq!((audit, tombstones), (3, 0));
        let left = page(&store, &AuditFilter::default(), None, 10).await;
        assert_eq!(left.len(), 2);

        let purged = purge_once(&store, at(8_000), &settings, &stop)
            .await
            .unwrap();
        assert_eq!(purged.dead, 1);
        let (audit, tombstones) = purge_records_once(&store, at(8_000), &settings, &stop)
            .await
            .unwrap();
        assert_eq!((audit, tombstones), (0, 1));
    }
);
