//! Pods: Name, Ready, Status, Restarts, Age; wide: IP, Node, Nominated Node, Readiness Gates.
//!
//! Status follows kube-apiserver's pod printer: the phase (or status.reason), overridden by
//! a scheduling gate, then by the first init container that has not finished
//! (`Init:<reason>`, `Init:ExitCode:<n>`, `Init:Signal:<n>`, `Init:<done>/<total>`), else by
//! the regular containers' waiting and terminated reasons, and finally `Terminating` /
//! `Unknown` for pods being deleted.

use serde_json::{json, Value};

use super::timestamp::Instant;
use super::{
    age_cell, age_column, at, bool_at, column, deleting, int_at, list_at, name_cell, name_column,
    obj_at, since, str_at, string_cell, time_at, BuiltinPrinter, Column,
};

/// The pod printer; its rows carry the `Completed` condition of finished pods.
pub(super) const PRINTERS: &[BuiltinPrinter] = &[BuiltinPrinter {
    row_conditions: Some(row_conditions),
    ..BuiltinPrinter::new("", "pods", columns, cells)
}];

/// The pod columns.
fn columns() -> Vec<Column> {
    vec![
        name_column(),
        column(
            "Ready",
            "string",
            "",
            0,
            "Ready containers, out of all containers of the pod.",
        ),
        column(
            "Status",
            "string",
            "",
            0,
            "Summary of the state of the pod and its containers.",
        ),
        column(
            "Restarts",
            "string",
            "",
            0,
            "How often the containers of the pod restarted, and how long ago the last did.",
        ),
        age_column(),
        column("IP", "string", "", 1, "IP address of the pod."),
        column(
            "Node",
            "string",
            "",
            1,
            "Name of the node the pod is scheduled to.",
        ),
        column(
            "Nominated Node",
            "string",
            "",
            1,
            "Node the scheduler has set aside for the pod while it preempts others.",
        ),
        column(
            "Readiness Gates",
            "string",
            "",
            1,
            "Readiness gates that are met, out of all the pod declares.",
        ),
    ]
}

/// The terminated state in `state` (or `lastState`), if set.
fn terminated<'a>(status: &'a Value, which: &str) -> Option<&'a Value> {
    obj_at(status, &[which, "terminated"])
}

/// `Signal:<n>` when the container was killed by a signal, `ExitCode:<n>` otherwise.
fn exit_text(t: &Value) -> String {
    let signal = int_at(t, &["signal"]);
    if signal != 0 {
        format!("Signal:{signal}")
    } else {
        format!("ExitCode:{}", int_at(t, &["exitCode"]))
    }
}

/// Whether the pod has a condition of `type_` with status `True`.
fn condition_true(conditions: &[Value], type_: &str) -> bool {
    conditions
        .iter()
        .any(|c| str_at(c, &["type"]) == type_ && str_at(c, &["status"]) == "True")
}

/// Restart totals and the newest `lastState.terminated.finishedAt` among the counted.
#[derive(Default)]
struct Restarts {
    count: i64,
    last: Option<Instant>,
}

impl Restarts {
    fn add(&mut self, status: &Value) {
        self.count = self.count.saturating_add(int_at(status, &["restartCount"]));
        if let Some(finished) =
            terminated(status, "lastState").and_then(|t| time_at(t, &["finishedAt"]))
        {
            self.last = self.last.max(Some(finished));
        }
    }
}

