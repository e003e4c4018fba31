//! The schema of every built-in kind watchd serves, from k8s-openapi's types (generated
//! from the upstream 1.34 spec; their `schemars` implementations carry its descriptions).

use k8s_openapi::schemars::{JsonSchema, SchemaGenerator};

/// One built-in kind: its group and version, and the name of its schema definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltinKind {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub definition: String,
}

fn kind<T: JsonSchema>(
    generator: &mut SchemaGenerator,
    group: &'static str,
    version: &'static str,
    kind: &'static str,
) -> BuiltinKind {
    generator.subschema_for::<T>();
    BuiltinKind {
        group,
        version,
        kind,
        definition: T::schema_name().into_owned(),
    }
}

macro_rules! kinds {
    ($generator:ident; $( $group:literal $version:literal $kind:ident => $path:path ),* $(,)?) => {
        vec![$( kind::<$path>($generator, $group, $version, stringify!($kind)) ),*]
    };
}

/// Registers every built-in kind's schema (and those it refers to) with `generator`, in
/// the order of [`crate::registry::builtin::TABLE`].
pub fn register(generator: &mut SchemaGenerator) -> Vec<BuiltinKind> {
    use k8s_openapi::api;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration;
    // List kinds are written by hand (`super::list_schema`); their metadata is this.
    generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta>();
    let g = generator;
    kinds![g;
        "" "v1" ConfigMap => api::core::v1::ConfigMap,
        "" "v1" Endpoints => api::core::v1::Endpoints,
        "" "v1" Event => api::core::v1::Event,
        "" "v1" LimitRange => api::core::v1::LimitRange,
        "" "v1" Namespace => api::core::v1::Namespace,
        "" "v1" Node => api::core::v1::Node,
        "" "v1" PersistentVolumeClaim => api::core::v1::PersistentVolumeClaim,
        "" "v1" PersistentVolume => api::core::v1::PersistentVolume,
        "" "v1" Pod => api::core::v1::Pod,
        "" "v1" PodTemplate => api::core::v1::PodTemplate,
        "" "v1" ReplicationController => api::core::v1::ReplicationController,
        "" "v1" ResourceQuota => api::core::v1::ResourceQuota,
        "" "v1" Secret => api::core::v1::Secret,
        "" "v1" ServiceAccount => api::core::v1::ServiceAccount,
        "" "v1" Service => api::core::v1::Service,
        "apiregistration.k8s.io" "v1" APIService => apiregistration::APIService,
        "apps" "v1" ControllerRevision => api::apps::v1::ControllerRevision,
        "apps" "v1" DaemonSet => api::apps::v1::DaemonSet,
        "apps" "v1" Deployment => api::apps::v1::Deployment,
        "apps" "v1" ReplicaSet => api::apps::v1::ReplicaSet,
        "apps" "v1" StatefulSet => api::apps::v1::StatefulSet,
        "events.k8s.io" "v1" Event => api::events::v1::Event,
        "autoscaling" "v2" HorizontalPodAutoscaler => api::autoscaling::v2::HorizontalPodAutoscaler,
        "batch" "v1" CronJob => api::batch::v1::CronJob,
        "batch" "v1" Job => api::batch::v1::Job,
        "certificates.k8s.io" "v1" CertificateSigningRequest => api::certificates::v1::CertificateSigningRequest,
        "networking.k8s.io" "v1" IngressClass => api::networking::v1::IngressClass,
        "networking.k8s.io" "v1" Ingress => api::networking::v1::Ingress,
        "networking.k8s.io" "v1" IPAddress => api::networking::v1::IPAddress,
        "networking.k8s.io" "v1" NetworkPolicy => api::networking::v1::NetworkPolicy,
        "networking.k8s.io" "v1" ServiceCIDR => api::networking::v1::ServiceCIDR,
        "policy" "v1" PodDisruptionBudget => api::policy::v1::PodDisruptionBudget,
        "rbac.authorization.k8s.io" "v1" ClusterRoleBinding => api::rbac::v1::ClusterRoleBinding,
        "rbac.authorization.k8s.io" "v1" ClusterRole => api::rbac::v1::ClusterRole,
        "rbac.authorization.k8s.io" "v1" RoleBinding => api::rbac::v1::RoleBinding,
        "rbac.authorization.k8s.io" "v1" Role => api::rbac::v1::Role,
        "storage.k8s.io" "v1" CSIDriver => api::storage::v1::CSIDriver,
        "storage.k8s.io" "v1" CSINode => api::storage::v1::CSINode,
        "storage.k8s.io" "v1" CSIStorageCapacity => api::storage::v1::CSIStorageCapacity,
        "storage.k8s.io" "v1" StorageClass => api::storage::v1::StorageClass,
        "storage.k8s.io" "v1" VolumeAttachment => api::storage::v1::VolumeAttachment,
        "storage.k8s.io" "v1" VolumeAttributesClass => api::storage::v1::VolumeAttributesClass,
        "admissionregistration.k8s.io" "v1" MutatingWebhookConfiguration => api::admissionregistration::v1::MutatingWebhookConfiguration,
        "admissionregistration.k8s.io" "v1" ValidatingAdmissionPolicy => api::admissionregistration::v1::ValidatingAdmissionPolicy,
        "admissionregistration.k8s.io" "v1" ValidatingAdmissionPolicyBinding => api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
        "admissionregistration.k8s.io" "v1" ValidatingWebhookConfiguration => api::admissionregistration::v1::ValidatingWebhookConfiguration,
        "apiextensions.k8s.io" "v1" CustomResourceDefinition => apiextensions::CustomResourceDefinition,
        "scheduling.k8s.io" "v1" PriorityClass => api::scheduling::v1::PriorityClass,
        "coordination.k8s.io" "v1" Lease => api::coordination::v1::Lease,
        "node.k8s.io" "v1" RuntimeClass => api::node::v1::RuntimeClass,
        "discovery.k8s.io" "v1" EndpointSlice => api::discovery::v1::EndpointSlice,
        "flowcontrol.apiserver.k8s.io" "v1" FlowSchema => api::flowcontrol::v1::FlowSchema,
        "flowcontrol.apiserver.k8s.io" "v1" PriorityLevelConfiguration => api::flowcontrol::v1::PriorityLevelConfiguration,
        "resource.k8s.io" "v1" DeviceClass => api::resource::v1::DeviceClass,
        "resource.k8s.io" "v1" ResourceClaim => api::resource::v1::ResourceClaim,
        "resource.k8s.io" "v1" ResourceClaimTemplate => api::resource::v1::ResourceClaimTemplate,
        "resource.k8s.io" "v1" ResourceSlice => api::resource::v1::ResourceSlice,
    ]
}
