//! What the S2–S7 integration tests share: the server setup with the
//! watchd binary the S1 tests find (or build), and checks of the report.

use serde_json::Value;
use watchd_loadtest::scenario::report::Report;
use watchd_loadtest::scenario::servers::ServerSetup;

#[path = "../s1/support.rs"]
#[allow(dead_code)]
mod support;

/// Servers started per run, with the test's watchd.
pub fn setup() -> ServerSetup {
    ServerSetup {
        watchd_bin: support::watchd_bin(),
        ..ServerSetup::default()
    }
}

/// The report's JSON, after checking its shape and that it writes its
/// JSON and Markdown files.
pub fn checked_json(r: &Report) -> Value {
    let v = serde_json::to_value(r).expect("report serializes");
    for key in [
        "scenario",
        "title",
        "settings",
        "figures",
        "notes",
        "clean",
        "details",
        "machine",
        "elapsed_s",
    ] {
        assert!(v.get(key).is_some(), "{key} missing in {v}");
    }
    assert!(!r.figures.is_empty());
    for f in &r.figures {
        if let (Some(v), Some(b), Some(ratio)) = (f.value, f.baseline, f.ratio) {
            assert!((v / b - ratio).abs() < 1e-9 * ratio.abs().max(1.0), "{f:?}");
        }
    }
    // One dir per call: the tests of one scenario run in parallel in one
    // process, and one removing a shared dir broke the other's read.
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "scenario-test-{}-{}-{}",
        r.scenario,
        std::process::id(),
        SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let md = r.write(&dir.join("r.json")).expect("writes");
    let text = std::fs::read_to_string(&md).expect("markdown");
    assert!(
        text.contains("| figure | value | baseline | ratio |"),
        "{text}"
    );
    assert_eq!(text.matches("\n| ").count(), r.figures.len() + 1, "{text}");
    std::fs::remove_dir_all(dir).ok();
    v
}

/// The figure named `name` (panics with the table when absent).
pub fn figure<'a>(r: &'a Report, name: &str) -> &'a watchd_loadtest::scenario::report::Figure {
    r.figures
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no figure {name:?} in\n{}", r.table()))
}