/// The pod row.
fn cells(pod: &Value, now_unix: i64) -> Vec<Value> {
    let phase = str_at(pod, &["status", "phase"]);
    let status_reason = str_at(pod, &["status", "reason"]);
    let conditions = list_at(pod, &["status", "conditions"]);
    let init_specs = list_at(pod, &["spec", "initContainers"]);
    let containers = list_at(pod, &["spec", "containers"]);

    let mut reason = if status_reason.is_empty() {
        phase.to_owned()
    } else {
        status_reason.to_owned()
    };
    if conditions.iter().any(|c| {
        str_at(c, &["type"]) == "PodScheduled" && str_at(c, &["reason"]) == "SchedulingGated"
    }) {
        reason = "SchedulingGated".into();
    }

    // Init containers with restartPolicy Always are sidecars: they count as containers.
    let is_sidecar = |name: &str| {
        init_specs
            .iter()
            .rev()
            .find(|c| str_at(c, &["name"]) == name)
            .is_some_and(|c| str_at(c, &["restartPolicy"]) == "Always")
    };
    let sidecars = init_specs
        .iter()
        .filter(|c| str_at(c, &["restartPolicy"]) == "Always")
        .count();
    let total = containers.len() + sidecars;
    let mut ready = 0usize;

    let mut all = Restarts::default();
    let mut sidecar_restarts = Restarts::default();
    let mut initializing = false;
    for (i, status) in list_at(pod, &["status", "initContainerStatuses"])
        .iter()
        .enumerate()
    {
        all.add(status);
        let sidecar = is_sidecar(str_at(status, &["name"]));
        if sidecar {
            sidecar_restarts.add(status);
        }
        let term = terminated(status, "state");
        if term.is_some_and(|t| int_at(t, &["exitCode"]) == 0) {
            continue;
        }
        if sidecar && bool_at(status, &["started"]) {
            if bool_at(status, &["ready"]) {
                ready += 1;
            }
            continue;
        }
        let waiting_reason = str_at(status, &["state", "waiting", "reason"]);
        reason = match term {
            Some(t) => match str_at(t, &["reason"]) {
                "" => format!("Init:{}", exit_text(t)),
                r => format!("Init:{r}"),
            },
            None if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" => {
                format!("Init:{waiting_reason}")
            }
            None => format!("Init:{i}/{}", init_specs.len()),
        };
        initializing = true;
        break;
    }

    let mut restarts = all;
    if !initializing || condition_true(conditions, "Initialized") {
        restarts = sidecar_restarts;
        let mut has_running = false;
        for status in list_at(pod, &["status", "containerStatuses"]).iter().rev() {
            restarts.add(status);
            let waiting_reason = str_at(status, &["state", "waiting", "reason"]);
            let term = terminated(status, "state");
            if !waiting_reason.is_empty() {
                reason = waiting_reason.to_owned();
            } else if let Some(t) = term {
                reason = match str_at(t, &["reason"]) {
                    "" => exit_text(t),
                    r => r.to_owned(),
                };
            } else if bool_at(status, &["ready"]) && obj_at(status, &["state", "running"]).is_some()
            {
                has_running = true;
                ready += 1;
            }
        }
        // A container still running means the pod is not "Completed" yet.
        if reason == "Completed" && has_running {
            reason = if condition_true(conditions, "Ready") {
                "Running".into()
            } else {
                "NotReady".into()
            };
        }
    }

    if deleting(pod) && status_reason == "NodeLost" {
        reason = "Unknown".into();
    } else if deleting(pod) && phase != "Failed" && phase != "Succeeded" {
        reason = "Terminating".into();
    }

    let restarts_text = match restarts.last {
        Some(last) if restarts.count != 0 => {
            format!("{} ({} ago)", restarts.count, since(now_unix, Some(last)))
        }
        _ => restarts.count.to_string(),
    };

    vec![
        name_cell(pod),
        string_cell(format!("{ready}/{total}")),
        string_cell(reason),
        string_cell(restarts_text),
        age_cell(pod, now_unix),
        string_cell(pod_ip(pod)),
        string_cell(super::or_none(str_at(pod, &["spec", "nodeName"]))),
        string_cell(super::or_none(str_at(
            pod,
            &["status", "nominatedNodeName"],
        ))),
        string_cell(readiness_gates(pod, conditions)),
    ]
}

/// The primary IP: status.podIP wins over podIPs[0] (as the v1 → internal conversion
/// does), `<none>` without either.
fn pod_ip(pod: &Value) -> String {
    let ip = match str_at(pod, &["status", "podIP"]) {
        "" => list_at(pod, &["status", "podIPs"])
            .first()
            .map_or("", |p| str_at(p, &["ip"])),
        ip => ip,
    };
    super::or_none(ip)
}

