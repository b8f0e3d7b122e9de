//! The event rules a porter needs are public (`uverbs::events`, which
//! docs.rs shows), cover every rule, and every public event type links to
//! them: private module docs are not where a user can read them.

use std::fs;

fn read(path: &str) -> String {
    let full = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

/// The `///` and `//!` lines of a source file, joined.
fn doc_text(src: &str) -> String {
    src.lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with("///") || l.starts_with("//!"))
        .map(|l| l[3..].trim())
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn the_event_rules_are_a_public_module_that_covers_every_rule() {
    let lib = read("src/lib.rs");
    assert!(
        lib.lines().any(|l| l.trim() == "pub mod events;"),
        "src/lib.rs must declare `pub mod events;`"
    );
    let guide = doc_text(&read("src/events.rs"));
    for (rule, needle) in [
        ("program-set O_NONBLOCK", "WouldBlock"),
        ("signals", "Interrupted"),
        ("EINTR", "EINTR"),
        ("edge-triggered epoll", "EPOLLET"),
        (
            "never reading an event fd yourself",
            "Never `read` an event fd yourself",
        ),
        ("acknowledgement by count", "defer_ack"),
        ("ibv_ack_cq_events", "ibv_ack_cq_events"),
        ("destroy order", "the destroy command first"),
        ("DEVICE_FATAL", "DEVICE_FATAL"),
        ("removal", "DeviceRemoved"),
        ("DevX overflow", "EventsLost"),
        ("DevX short buffer", "EINVAL"),
    ] {
        assert!(
            guide.contains(needle),
            "the event rules miss {rule} ({needle:?})"
        );
    }
}

#[test]
fn every_public_event_type_links_to_the_event_rules() {
    for (file, item) in [
        ("src/comp_channel.rs", "pub struct CompletionChannel"),
        ("src/async_event.rs", "pub struct AsyncEvent "),
        ("src/cm/channel.rs", "pub struct EventChannel"),
        (
            "providers/mlx5/devx/event.rs",
            "pub struct DevxEventChannel",
        ),
    ] {
        let src = read(file);
        let at = src
            .find(item)
            .unwrap_or_else(|| panic!("{file}: no `{item}`"));
        // The doc comment right above the item (and its attributes).
        let above: Vec<&str> = src[..at]
            .lines()
            .rev()
            .take_while(|l| {
                let l = l.trim_start();
                l.starts_with("///") || l.starts_with("#[")
            })
            .collect();
        let doc = above.join(" ");
        assert!(
            doc.contains("(crate::events)"),
            "{file}: the docs of `{item}` do not link to the event rules"
        );
    }
}
