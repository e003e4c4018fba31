//! Any input: parsing never panics, and an accepted selector re-parses from its canonical
//! form (escapes included) to the same set of requirements (their order may differ: terms
//! are kept in the order of their raw text, as upstream does, and AND commutes).
#![no_main]

use libfuzzer_sys::fuzz_target;
use watchd::selectors::FieldSelector;

fn terms(sel: &FieldSelector) -> Vec<String> {
    let mut t: Vec<String> = sel.requirements().iter().map(|r| r.to_string()).collect();
    t.sort();
    t
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(sel) = FieldSelector::parse(s) else {
        return;
    };
    let again = FieldSelector::parse(&sel.to_string()).expect("canonical form re-parses");
    assert_eq!(terms(&sel), terms(&again));
    let get = |f: &str| (f == "metadata.name").then_some("a");
    assert_eq!(sel.matches(get), again.matches(get));
    let _ = sel.validate(|f| f == "metadata.name");
});
