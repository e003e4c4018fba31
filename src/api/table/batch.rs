//! batch/v1 Jobs and CronJobs.
//!
//! API defaults the printers see: a job with neither `completions` nor `parallelism` gets
//! 1 for both, and a missing `parallelism` is 1; a cron job's `suspend` is false.

use serde_json::Value;

use super::format::{bool_ptr, format_label_selector};
use super::templates::{container_cells, DESC_CONTAINERS, DESC_IMAGES};
use super::timestamp::Instant;
use super::{
    age_cell, age_column, at, column, deleting, human_duration, int_at, int_of, list_at, name_cell,
    name_column, since, str_at, string_cell, time_at, BuiltinPrinter, Column,
};

/// The printers of this family.
pub(super) const PRINTERS: &[BuiltinPrinter] = &[
    BuiltinPrinter::new("batch", "jobs", job_columns, job_cells),
    BuiltinPrinter::new("batch", "cronjobs", cron_job_columns, cron_job_cells),
];

/// The wide Containers, Images and Selector columns both kinds end with.
fn wide_columns() -> [Column; 3] {
    [
        column("Containers", "string", "", 1, DESC_CONTAINERS),
        column("Images", "string", "", 1, DESC_IMAGES),
        column(
            "Selector",
            "string",
            "",
            1,
            "Label selector of the pods of the job.",
        ),
    ]
}

/// The wide cells of a job spec: its template's containers and its selector.
fn wide_cells(job_spec: &Value) -> [Value; 3] {
    let (names, images) = container_cells(list_at(job_spec, &["template", "spec", "containers"]));
    [
        string_cell(names),
        string_cell(images),
        string_cell(format_label_selector(at(job_spec, &["selector"]))),
    ]
}

/// Job columns.
fn job_columns() -> Vec<Column> {
    let mut cols = vec![
        name_column(),
        column("Status", "string", "", 0, "Current state of the job."),
        column(
            "Completions",
            "string",
            "",
            0,
            "Pods that succeeded, out of the completions wanted.",
        ),
        column(
            "Duration",
            "string",
            "",
            0,
            "How long the job ran, or has been running.",
        ),
        age_column(),
    ];
    cols.extend(wide_columns());
    cols
}

/// A job row.
fn job_cells(job: &Value, now_unix: i64) -> Vec<Value> {
    let spec = at(job, &["spec"]).unwrap_or(&Value::Null);
    let mut row = vec![
        name_cell(job),
        string_cell(job_status(job)),
        string_cell(completions(job)),
        string_cell(job_duration(job, now_unix)),
        age_cell(job, now_unix),
    ];
    row.extend(wide_cells(spec));
    row
}

/// `succeeded/completions`; without completions `succeeded/1`, or `succeeded/1 of N` when
/// more than one pod runs in parallel.
fn completions(job: &Value) -> String {
    let set = |field: &str| {
        at(job, &["spec", field])
            .filter(|v| !v.is_null())
            .map(int_of)
    };
    let succeeded = int_at(job, &["status", "succeeded"]);
    let (completions, parallelism) = match (set("completions"), set("parallelism")) {
        (None, None) => (Some(1), 1),
        (c, p) => (c, p.unwrap_or(1)),
    };
    match completions {
        Some(c) => format!("{succeeded}/{c}"),
        None if parallelism > 1 => format!("{succeeded}/1 of {parallelism}"),
        None => format!("{succeeded}/1"),
    }
}

/// From start to completion, or to now while running; "" before the job started.
fn job_duration(job: &Value, now_unix: i64) -> String {
    let instant = |field: &str| {
        at(job, &["status", field])
            .and_then(Value::as_str)
            .and_then(Instant::parse_rfc3339)
    };
    match (instant("startTime"), instant("completionTime")) {
        (None, _) => String::new(),
        (Some(start), None) => human_duration(start.seconds_until(now_unix)),
        (Some(start), Some(end)) => human_duration(end.seconds_since(start)),
    }
}

