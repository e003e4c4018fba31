//! Any input: parsing never panics, and an accepted selector re-parses from its canonical
//! form to the same selector, which matches the same labels.
#![no_main]

use libfuzzer_sys::fuzz_target;
use watchd::selectors::LabelSelector;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(sel) = LabelSelector::parse(s) else {
        return;
    };
    let again = LabelSelector::parse(&sel.to_string()).expect("canonical form re-parses");
    assert_eq!(sel, again);
    let labels = [("app", "web"), ("tier", ""), ("x.io/k", "1")];
    let get = |k: &str| labels.iter().find(|(l, _)| *l == k).map(|(_, v)| *v);
    assert_eq!(sel.matches(get), again.matches(get));
});
