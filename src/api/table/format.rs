//! How kube-apiserver's printers turn common API values into cell text: label selectors
//! (`LabelSelectorAsSelector(...).String()`, `metav1.FormatLabelSelector`, and the protobuf
//! debug form a few printers print), lists cut after a few entries with "+ N more...",
//! booleans behind pointers, quantities, int-or-strings and access modes.
//!
//! Each function is named after what it formats, so a printer reads like its Go original
//! without repeating these rules.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{at, int_of, list_at, str_at};

/// Why a label selector could not be turned into a `labels.Selector`.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct InvalidSelector;

/// A metav1.LabelSelector as `labels.Selector.String()` prints it after
/// `LabelSelectorAsSelector`: requirements sorted by key, `k=v`, `k in (a,b)`,
/// `k notin (a,b)`, `k`, `!k`, comma-joined; "" for a missing (`Nothing`) or empty
/// (`Everything`) selector. An unknown operator, or values that do not fit the operator,
/// are an error. (Keys and values are not checked against the label syntax: kube-apiserver
/// validated them when the object was written.)
pub(super) fn label_selector(selector: Option<&Value>) -> Result<String, InvalidSelector> {
    let Some(selector) = selector.filter(|s| s.is_object()) else {
        return Ok(String::new());
    };
    let mut reqs: Vec<(&str, String)> = Vec::new();
    if let Some(labels) = at(selector, &["matchLabels"]).and_then(Value::as_object) {
        for (key, value) in labels {
            reqs.push((key, format!("{key}={}", value.as_str().unwrap_or(""))));
        }
    }
    for expr in list_at(selector, &["matchExpressions"]) {
        let key = str_at(expr, &["key"]);
        let mut values = strings(list_at(expr, &["values"]));
        values.sort_unstable();
        let text = match (str_at(expr, &["operator"]), values.is_empty()) {
            ("In", false) => format!("{key} in ({})", values.join(",")),
            ("NotIn", false) => format!("{key} notin ({})", values.join(",")),
            ("Exists", true) => key.to_owned(),
            ("DoesNotExist", true) => format!("!{key}"),
            _ => return Err(InvalidSelector),
        };
        reqs.push((key, text));
    }
    // Stable, like Go's sort of so few requirements: equal keys keep their order.
    reqs.sort_by(|a, b| a.0.cmp(b.0));
    let parts: Vec<String> = reqs.into_iter().map(|(_, text)| text).collect();
    Ok(parts.join(","))
}

/// `metav1.FormatLabelSelector`: the selector's string, `<none>` when that is empty,
/// `<error>` when the selector is invalid.
pub(super) fn format_label_selector(selector: Option<&Value>) -> String {
    match label_selector(selector) {
        Ok(s) if s.is_empty() => "<none>".into(),
        Ok(s) => s,
        Err(InvalidSelector) => "<error>".into(),
    }
}

/// The gogo-protobuf `String()` of a metav1.LabelSelector, which a few printers print as
/// is: `&LabelSelector{MatchLabels:map[string]string{k: v,},MatchExpressions:[]...{...},}`.
pub(super) fn label_selector_debug(selector: &Value) -> String {
    let mut labels: Vec<(&String, &Value)> = at(selector, &["matchLabels"])
        .and_then(Value::as_object)
        .map(|m| m.iter().collect())
        .unwrap_or_default();
    labels.sort_by(|a, b| a.0.cmp(b.0));
    let labels: String = labels
        .iter()
        .map(|(k, v)| format!("{k}: {},", v.as_str().unwrap_or("")))
        .collect();
    let exprs: String = list_at(selector, &["matchExpressions"])
        .iter()
        .map(|e| {
            format!(
                "LabelSelectorRequirement{{Key:{},Operator:{},Values:{},}},",
                str_at(e, &["key"]),
                str_at(e, &["operator"]),
                go_string_slice(&strings(list_at(e, &["values"])))
            )
        })
        .collect();
    format!(
        "&LabelSelector{{MatchLabels:map[string]string{{{labels}}},\
         MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}"
    )
}

/// Go's `%v` of a `[]string`: `[a b c]`.
fn go_string_slice(items: &[&str]) -> String {
    format!("[{}]", items.join(" "))
}

/// The strings of a JSON array; a non-string entry reads as "".
pub(super) fn strings(list: &[Value]) -> Vec<&str> {
    list.iter().map(|v| v.as_str().unwrap_or("")).collect()
}

/// `listWithMoreString`: the first `max` entries comma-joined, then " + N more..." for the
/// `count - max` left out; `<unset>` for an empty result.
pub(super) fn list_with_more(list: &[String], count: usize, max: usize) -> String {
    let shown = &list[..list.len().min(max)];
    let text = shown.join(",");
    if count > max {
        format!("{text} + {} more...", count - max)
    } else if text.is_empty() {
        "<unset>".into()
    } else {
        text
    }
}

/// The points of a load balancer status (`status.loadBalancer.ingress`), as
/// `loadBalancerStatusStringer` lists them in wide output: each one's IP, else its
/// hostname; sorted and distinct.
pub(super) fn load_balancer_ingress(ingress: &[Value]) -> Vec<&str> {
    let points: BTreeSet<&str> = ingress
        .iter()
        .map(|i| match str_at(i, &["ip"]) {
            "" => str_at(i, &["hostname"]),
            ip => ip,
        })
        .filter(|s| !s.is_empty())
        .collect();
    points.into_iter().collect()
}