/// `<true>/<gates>` over spec.readinessGates (the first condition of each gate's type
/// decides), `<none>` without gates.
fn readiness_gates(pod: &Value, conditions: &[Value]) -> String {
    let gates = list_at(pod, &["spec", "readinessGates"]);
    if gates.is_empty() {
        return "<none>".into();
    }
    let passing = gates
        .iter()
        .filter(|gate| {
            let type_ = str_at(gate, &["conditionType"]);
            conditions
                .iter()
                .find(|c| str_at(c, &["type"]) == type_)
                .is_some_and(|c| str_at(c, &["status"]) == "True")
        })
        .count();
    format!("{passing}/{}", gates.len())
}

/// The `Completed` row condition of a succeeded or failed pod.
fn row_conditions(pod: &Value) -> Vec<Value> {
    let (reason, message) = match at(pod, &["status", "phase"]).and_then(Value::as_str) {
        Some("Succeeded") => ("Succeeded", "The pod has completed successfully."),
        Some("Failed") => ("Failed", "The pod failed."),
        _ => return Vec::new(),
    };
    vec![json!({"type": "Completed", "status": "True", "reason": reason, "message": message})]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::{info, names, ts, T0};
    use super::super::{cells, columns, row_conditions};

    fn pod_cells(pod: &serde_json::Value) -> Vec<serde_json::Value> {
        cells(&info("", "pods", "Pod"), pod, T0)
    }

    fn status_of(pod: &serde_json::Value) -> String {
        pod_cells(pod)[2].as_str().unwrap_or_default().to_owned()
    }

    fn running(name: &str, restarts: i64) -> serde_json::Value {
        json!({"name": name, "ready": true, "restartCount": restarts, "started": true,
               "state": {"running": {"startedAt": ts(-3600)}}})
    }

    #[test]
    fn columns_match_upstream() {
        let cols = columns(&info("", "pods", "Pod"));
        assert_eq!(
            names(&cols),
            [
                "Name",
                "Ready",
                "Status",
                "Restarts",
                "Age",
                "IP",
                "Node",
                "Nominated Node",
                "Readiness Gates"
            ]
        );
        let prio: Vec<i32> = cols.iter().map(|c| c.priority).collect();
        assert_eq!(prio, [0, 0, 0, 0, 0, 1, 1, 1, 1]);
        assert!(cols.iter().all(|c| c.type_ == "string"));
        assert_eq!(cols[0].format, "name");
    }

    #[test]
    fn running_pod_with_restarts() {
        let pod = json!({
            "metadata": {"name": "web-0", "namespace": "shop",
                         "creationTimestamp": ts(-2 * 86400 - 4 * 3600)},
            "spec": {"nodeName": "node-a", "containers": [{"name": "app"}, {"name": "proxy"}],
                     "readinessGates": [{"conditionType": "example.com/lb"}]},
            "status": {
                "phase": "Running", "podIP": "10.0.0.7",
                "podIPs": [{"ip": "10.0.0.7"}, {"ip": "fd00::7"}],
                "conditions": [{"type": "Ready", "status": "True"},
                               {"type": "example.com/lb", "status": "False"}],
                "containerStatuses": [
                    {"name": "app", "ready": true, "restartCount": 2,
                     "state": {"running": {"startedAt": ts(-400)}},
                     "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                                                  "finishedAt": ts(-303)}}},
                    {"name": "proxy", "ready": false, "restartCount": 1,
                     "state": {"running": {}},
                     "lastState": {"terminated": {"exitCode": 1, "finishedAt": ts(-7200)}}}
                ]
            }
        });
        assert_eq!(
            pod_cells(&pod),
            [
                json!("web-0"),
                json!("1/2"),
                json!("Running"),
                json!("3 (5m3s ago)"),
                json!("2d4h"),
                json!("10.0.0.7"),
                json!("node-a"),
                json!("<none>"),
                json!("0/1")
            ]
        );
        assert!(row_conditions(&info("", "pods", "Pod"), &pod).is_empty());
    }

    #[test]
    fn empty_pod_reads_as_zero_values() {
        assert_eq!(
            pod_cells(&json!({"metadata": {"name": "bare"}})),
            [
                json!("bare"),
                json!("0/0"),
                json!(""),
                json!("0"),
                json!("<unknown>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn pending_and_gated() {
        let pod = json!({"spec": {"containers": [{"name": "c"}]},
                         "status": {"phase": "Pending",
                                    "conditions": [{"type": "PodScheduled", "status": "False",
                                                    "reason": "SchedulingGated"}]}});
        assert_eq!(status_of(&pod), "SchedulingGated");
        let pulling = json!({"spec": {"containers": [{"name": "c"}]},
                             "status": {"phase": "Pending", "containerStatuses": [
                                 {"name": "c", "state": {"waiting": {"reason": "ImagePullBackOff"}}}]}});
        assert_eq!(status_of(&pulling), "ImagePullBackOff");
        let evicted = json!({"status": {"phase": "Failed", "reason": "Evicted"}});
        assert_eq!(status_of(&evicted), "Evicted");
    }

    #[test]
    fn init_container_progress_and_failures() {
        let base = |statuses: serde_json::Value| {
            json!({"spec": {"initContainers": [{"name": "a"}, {"name": "b"}],
                            "containers": [{"name": "app"}]},
                   "status": {"phase": "Pending", "initContainerStatuses": statuses,
                              "containerStatuses": [{"name": "app", "restartCount": 9,
                                  "state": {"waiting": {"reason": "PodInitializing"}}}]}})
        };
        let done = json!({"name": "a", "state": {"terminated": {"exitCode": 0}}});
        let running_b = json!({"name": "b", "restartCount": 1,
                               "state": {"running": {}}});
        let pod = base(json!([done, running_b]));
        assert_eq!(status_of(&pod), "Init:1/2");
        // Regular containers are not counted while initializing.
        assert_eq!(pod_cells(&pod)[3], json!("1"));

        let crash = json!({"name": "a", "state": {"waiting": {"reason": "CrashLoopBackOff"}}});
        assert_eq!(status_of(&base(json!([crash]))), "Init:CrashLoopBackOff");
        let pod_init = json!({"name": "a", "state": {"waiting": {"reason": "PodInitializing"}}});
        assert_eq!(status_of(&base(json!([pod_init]))), "Init:0/2");
        let failed = json!({"name": "a", "state": {"terminated": {"exitCode": 3}}});
        assert_eq!(status_of(&base(json!([failed]))), "Init:ExitCode:3");
        let killed = json!({"name": "a", "state": {"terminated": {"exitCode": 137, "signal": 9}}});
        assert_eq!(status_of(&base(json!([killed]))), "Init:Signal:9");
        let reasoned =
            json!({"name": "a", "state": {"terminated": {"exitCode": 1, "reason": "Error"}}});
        assert_eq!(status_of(&base(json!([reasoned]))), "Init:Error");
    }

    #[test]
    fn sidecar_init_containers_count_as_containers() {
        let pod = json!({
            "spec": {"initContainers": [{"name": "setup"},
                                        {"name": "mesh", "restartPolicy": "Always"}],
                     "containers": [{"name": "app"}]},
            "status": {"phase": "Running",
                       "conditions": [{"type": "Initialized", "status": "True"},
                                      {"type": "Ready", "status": "True"}],
                       "initContainerStatuses": [
                           {"name": "setup", "restartCount": 4,
                            "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                           {"name": "mesh", "ready": true, "started": true, "restartCount": 1,
                            "state": {"running": {}},
                            "lastState": {"terminated": {"exitCode": 1, "finishedAt": ts(-90)}}}],
                       "containerStatuses": [running("app", 0)]}
        });
        let row = pod_cells(&pod);
        assert_eq!(row[1], json!("2/2"));
        assert_eq!(row[2], json!("Running"));
        // Only the sidecar's restarts count once the pod is initialized.
        assert_eq!(row[3], json!("1 (90s ago)"));
    }

    #[test]
    fn container_termination_reasons() {
        let one = |state: serde_json::Value| {
            json!({"spec": {"containers": [{"name": "c"}]},
                   "status": {"phase": "Running",
                              "containerStatuses": [{"name": "c", "state": state}]}})
        };
        assert_eq!(
            status_of(&one(json!({"terminated": {"exitCode": 2}}))),
            "ExitCode:2"
        );
        assert_eq!(
            status_of(&one(json!({"terminated": {"exitCode": 143, "signal": 15}}))),
            "Signal:15"
        );
        assert_eq!(
            status_of(&one(
                json!({"terminated": {"exitCode": 0, "reason": "Completed"}})
            )),
            "Completed"
        );
        // The first container with a reason wins (statuses are walked last to first).
        let two = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]},
                         "status": {"phase": "Running", "containerStatuses": [
                             {"name": "a", "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
                             {"name": "b", "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]}});
        assert_eq!(status_of(&two), "CrashLoopBackOff");
    }

    #[test]
    fn completed_with_a_running_container() {
        let pod = |ready_cond: &str| {
            json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]},
                   "status": {"phase": "Running",
                              "conditions": [{"type": "Ready", "status": ready_cond}],
                              "containerStatuses": [
                                  running("a", 0),
                                  {"name": "b", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}})
        };
        assert_eq!(status_of(&pod("True")), "Running");
        assert_eq!(status_of(&pod("False")), "NotReady");
    }

    #[test]
    fn deletion_states() {
        let deleting = json!({"metadata": {"deletionTimestamp": ts(-10)},
                              "spec": {"containers": [{"name": "c"}]},
                              "status": {"phase": "Running", "containerStatuses": [running("c", 0)]}});
        assert_eq!(status_of(&deleting), "Terminating");
        let lost = json!({"metadata": {"deletionTimestamp": ts(-10)},
                          "status": {"phase": "Running", "reason": "NodeLost"}});
        assert_eq!(status_of(&lost), "Unknown");
        let done = json!({"metadata": {"deletionTimestamp": ts(-10)},
                          "status": {"phase": "Succeeded"}});
        assert_eq!(status_of(&done), "Succeeded");
        let not_deleting = json!({"metadata": {"deletionTimestamp": null},
                                  "status": {"phase": "Running"}});
        assert_eq!(status_of(&not_deleting), "Running");
    }

    #[test]
    fn restarts_without_finish_time_have_no_suffix() {
        let pod = json!({"spec": {"containers": [{"name": "c"}]},
                         "status": {"containerStatuses": [
                             {"name": "c", "restartCount": 5,
                              "lastState": {"terminated": {"exitCode": 1}}}]}});
        assert_eq!(pod_cells(&pod)[3], json!("5"));
    }

    #[test]
    fn ip_falls_back_to_pod_ips() {
        let pod = json!({"status": {"podIPs": [{"ip": "fd00::1"}]}});
        assert_eq!(pod_cells(&pod)[5], json!("fd00::1"));
    }

    #[test]
    fn nominated_node_and_gates() {
        let pod = json!({"spec": {"readinessGates": [{"conditionType": "x"},
                                                     {"conditionType": "y"}]},
                         "status": {"nominatedNodeName": "node-b",
                                    "conditions": [{"type": "x", "status": "True"},
                                                   {"type": "y", "status": "True"},
                                                   {"type": "x", "status": "False"}]}});
        let row = pod_cells(&pod);
        assert_eq!(row[7], json!("node-b"));
        assert_eq!(row[8], json!("2/2"));
    }

    #[test]
    fn completed_pods_get_a_row_condition() {
        let pods = info("", "pods", "Pod");
        let ok = row_conditions(&pods, &json!({"status": {"phase": "Succeeded"}}));
        assert_eq!(ok.len(), 1);
        assert_eq!(ok[0]["type"], "Completed");
        assert_eq!(ok[0]["reason"], "Succeeded");
        let failed = row_conditions(&pods, &json!({"status": {"phase": "Failed"}}));
        assert_eq!(failed[0]["reason"], "Failed");
    }
}
