"""Drives a live deferhook through the client that openapi-python-client generated
from openapi/openapi.json (issue #15): a subscriber, a job whose payload is an array,
a fan-out with a string payload, the job listing, the job's attempts, a move of the
job, a secret rotation and a dry-run replay. Each call must answer the documented
status, and the client must parse the body into the documented model (a page's items
into JobView or SubscriberView themselves). Any failure exits non-zero.

Usage: PYTHONPATH=<folder holding deferhook_client> generated_client_check.py BASE_URL TOKEN
"""

import base64
import datetime
import sys

from deferhook_client import AuthenticatedClient
from deferhook_client.api.jobs import (
    create_job,
    fan_out,
    get_job,
    list_attempts,
    list_jobs,
    reschedule_job,
)
from deferhook_client.api.replays import create_replay
from deferhook_client.api.subscribers import list_subscribers, put_subscriber, rotate_secret
from deferhook_client.models import (
    AttemptList,
    CreateJobRequest,
    CreateReplayRequest,
    DryRunView,
    FanOutJobs,
    FanOutRequest,
    JobState,
    JobView,
    PageJobView,
    PutSubscriberRequest,
    RescheduleRequest,
    RotateSecretRequest,
    SecretRotatedView,
    SubscriberListing,
    SubscriberView,
)

SUBSCRIBER = "generated-client"
# Never contacted: the server runs without a worker.
URL = "https://hooks.example.com/deferhook-ci"


def unpadded_secret(byte: int) -> str:
    """A `whsec_` secret of 25 bytes in unpadded base64 (padded, it would end in `==`)."""
    return "whsec_" + base64.b64encode(bytes([byte]) * 25).decode().rstrip("=")


def expect(what, response, status, model):
    """The parsed body of `response`, after checking its status and model."""
    if response.status_code != status or not isinstance(response.parsed, model):
        body = response.content.decode(errors="replace")
        raise SystemExit(
            f"{what}: expected {status} with a {model.__name__}, got "
            f"{int(response.status_code)} {type(response.parsed).__name__}: {body}"
        )
    print(f"ok: {what}")
    return response.parsed


def check(what, condition):
    if not condition:
        raise SystemExit(f"{what}: not so")


def main(base_url: str, token: str) -> None:
    client = AuthenticatedClient(base_url=base_url, token=token, raise_on_unexpected_status=True)
    now = datetime.datetime.now(datetime.timezone.utc)

    created = expect(
        "create a subscriber with an unpadded secret",
        put_subscriber.sync_detailed(
            SUBSCRIBER,
            client=client,
            body=PutSubscriberRequest(url=URL, secret=unpadded_secret(7)),
        ),
        201,
        SubscriberView,
    )
    check("the created subscriber shows its secret", created.secret == unpadded_secret(7))

    job = expect(
        "create a job with the array payload [1, 2, 3] and a deliver_at",
        create_job.sync_detailed(
            client=client,
            body=CreateJobRequest(
                subscriber_id=SUBSCRIBER,
                event_id="evt-array",
                payload=[1, 2, 3],
                deliver_at=now + datetime.timedelta(hours=1),
                deadline=now + datetime.timedelta(hours=3),
            ),
        ),
        201,
        JobView,
    )
    check("the job is scheduled", job.state == JobState.SCHEDULED)
    check("deliver_at is a datetime", isinstance(job.deliver_at, datetime.datetime))

    fanned = expect(
        "fan out an event with a string payload",
        fan_out.sync_detailed(
            client=client,
            body=FanOutRequest(
                event_id="evt-string", payload="hello", subscriber_ids=[SUBSCRIBER], delay_ms=60_000
            ),
        ),
        201,
        FanOutJobs,
    )
    check("the fan-out made one job", len(fanned.items) == 1)

    page = expect(
        "list the subscriber's jobs",
        list_jobs.sync_detailed(client=client, subscriber_id=SUBSCRIBER, limit=1000),
        200,
        PageJobView,
    )
    check("the page's items are JobView", all(isinstance(item, JobView) for item in page.items))
    check("the listing has both jobs", {item.event_id for item in page.items} == {"evt-array", "evt-string"})

    read = expect("read the job", get_job.sync_detailed(job.id, client=client), 200, JobView)
    check("the job reads back", read.id == job.id)

    attempts = expect(
        "read the job's attempts", list_attempts.sync_detailed(job.id, client=client), 200, AttemptList
    )
    check("no attempt yet (no worker)", attempts.items == [])

    moved = expect(
        "move the job",
        reschedule_job.sync_detailed(
            job.id,
            client=client,
            body=RescheduleRequest(deliver_at=now + datetime.timedelta(hours=2)),
        ),
        200,
        JobView,
    )
    check("the job moved", moved.deliver_at > job.deliver_at)

    subscribers = expect(
        "list subscribers", list_subscribers.sync_detailed(client=client, limit=1), 200, SubscriberListing
    )
    check(
        "the page's items are SubscriberView",
        [type(item) for item in subscribers.items] == [SubscriberView],
    )

    rotated = expect(
        "rotate the secret to another unpadded one",
        rotate_secret.sync_detailed(
            SUBSCRIBER,
            client=client,
            body=RotateSecretRequest(grace_seconds=60, secret=unpadded_secret(9)),
        ),
        200,
        SecretRotatedView,
    )
    check("the new secret is shown", rotated.secret == unpadded_secret(9))

    dry_run = expect(
        "dry-run a replay",
        create_replay.sync_detailed(
            client=client,
            body=CreateReplayRequest(
                subscriber_id=SUBSCRIBER, max_jobs=10, rate_per_second=1, dry_run=True
            ),
        ),
        200,
        DryRunView,
    )
    check("no dead job matches", dry_run.matched == 0)
    print("the generated client works")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2])
