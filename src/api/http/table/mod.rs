//! Table columns and cells per resource (kube-apiserver's printers). This version has the
//! default convertor only: Name and Created At.

use crate::registry::ResourceInfo;

/// One column definition as Table.columnDefinitions serializes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Header.
    pub name: String,
    /// OpenAPI type.
    pub type_: String,
    /// OpenAPI format.
    pub format: String,
    /// Description.
    pub description: String,
    /// 0 = shown by default.
    pub priority: i32,
}

impl Column {
    /// `{"name","type","format","description","priority"}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name, "type": self.type_, "format": self.format,
            "description": self.description, "priority": self.priority,
        })
    }
}

/// The columns for a resource.
pub fn columns(_info: &ResourceInfo) -> Vec<Column> {
    vec![
        Column {
            name: "Name".into(),
            type_: "string".into(),
            format: "name".into(),
            description: "Name must be unique within a namespace.".into(),
            priority: 0,
        },
        Column {
            name: "Created At".into(),
            type_: "date".into(),
            format: String::new(),
            description: "CreationTimestamp is a timestamp representing the server time when this object was created.".into(),
            priority: 0,
        },
    ]
}

/// The cells of one row.
pub fn cells(
    _info: &ResourceInfo,
    object: &serde_json::Value,
    _now_unix: i64,
) -> Vec<serde_json::Value> {
    vec![
        object["metadata"]["name"].clone(),
        object["metadata"]["creationTimestamp"].clone(),
    ]
}