/// Complete, Failed, Terminating, Suspended, FailureTarget or Running, in that order of
/// precedence; a condition counts when the first condition of its type is True.
fn job_status(job: &Value) -> &'static str {
    let conditions = list_at(job, &["status", "conditions"]);
    let holds = |type_: &str| {
        conditions
            .iter()
            .find(|c| str_at(c, &["type"]) == type_)
            .is_some_and(|c| str_at(c, &["status"]) == "True")
    };
    if holds("Complete") {
        "Complete"
    } else if holds("Failed") {
        "Failed"
    } else if deleting(job) {
        "Terminating"
    } else if holds("Suspended") {
        "Suspended"
    } else if holds("FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    }
}

/// CronJob columns.
fn cron_job_columns() -> Vec<Column> {
    let mut cols = vec![
        name_column(),
        column(
            "Schedule",
            "string",
            "",
            0,
            "When jobs run, in cron syntax.",
        ),
        column("Timezone", "string", "", 0, "Time zone of the schedule."),
        column(
            "Suspend",
            "boolean",
            "",
            0,
            "Whether new jobs are held back.",
        ),
        column("Active", "integer", "", 0, "Number of jobs running now."),
        column(
            "Last Schedule",
            "string",
            "",
            0,
            "How long ago a job was last started.",
        ),
        age_column(),
    ];
    cols.extend(wide_columns());
    cols
}

