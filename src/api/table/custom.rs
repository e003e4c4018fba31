//! Custom resources: `Name`, then the CRD's `additionalPrinterColumns` (or, without any,
//! kube-apiserver's default `Age` column on `.metadata.creationTimestamp`).
//!
//! Cells follow apiextensions-apiserver's table convertor: the first value the column's
//! JSONPath selects, converted to the column's type (`integer`, `number`, `boolean`,
//! `string`, `date`); nothing selected, a value of the wrong type or an unknown column type
//! gives a null cell. `date` cells are rendered server-side as the age of the timestamp
//! (`5m`, `<unknown>` for the zero time, `<invalid>` when unparseable), not as the raw
//! string. `string` cells print any JSON value the way client-go's jsonpath prints it.

use serde_json::Value;

use super::jsonpath::Path;
use super::timestamp::Instant;
use super::{column, human_duration, name_cell, name_column, Column};
use crate::registry::PrinterColumn;

const CREATION_TIMESTAMP: &str = ".metadata.creationTimestamp";

/// The default column of a CRD without printer columns.
fn default_age() -> PrinterColumn {
    PrinterColumn {
        name: "Age".into(),
        type_: "date".into(),
        format: String::new(),
        description: super::DESC_AGE.into(),
        priority: 0,
        json_path: CREATION_TIMESTAMP.into(),
    }
}

/// The printer columns actually served: the CRD's, or the default Age column.
fn served(printer_columns: &[PrinterColumn]) -> std::borrow::Cow<'_, [PrinterColumn]> {
    if printer_columns.is_empty() {
        std::borrow::Cow::Owned(vec![default_age()])
    } else {
        std::borrow::Cow::Borrowed(printer_columns)
    }
}

/// Columns for a custom resource.
pub(super) fn columns(printer_columns: &[PrinterColumn]) -> Vec<Column> {
    let mut cols = vec![name_column()];
    for pc in served(printer_columns).iter() {
        let description = if pc.description.is_empty() {
            format!("Value of the object at {}.", pc.json_path)
        } else {
            pc.description.clone()
        };
        cols.push(column(
            &pc.name,
            &pc.type_,
            &pc.format,
            pc.priority,
            &description,
        ));
    }
    cols
}

/// A custom resource row.
pub(super) fn cells(
    printer_columns: &[PrinterColumn],
    object: &Value,
    now_unix: i64,
) -> Vec<Value> {
    let mut cells = vec![name_cell(object)];
    for pc in served(printer_columns).iter() {
        let value = Path::parse(&pc.json_path).and_then(|path| path.first(object));
        cells.push(value.map_or(Value::Null, |v| typed_cell(&pc.type_, v, now_unix)));
    }
    cells
}

/// A selected value as a cell of `type_`.
fn typed_cell(type_: &str, value: &Value, now_unix: i64) -> Value {
    match (type_, value) {
        ("string", v) => Value::String(print_value(v)),
        ("integer", Value::Number(n)) => match n.as_i64() {
            Some(i) => Value::from(i),
            // Floats (and integers beyond int64) truncate, saturating.
            None => Value::from(n.as_f64().map_or(0, |f| f as i64)),
        },
        ("number", Value::Number(n)) => n.as_f64().map_or(Value::Null, Value::from),
        ("boolean", Value::Bool(b)) => Value::Bool(*b),
        ("date", Value::String(s)) => Value::String(date_cell(s, now_unix)),
        _ => Value::Null,
    }
}

/// The age of a timestamp string: `<unknown>` for "", "null" or the zero time,
/// `<invalid>` if it is not RFC 3339.
fn date_cell(text: &str, now_unix: i64) -> String {
    if text.is_empty() || text == "null" {
        return "<unknown>".into();
    }
    match Instant::parse_rfc3339(text) {
        None => "<invalid>".into(),
        Some(t) if t.is_zero() => "<unknown>".into(),
        Some(t) => human_duration(t.seconds_until(now_unix)),
    }
}

