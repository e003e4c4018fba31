//! The mixed cluster of S7: objects of ten kinds in the shares a busy
//! cluster has them (pods and events most), built by the demo's builders,
//! with realistic spreads of size (ConfigMaps from 100 B to 16 KiB of data,
//! some Secrets holding a certificate bundle), each under its kube-apiserver
//! key with a unique name.

use serde_json::Value;

use crate::objects::event::{event, involved, Occurrence, Source};
use crate::objects::{
    self, account, key_for, lease, service, workload, Rng, CONFIGMAPS, DEPLOYMENTS, ENDPOINTSLICES,
    EVENTS, LEASES, PODS, REPLICASETS, SECRETS, SERVICEACCOUNTS, SERVICES,
};

/// The kinds, their etcd directories and their share (per 100 objects).
pub const MIX: [(&str, &str, usize); 10] = [
    ("pods", PODS, 30),
    ("events", EVENTS, 22),
    ("configmaps", CONFIGMAPS, 10),
    ("secrets", SECRETS, 10),
    ("replicasets", REPLICASETS, 8),
    ("endpointslices", ENDPOINTSLICES, 5),
    ("services", SERVICES, 4),
    ("serviceaccounts", SERVICEACCOUNTS, 4),
    ("leases", LEASES, 4),
    ("deployments", DEPLOYMENTS, 3),
];

/// The kind of object `i`: the shares of [`MIX`] laid out over each 100.
pub fn kind_of(i: usize) -> usize {
    let mut at = i % 100;
    for (k, (_, _, share)) in MIX.iter().enumerate() {
        if at < *share {
            return k;
        }
        at -= share;
    }
    0
}

/// A size drawn log-uniformly between `lo` and `hi` bytes.
fn log_uniform(lo: f64, hi: f64, rng: &mut Rng) -> usize {
    let u = rng.below(1_000_000) as f64 / 1e6;
    (lo * (hi / lo).powf(u)) as usize
}

/// Object `i` of the mix: (etcd key, object).
pub fn object(prefix: &str, i: usize, rng: &mut Rng) -> (String, Value) {
    let ns = format!("mix-ns-{}", i % 40);
    let node = format!("node-{}", i % 200);
    let app = format!("app-{i}");
    let (_, dir, _) = MIX[kind_of(i)];
    let obj = match kind_of(i) {
        0 => crate::scenario::pods::pod(i, &ns, &node, rng),
        1 => {
            let pod = crate::scenario::pods::pod(i, &ns, &node, rng);
            let what = Occurrence {
                involved: involved(&pod, 1000 + i as i64, Some("spec.containers{web}")),
                reason: "Pulled",
                message: format!("Container image \"nginx:1.27.3\" already present on machine and pod {i} started"),
                warning: false,
                source: Source::Kubelet(&node),
            };
            event(
                &format!(
                    "{}.{:x}",
                    objects::name(&pod),
                    0x17f3_a2b4_c5d6_0000u64 + i as u64
                ),
                &what,
                rng,
            )
        }
        2 => {
            let payload = "k=v\n".repeat(log_uniform(100.0, 16384.0, rng) / 4);
            objects::configmap(
                &ns,
                &format!("config-{i}"),
                &[("app", &app)],
                &[("app.properties", &payload)],
                rng,
            )
        }
        3 => {
            let mut s = account::opaque_secret(&ns, &format!("secret-{i}"), rng);
            if i.is_multiple_of(3) {
                let len = log_uniform(1000.0, 6000.0, rng);
                let bundle = rng.hex(len);
                s["data"]["ca.crt"] = Value::String(objects::base64(bundle.as_bytes()));
            }
            s
        }
        4 => {
            let owner = objects::controller_ref("apps/v1", "Deployment", &app, &rng.uuid());
            workload::replica_set(&ns, &app, "5d8f7c9b4", 3, owner, rng)
        }
        5 => {
            let svc = service::service(
                &ns,
                &app,
                &service::cluster_ip(i as u32),
                service::app_service_port("web"),
                rng,
            );
            service::endpoint_slice(
                &svc,
                &format!("{app}-x7k2p"),
                &[service::app_service_port("web")],
                rng,
            )
        }
        6 => service::service(
            &ns,
            &app,
            &service::cluster_ip(i as u32),
            service::app_service_port("api"),
            rng,
        ),
        7 => account::service_account(&ns, &format!("sa-{i}"), rng),
        8 => lease::node_lease(&objects::node(&format!("node-{i}"), rng), rng),
        _ => workload::deployment(&ns, &app, 3, rng),
    };
    let meta = &obj["metadata"];
    let key = key_for(
        prefix,
        dir,
        meta["namespace"].as_str(),
        meta["name"].as_str().unwrap_or_default(),
    );
    (key, obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_has_its_shares_unique_keys_and_encodes_as_protobuf() {
        assert_eq!(MIX.iter().map(|m| m.2).sum::<usize>(), 100);
        let mut counts = [0usize; 10];
        let mut keys = std::collections::HashSet::new();
        let mut rng = Rng::new(1);
        for i in 0..300 {
            counts[kind_of(i)] += 1;
            let (key, obj) = object("/registry", i, &mut rng);
            assert!(keys.insert(key.clone()), "duplicate {key}");
            assert!(key.starts_with("/registry/"), "{key}");
            watchd::codec::pbjson::encode_stored(&obj).unwrap_or_else(|e| panic!("{key}: {e}"));
        }
        for (k, (name, _, share)) in MIX.iter().enumerate() {
            assert_eq!(counts[k], share * 3, "{name}");
        }
        for _ in 0..100 {
            let s = log_uniform(100.0, 16384.0, &mut rng);
            assert!((100..=16384).contains(&s));
        }
    }
}