/// A cron job row. Suspend is printed as the text `True` / `False` (the column says
/// boolean; the printer sends a string).
fn cron_job_cells(cj: &Value, now_unix: i64) -> Vec<Value> {
    let job_spec = at(cj, &["spec", "jobTemplate", "spec"]).unwrap_or(&Value::Null);
    let time_zone = match at(cj, &["spec", "timeZone"]) {
        Some(Value::String(tz)) => tz.clone(),
        _ => "<none>".into(),
    };
    let suspend = match at(cj, &["spec", "suspend"]) {
        Some(v) if !v.is_null() => bool_ptr(Some(v)),
        _ => bool_ptr(Some(&Value::Bool(false))),
    };
    let last_schedule = match at(cj, &["status", "lastScheduleTime"]) {
        Some(v) if !v.is_null() => since(now_unix, time_at(cj, &["status", "lastScheduleTime"])),
        _ => "<none>".into(),
    };
    let mut row = vec![
        name_cell(cj),
        string_cell(str_at(cj, &["spec", "schedule"])),
        string_cell(time_zone),
        string_cell(suspend),
        Value::from(list_at(cj, &["status", "active"]).len()),
        string_cell(last_schedule),
        age_cell(cj, now_unix),
    ];
    row.extend(wide_cells(job_spec));
    row
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::super::templates::{DESC_CONTAINERS as CONTAINERS, DESC_IMAGES as IMAGES};
    use super::super::test_support::{assert_columns, row, ts};
    use super::super::{DESC_AGE as AGE, DESC_NAME as NAME};

    fn job(obj: &Value) -> Vec<Value> {
        row("batch", "jobs", obj)
    }

    #[test]
    fn job_columns_match_upstream() {
        assert_columns(
            "batch",
            "jobs",
            &[
                ("Name", "string", "name", 0, NAME),
                ("Status", "string", "", 0, "Current state of the job."),
                (
                    "Completions",
                    "string",
                    "",
                    0,
                    "Pods that succeeded, out of the completions wanted.",
                ),
                (
                    "Duration",
                    "string",
                    "",
                    0,
                    "How long the job ran, or has been running.",
                ),
                ("Age", "string", "", 0, AGE),
                ("Containers", "string", "", 1, CONTAINERS),
                ("Images", "string", "", 1, IMAGES),
                (
                    "Selector",
                    "string",
                    "",
                    1,
                    "Label selector of the pods of the job.",
                ),
            ],
        );
    }

    #[test]
    fn finished_job() {
        let j = json!({
            "metadata": {"name": "pi", "creationTimestamp": ts(-700)},
            "spec": {"completions": 3, "parallelism": 2,
                     "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u1"}},
                     "template": {"spec": {"containers": [{"name": "pi", "image": "perl:5.34"}]}}},
            "status": {"succeeded": 3, "startTime": ts(-650), "completionTime": ts(-563),
                       "conditions": [{"type": "SuccessCriteriaMet", "status": "True"},
                                      {"type": "Complete", "status": "True"}]}
        });
        assert_eq!(
            job(&j),
            [
                json!("pi"),
                json!("Complete"),
                json!("3/3"),
                json!("87s"),
                json!("11m"),
                json!("pi"),
                json!("perl:5.34"),
                json!("batch.kubernetes.io/controller-uid=u1")
            ]
        );
    }

    #[test]
    fn empty_job_uses_api_defaults() {
        assert_eq!(
            job(&json!({})),
            [
                json!(""),
                json!("Running"),
                json!("0/1"),
                json!(""),
                json!("<unknown>"),
                json!(""),
                json!(""),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn job_completions_and_states() {
        let work_queue = json!({"spec": {"parallelism": 4}, "status": {"succeeded": 1}});
        assert_eq!(job(&work_queue)[2], json!("1/1 of 4"));
        let single = json!({"spec": {"parallelism": 1}});
        assert_eq!(job(&single)[2], json!("0/1"));
        let running = json!({"status": {"startTime": ts(-125)}});
        assert_eq!(job(&running)[3], json!("2m5s"));
        let states = [
            (
                json!([{"type": "Failed", "status": "True"}]),
                false,
                "Failed",
            ),
            (
                json!([{"type": "Complete", "status": "False"}]),
                true,
                "Terminating",
            ),
            (
                json!([{"type": "Suspended", "status": "True"}]),
                false,
                "Suspended",
            ),
            (
                json!([{"type": "FailureTarget", "status": "True"}]),
                false,
                "FailureTarget",
            ),
            // The first condition of a type decides.
            (
                json!([{"type": "Complete", "status": "False"}, {"type": "Complete", "status": "True"}]),
                false,
                "Running",
            ),
        ];
        for (conditions, deleting, want) in states {
            let mut j = json!({"status": {"conditions": conditions}});
            if deleting {
                j["metadata"] = json!({"deletionTimestamp": ts(-1)});
            }
            assert_eq!(job(&j)[1], json!(want), "{j}");
        }
    }

    #[test]
    fn cron_job_columns_match_upstream() {
        assert_columns(
            "batch",
            "cronjobs",
            &[
                ("Name", "string", "name", 0, NAME),
                (
                    "Schedule",
                    "string",
                    "",
                    0,
                    "When jobs run, in cron syntax.",
                ),
                ("Timezone", "string", "", 0, "Time zone of the schedule."),
                (
                    "Suspend",
                    "boolean",
                    "",
                    0,
                    "Whether new jobs are held back.",
                ),
                ("Active", "integer", "", 0, "Number of jobs running now."),
                (
                    "Last Schedule",
                    "string",
                    "",
                    0,
                    "How long ago a job was last started.",
                ),
                ("Age", "string", "", 0, AGE),
                ("Containers", "string", "", 1, CONTAINERS),
                ("Images", "string", "", 1, IMAGES),
                (
                    "Selector",
                    "string",
                    "",
                    1,
                    "Label selector of the pods of the job.",
                ),
            ],
        );
    }

    #[test]
    fn cron_jobs() {
        let cj = json!({
            "metadata": {"name": "backup", "creationTimestamp": ts(-10 * 86400)},
            "spec": {"schedule": "0 3 * * *", "timeZone": "Europe/Berlin", "suspend": true,
                     "jobTemplate": {"spec": {
                         "selector": {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
                         "template": {"spec": {"containers": [
                             {"name": "dump", "image": "postgres:16"}]}}}}},
            "status": {"active": [{"name": "backup-1"}], "lastScheduleTime": ts(-3 * 3600)}
        });
        assert_eq!(
            row("batch", "cronjobs", &cj),
            [
                json!("backup"),
                json!("0 3 * * *"),
                json!("Europe/Berlin"),
                json!("True"),
                json!(1),
                json!("3h"),
                json!("10d"),
                json!("dump"),
                json!("postgres:16"),
                json!("tier")
            ]
        );
        assert_eq!(
            row("batch", "cronjobs", &json!({})),
            [
                json!(""),
                json!(""),
                json!("<none>"),
                json!("False"),
                json!(0),
                json!("<none>"),
                json!("<unknown>"),
                json!(""),
                json!(""),
                json!("<none>")
            ]
        );
    }
}
