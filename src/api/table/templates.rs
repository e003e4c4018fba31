//! The pod-template cells that workload printers share: the template's container names
//! and images, each comma-joined in spec order (`layoutContainerCells`), and the
//! descriptions of those two columns.

use serde_json::Value;

use super::{column, list_at, str_at, string_cell, Column};

/// Description of every `Containers` column.
pub(super) const DESC_CONTAINERS: &str = "Names of the containers in the pod template.";
/// Description of every `Images` column.
pub(super) const DESC_IMAGES: &str = "Images of the containers in the pod template.";
/// The wide `Containers` and `Images` columns.
pub(super) fn template_columns() -> [Column; 2] {
    [
        column("Containers", "string", "", 1, DESC_CONTAINERS),
        column("Images", "string", "", 1, DESC_IMAGES),
    ]
}

/// The `Containers` and `Images` cells of the pod template at `spec.template`.
pub(super) fn template_cells(spec: &Value) -> [Value; 2] {
    let (names, images) = container_cells(list_at(spec, &["template", "spec", "containers"]));
    [string_cell(names), string_cell(images)]
}

/// Container names and images, each comma-joined in spec order.
pub(super) fn container_cells(containers: &[Value]) -> (String, String) {
    let names: Vec<&str> = containers.iter().map(|c| str_at(c, &["name"])).collect();
    let images: Vec<&str> = containers.iter().map(|c| str_at(c, &["image"])).collect();
    (names.join(","), images.join(","))
}