/// A value as client-go's jsonpath prints it: strings raw, numbers and booleans as Go
/// prints them, objects and arrays as compact JSON, null as `<no value>`.
fn print_value(v: &Value) -> String {
    match v {
        Value::Null => "<no value>".into(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => n.as_f64().map_or_else(|| n.to_string(), go_float),
        },
        Value::Array(_) | Value::Object(_) => serde_json::to_string(v).unwrap_or_default(),
    }
}

/// Go's `%v` of a float64: shortest digits, exponent form (`1e+06`, `1.5e-05`) when the
/// exponent is below -4 or at least 6.
fn go_float(f: f64) -> String {
    let sci = format!("{f:e}");
    let Some((mantissa, exp)) = sci.split_once('e') else {
        return sci;
    };
    let Ok(exp) = exp.parse::<i32>() else {
        return sci;
    };
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.unsigned_abs());
    }
    let (neg, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    // Position of the decimal point within `digits`.
    let point = exp + 1;
    let body = if point <= 0 {
        let zeros = "0".repeat(point.unsigned_abs() as usize);
        format!("0.{zeros}{digits}")
    } else {
        let point = point.unsigned_abs() as usize;
        if point >= digits.len() {
            format!("{digits}{}", "0".repeat(point - digits.len()))
        } else {
            format!("{}.{}", &digits[..point], &digits[point..])
        }
    };
    format!("{neg}{body}")
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::super::test_support::{crd_info, names, ts, T0};
    use super::super::{cells, columns};
    use super::{go_float, print_value};
    use crate::registry::PrinterColumn;

    fn pc(name: &str, type_: &str, path: &str, priority: i32) -> PrinterColumn {
        PrinterColumn {
            name: name.into(),
            type_: type_.into(),
            format: String::new(),
            description: String::new(),
            priority,
            json_path: path.into(),
        }
    }

    fn certificate_columns() -> Vec<PrinterColumn> {
        vec![
            pc(
                "Ready",
                "string",
                r#".status.conditions[?(@.type=="Ready")].status"#,
                0,
            ),
            pc("Secret", "string", ".spec.secretName", 0),
            pc("Issuer", "string", ".spec.issuerRef.name", 1),
            pc("Replicas", "integer", ".spec.replicas", 0),
            pc("Ratio", "number", ".status.ratio", 0),
            pc("Paused", "boolean", ".spec.paused", 0),
            pc("Expires", "date", ".status.notAfter", 0),
            PrinterColumn {
                format: "date-time".into(),
                description: "Time since creation".into(),
                ..pc("Age", "date", ".metadata.creationTimestamp", 0)
            },
        ]
    }

    #[test]
    fn printer_columns_become_table_columns() {
        let cols = columns(&crd_info(certificate_columns()));
        assert_eq!(
            names(&cols),
            [
                "Name", "Ready", "Secret", "Issuer", "Replicas", "Ratio", "Paused", "Expires",
                "Age"
            ]
        );
        assert_eq!(cols[0].format, "name");
        assert_eq!(cols[3].priority, 1);
        assert_eq!(cols[4].type_, "integer");
        assert_eq!(cols[8].format, "date-time");
        assert_eq!(cols[8].description, "Time since creation");
        assert!(cols[2].description.contains(".spec.secretName"));
    }

    #[test]
    fn cells_follow_column_types() {
        let info = crd_info(certificate_columns());
        let cert = json!({
            "metadata": {"name": "www", "creationTimestamp": ts(-3 * 86400)},
            "spec": {"secretName": "www-tls", "issuerRef": {"name": "letsencrypt"},
                     "replicas": 2.9, "paused": false},
            "status": {"ratio": 3, "notAfter": ts(-120),
                       "conditions": [{"type": "Issuing", "status": "False"},
                                      {"type": "Ready", "status": "True"}]}
        });
        assert_eq!(
            cells(&info, &cert, T0),
            [
                json!("www"),
                json!("True"),
                json!("www-tls"),
                json!("letsencrypt"),
                json!(2),
                json!(3.0),
                json!(false),
                json!("2m"),
                json!("3d")
            ]
        );
    }

    #[test]
    fn missing_and_mistyped_values_are_null() {
        let info = crd_info(certificate_columns());
        let row = cells(&info, &json!({"metadata": {"name": "x"}}), T0);
        assert_eq!(row[0], json!("x"));
        assert!(row[1..].iter().all(Value::is_null), "{row:?}");
        let odd = json!({"spec": {"replicas": "2", "paused": "yes", "secretName": null},
                         "status": {"ratio": "1.5", "notAfter": 17}});
        let row = cells(&info, &odd, T0);
        assert_eq!(row[2], json!("<no value>"));
        assert_eq!(
            &row[4..8],
            [Value::Null, Value::Null, Value::Null, Value::Null]
        );
    }

    #[test]
    fn date_cells() {
        let info = crd_info(vec![pc("When", "date", ".at", 0)]);
        let at = |v: Value| cells(&info, &json!({ "at": v }), T0)[1].clone();
        assert_eq!(at(json!(ts(-45))), json!("45s"));
        assert_eq!(at(json!("")), json!("<unknown>"));
        assert_eq!(at(json!("0001-01-01T00:00:00Z")), json!("<unknown>"));
        assert_eq!(at(json!("last tuesday")), json!("<invalid>"));
        assert_eq!(at(json!(ts(3600))), json!("<invalid>"));
        assert_eq!(at(json!(null)), Value::Null);
    }

    #[test]
    fn crd_without_printer_columns_gets_age() {
        let info = crd_info(Vec::new());
        let cols = columns(&info);
        assert_eq!(names(&cols), ["Name", "Age"]);
        assert_eq!(cols[1].type_, "date");
        let obj = json!({"metadata": {"name": "w", "creationTimestamp": ts(-7200)}});
        assert_eq!(cells(&info, &obj, T0), [json!("w"), json!("120m")]);
        assert_eq!(cells(&info, &json!({}), T0), [json!(""), Value::Null]);
    }

    #[test]
    fn unsupported_paths_and_types_give_null_cells() {
        let info = crd_info(vec![
            pc("Deep", "string", "..name", 0),
            pc("Odd", "object", ".spec", 0),
        ]);
        let obj = json!({"metadata": {"name": "n"}, "spec": {"name": "x"}});
        assert_eq!(
            cells(&info, &obj, T0),
            [json!("n"), Value::Null, Value::Null]
        );
        assert_eq!(columns(&info).len(), 3);
    }

    #[test]
    fn string_columns_print_any_value() {
        assert_eq!(print_value(&json!(7)), "7");
        assert_eq!(print_value(&json!(true)), "true");
        assert_eq!(print_value(&json!(1.5)), "1.5");
        assert_eq!(
            print_value(&json!({"b": 1, "a": [1, "x"]})),
            r#"{"a":[1,"x"],"b":1}"#
        );
        assert_eq!(print_value(&json!(null)), "<no value>");
        assert_eq!(print_value(&json!(u64::MAX)), "1.8446744073709552e+19");
    }

    #[test]
    fn go_float_formatting() {
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (-0.0, "-0"),
            (1.0, "1"),
            (2.5, "2.5"),
            (-2.5, "-2.5"),
            (100_000.0, "100000"),
            (123_456.0, "123456"),
            (1_000_000.0, "1e+06"),
            (1_234_567.0, "1.234567e+06"),
            (0.0001, "0.0001"),
            (0.00012, "0.00012"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (1e21, "1e+21"),
            (1e100, "1e+100"),
        ];
        for (f, want) in cases {
            assert_eq!(go_float(*f), *want, "{f}");
        }
    }
}