/// `printBool`: `True` or `False`.
pub(super) fn go_bool(b: bool) -> String {
    if b { "True" } else { "False" }.into()
}

/// `printBoolPtr`: `True`, `False`, or `<unset>` for a nil pointer.
pub(super) fn bool_ptr(v: Option<&Value>) -> String {
    match v.and_then(Value::as_bool) {
        Some(b) => go_bool(b),
        None => "<unset>".into(),
    }
}

/// `Quantity.String()` of a quantity the object holds by value: the stored text, or "0" for
/// a missing one (Go's zero Quantity). kube-apiserver stores quantities in canonical form,
/// which is what `String()` prints, so the stored text is printed as is.
pub(super) fn quantity(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.trim().to_owned(),
        Some(n @ Value::Number(_)) => n.to_string(),
        _ => "0".into(),
    }
}

/// `(*Quantity).String()` of a pointer field: `<nil>` when it is not set.
pub(super) fn quantity_ptr(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "<nil>".into(),
        some => quantity(some),
    }
}

/// `IntOrString.String()`: the number, or the string.
pub(super) fn int_or_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => int_of(other).to_string(),
    }
}

/// `helper.GetAccessModesAsString`: the modes present, in the order RWO, ROX, RWX, RWOP.
pub(super) fn access_modes(modes: &[Value]) -> String {
    let present = strings(modes);
    let known = [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ];
    let short: Vec<&str> = known
        .iter()
        .filter(|(mode, _)| present.contains(mode))
        .map(|(_, short)| *short)
        .collect();
    short.join(",")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn selectors_as_label_selector_strings() {
        assert_eq!(label_selector(None), Ok(String::new()));
        assert_eq!(label_selector(Some(&json!({}))), Ok(String::new()));
        let sel = json!({
            "matchLabels": {"tier": "web", "app": "shop"},
            "matchExpressions": [
                {"key": "env", "operator": "In", "values": ["prod", "canary"]},
                {"key": "zone", "operator": "NotIn", "values": ["b"]},
                {"key": "gpu", "operator": "Exists"},
                {"key": "legacy", "operator": "DoesNotExist", "values": []}
            ]
        });
        assert_eq!(
            label_selector(Some(&sel)).as_deref(),
            Ok("app=shop,env in (canary,prod),gpu,!legacy,tier=web,zone notin (b)")
        );
        let bad_op = json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]});
        assert_eq!(label_selector(Some(&bad_op)), Err(InvalidSelector));
        let no_values = json!({"matchExpressions": [{"key": "a", "operator": "In"}]});
        assert_eq!(label_selector(Some(&no_values)), Err(InvalidSelector));
    }

    #[test]
    fn format_label_selector_placeholders() {
        assert_eq!(format_label_selector(None), "<none>");
        assert_eq!(format_label_selector(Some(&json!({}))), "<none>");
        assert_eq!(
            format_label_selector(Some(&json!({"matchLabels": {"app": "db"}}))),
            "app=db"
        );
        let bad =
            json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]});
        assert_eq!(format_label_selector(Some(&bad)), "<error>");
    }

    #[test]
    fn label_selector_debug_form() {
        let sel = json!({"matchLabels": {"b": "2", "a": "1"},
                         "matchExpressions": [{"key": "env", "operator": "In",
                                               "values": ["prod", "dev"]}]});
        assert_eq!(
            label_selector_debug(&sel),
            "&LabelSelector{MatchLabels:map[string]string{a: 1,b: 2,},\
             MatchExpressions:[]LabelSelectorRequirement{\
             LabelSelectorRequirement{Key:env,Operator:In,Values:[prod dev],},},}"
        );
        assert_eq!(
            label_selector_debug(&json!({})),
            "&LabelSelector{MatchLabels:map[string]string{},\
             MatchExpressions:[]LabelSelectorRequirement{},}"
        );
    }

    #[test]
    fn lists_with_more() {
        let l = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(list_with_more(&[], 0, 3), "<unset>");
        assert_eq!(list_with_more(&l(&["a", "b"]), 2, 3), "a,b");
        assert_eq!(
            list_with_more(&l(&["a", "b", "c"]), 5, 3),
            "a,b,c + 2 more..."
        );
    }

    #[test]
    fn scalars() {
        assert_eq!(bool_ptr(None), "<unset>");
        assert_eq!(bool_ptr(Some(&json!(true))), "True");
        assert_eq!(bool_ptr(Some(&json!(false))), "False");
        assert_eq!(quantity(None), "0");
        assert_eq!(quantity(Some(&json!("10Gi"))), "10Gi");
        assert_eq!(quantity(Some(&json!(5))), "5");
        assert_eq!(quantity_ptr(None), "<nil>");
        assert_eq!(quantity_ptr(Some(&json!(null))), "<nil>");
        assert_eq!(quantity_ptr(Some(&json!("500m"))), "500m");
        assert_eq!(int_or_string(&json!(2)), "2");
        assert_eq!(int_or_string(&json!("50%")), "50%");
        assert_eq!(
            access_modes(&[
                json!("ReadWriteOncePod"),
                json!("ReadWriteOnce"),
                json!("ReadWriteOnce")
            ]),
            "RWO,RWOP"
        );
        assert_eq!(access_modes(&[]), "");
    }
}
