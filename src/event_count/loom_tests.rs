//! The event accounting protocol under loom, every interleaving of the
//! threads each test starts.

use super::*;
use loom::sync::Arc as LoomArc;

/// A destroy waits while an event value holds its object
/// (`destroy_reachable`'s last `wait_while`); the value's drop
/// acknowledges, releases its reference and then notifies, as
/// `Held::drop` does. A lost wake-up (the waiter registered after the
/// notifier looked, and checked before the release) would leave the
/// destroy asleep, which loom reports as a deadlock.
#[test]
fn loom_a_destroy_waiting_for_an_event_value_is_woken_by_its_drop() {
    loom::model(|| {
        let counts = Arc::new(EventCounts::default());
        let object = LoomArc::new(());
        let event = object.clone();
        let c = counts.clone();
        let holder = loom::thread::spawn(move || {
            c.ack_quiet(Stream::Completion, 1, None);
            drop(event);
            c.notify();
        });
        counts.wait_while(|| LoomArc::strong_count(&object) > 1);
        assert_eq!(LoomArc::strong_count(&object), 1);
        assert_eq!(counts.acked(), [1, 0]);
        holder.join().unwrap();
    });
}

/// An explicit destroy waits for the events the kernel reported, which
/// two readers acknowledge on their own threads (one per stream).
#[test]
fn loom_wait_acked_returns_once_both_streams_are_acknowledged() {
    loom::model(|| {
        let counts = Arc::new(EventCounts::default());
        let readers: Vec<_> = [Stream::Completion, Stream::Async]
            .into_iter()
            .map(|stream| {
                let c = counts.clone();
                loom::thread::spawn(move || c.ack(stream, 1, None))
            })
            .collect();
        counts.wait_acked([1, 1]);
        assert_eq!(counts.acked(), [1, 1]);
        for r in readers {
            r.join().unwrap();
        }
    });
}

/// A destroy that does not wait parks the reported counts; of it and
/// the two readers acknowledging the events it was told of, exactly
/// one sees the counts settled (and so removes the object's entry).
#[test]
fn loom_a_parked_destroy_and_the_last_acknowledgement_settle_once() {
    loom::model(|| {
        let counts = Arc::new(EventCounts::default());
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let c = counts.clone();
                loom::thread::spawn(move || c.ack_counting(Stream::Completion, 1, None).1)
            })
            .collect();
        let mut settled = usize::from(counts.close([2, 0], true));
        for r in readers {
            settled += usize::from(r.join().unwrap());
        }
        assert_eq!(settled, 1, "the entry is removed exactly once");
        assert_eq!(counts.acked(), [2, 0]);
    });
}

/// A reader turns its event into a deferred count while a destroy,
/// its command done, closes the counts and waits: whichever comes
/// first, the event ends up acknowledged and the destroy returns
/// (a count deferred after the close would never be acknowledged).
#[test]
fn loom_a_defer_racing_a_destroy_never_leaves_it_waiting() {
    loom::model(|| {
        let counts = Arc::new(EventCounts::default());
        let reader = {
            let c = counts.clone();
            loom::thread::spawn(move || {
                let me = current_thread();
                c.lock().held.push((me, 1));
                c.defer(Stream::Completion, Some(me));
                c.notify();
            })
        };
        if !counts.close([1, 0], false) {
            counts.wait_acked([1, 0]);
        }
        assert_eq!(counts.acked(), [1, 0]);
        reader.join().unwrap();
    });
}

/// A reader turns an event value into a deferred count (`Held::defer`) and
/// then releases its
/// reference to the object, while a destroy that waits closes the counts
/// and then waits for the object's other references to go. Whether the
/// destroy started waiting before or after the count, the release must
/// wake it: a reader that decided whether to notify before its release
/// (by the waiters it saw when it counted) lost the wake-up of a destroy
/// that registered in between.
#[test]
fn loom_a_deferring_reader_releases_and_wakes_a_waiting_destroy() {
    loom::model(|| {
        let counts = Arc::new(EventCounts::default());
        let object = LoomArc::new(());
        let reader = {
            let (c, claim) = (counts.clone(), object.clone());
            loom::thread::spawn(move || c.defer_releasing(Stream::Completion, None, claim))
        };
        if !counts.close([1, 0], false) {
            counts.wait_acked([1, 0]);
        }
        counts.wait_while(|| LoomArc::strong_count(&object) > 1);
        assert_eq!(counts.acked(), [1, 0]);
        reader.join().unwrap();
    });
}

/// Two readers count events deferred without the lock while a destroy
/// that parks closes the counts: every count lands either in the
/// deferred counts the close gives up or, after it, as an
/// acknowledgement; the counts end settled whichever way.
#[test]
fn loom_lock_free_deferrals_racing_a_close_are_each_counted_once() {
    loom::model(|| {
        let counts = Arc::new(EventCounts::default());
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let c = counts.clone();
                loom::thread::spawn(move || {
                    c.defer(Stream::Completion, None);
                })
            })
            .collect();
        counts.close([2, 0], true);
        for r in readers {
            r.join().unwrap();
        }
        assert_eq!(counts.acked(), [2, 0]);
        assert_eq!(counts.deferred(Stream::Completion), 0);
    });
}
