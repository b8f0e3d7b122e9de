use std::time::Duration;

use super::*;

#[test]
fn acks_are_counted_per_stream_and_holder() {
    let c = EventCounts::default();
    c.delivered();
    c.delivered();
    assert_eq!(c.outstanding().mine, 2);
    c.ack(Stream::Completion, 2, Some(thread::current().id()));
    assert_eq!(c.held_total(), 0);
    c.ack(Stream::Async, 1, None);
    assert_eq!(c.acked(), [2, 1]);
}

#[test]
fn wait_acked_returns_after_another_thread_acks() {
    let c = Arc::new(EventCounts::default());
    let c2 = c.clone();
    let t = thread::spawn(move || {
        thread::sleep(Duration::from_millis(50));
        c2.ack(Stream::Completion, 3, None);
    });
    // The wait on a thread of its own, bounded: an acknowledgement
    // counted twice would make it wait forever.
    let (done_tx, done) = std::sync::mpsc::channel();
    let waiter = {
        let c = c.clone();
        thread::spawn(move || {
            c.wait_acked([3, 0]);
            let _ = done_tx.send(());
        })
    };
    assert!(
        done.recv_timeout(Duration::from_secs(10)).is_ok(),
        "wait_acked([3, 0]) still waits 10 s after 3 acknowledgements: acknowledged {:?}",
        c.acked()
    );
    t.join().unwrap();
    waiter.join().unwrap();
}

#[test]
fn counters_wrap_like_the_kernels() {
    let c = EventCounts::default();
    c.ack(Stream::Completion, u32::MAX, None);
    c.ack(Stream::Completion, 2, None);
    assert_eq!(c.acked(), [1, 0]);
}

/// A deferred event leaves its holder's count and waits, counted, for
/// an acknowledgement by number; asking for more than is deferred
/// acknowledges nothing.
#[test]
fn deferred_events_are_acknowledged_by_count() {
    let counts = Arc::new(EventCounts::default());
    let object = Arc::new(5u32);
    for _ in 0..3 {
        Held::new(object.clone(), counts.clone(), Stream::Completion).defer();
    }
    assert_eq!(
        Arc::strong_count(&object),
        1,
        "deferring releases the object"
    );
    assert_eq!(
        counts.outstanding(),
        Outstanding {
            mine: 0,
            others: 0,
            deferred: 3
        }
    );
    assert_eq!(counts.ack_deferred(Stream::Completion, 4), Err(3));
    assert_eq!(counts.ack_deferred(Stream::Async, 1), Err(0));
    let other = {
        let c = counts.clone();
        thread::spawn(move || c.ack_deferred(Stream::Completion, 2))
    };
    assert_eq!(other.join().unwrap(), Ok(()));
    assert_eq!(counts.deferred(Stream::Completion), 1);
    assert_eq!(counts.acked(), [2, 0]);
}

/// Once the destroy command ran, deferring acknowledges at once and
/// deferred counts are given up: a waiting destroy is never left
/// waiting for counts no handle can acknowledge.
#[test]
fn close_gives_up_deferred_counts_and_later_defers_acknowledge() {
    let counts = Arc::new(EventCounts::default());
    let object = Arc::new(());
    Held::new(object.clone(), counts.clone(), Stream::Async).defer();
    let late = Held::new(object.clone(), counts.clone(), Stream::Completion);
    assert!(
        !counts.close([1, 1], false),
        "one reported event is still held"
    );
    late.defer();
    assert_eq!(counts.acked(), [1, 1]);
    counts.wait_acked([1, 1]);
}
