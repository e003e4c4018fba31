//! Table output (`as=Table;g=meta.k8s.io`): what kubectl prints. Cells are computed per
//! request from the object (Tables serve people, not fan-out); rows carry the object as
//! PartialObjectMetadata, the whole object, or nothing (`includeObject`).

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use super::body::{Body, BufList};
use super::encode::ObjectView;
use crate::api::read::ListPage;
use crate::api::status::ApiError;
use crate::api::table;
use crate::registry::{ResourceInfo, ResourceRef};
use crate::store::ObjectRef;

/// What each row carries as its `object` (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    /// No object.
    None,
    /// PartialObjectMetadata (the default).
    Metadata,
    /// The whole object.
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` parameter.
    pub fn parse(v: Option<&str>) -> Result<IncludeObject, ApiError> {
        match v {
            None | Some("") | Some("Metadata") => Ok(IncludeObject::Metadata),
            Some("None") => Ok(IncludeObject::None),
            Some("Object") => Ok(IncludeObject::Object),
            Some(other) => Err(ApiError::BadRequest(format!(
                "includeObject must be one of None, Metadata, Object (got {other:?})"
            ))),
        }
    }
}

fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn push_row(
    out: &mut BufList,
    info: &ResourceInfo,
    version: &str,
    include: IncludeObject,
    obj: &ObjectRef,
    now: i64,
) {
    let value: serde_json::Value = serde_json::from_slice(&obj.json()).unwrap_or_default();
    let cells = table::cells(info, &value, now);
    out.push(Bytes::from(format!(
        "{{\"cells\":{}",
        serde_json::to_string(&cells).unwrap_or_else(|_| "[]".into())
    )));
    let conditions = table::row_conditions(info, &value);
    if !conditions.is_empty() {
        out.push(Bytes::from(format!(
            ",\"conditions\":{}",
            serde_json::to_string(&conditions).unwrap_or_else(|_| "[]".into())
        )));
    }
    match include {
        IncludeObject::None => {}
        IncludeObject::Object => {
            out.push_static(b",\"object\":");
            out.push(obj.json());
        }
        IncludeObject::Metadata => {
            out.push(Bytes::from(format!(
                ",\"object\":{{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"meta.k8s.io/{version}\",\"metadata\":"
            )));
            out.push(obj.metadata_json());
            out.push_static(b"}");
        }
    }
    out.push_static(b"}");
}

/// A Table's JSON up to its first row.
fn table_head(info: &ResourceInfo, version: &str, list_meta: &str, with_columns: bool) -> Bytes {
    let columns = if with_columns {
        let defs: Vec<serde_json::Value> =
            table::columns(info).iter().map(|c| c.to_json()).collect();
        serde_json::to_string(&defs).unwrap_or_else(|_| "[]".into())
    } else {
        "null".into()
    };
    Bytes::from(format!(
        "{{\"kind\":\"Table\",\"apiVersion\":\"meta.k8s.io/{version}\",\"metadata\":{list_meta},\"columnDefinitions\":{columns},\"rows\":["
    ))
}

/// Rows of `objs`, comma separated (and after a row before them unless `first`).
fn push_rows(
    out: &mut BufList,
    info: &ResourceInfo,
    version: &str,
    include: IncludeObject,
    objs: &[ObjectRef],
    first: bool,
) {
    let now = now_unix();
    super::body::comma_separated(out, objs, first, |out, obj| {
        push_row(out, info, version, include, obj, now)
    });
}

fn push_table(
    out: &mut BufList,
    info: &ResourceInfo,
    version: &str,
    include: IncludeObject,
    list_meta: &str,
    with_columns: bool,
    rows: &[ObjectRef],
) {
    out.push(table_head(info, version, list_meta, with_columns));
    push_rows(out, info, version, include, rows, true);
    out.push_static(b"]}");
}

/// A Table of a list page, its rows made a batch at a time as the client reads them
/// ([`super::body::list`]).
pub fn list_table(
    info: &ResourceRef,
    version: &'static str,
    include: IncludeObject,
    page: ListPage,
) -> Body {
    let head = table_head(info, version, &super::encode::list_meta(&page), true);
    let info = info.clone();
    super::body::list(
        head,
        page.items,
        b"]}",
        page.meter,
        move |out, batch, first| push_rows(out, &info, version, include, batch, first),
    )
}

/// A one-row Table of a get.
pub fn object_table(
    info: &ResourceInfo,
    version: &str,
    include: IncludeObject,
    obj: &ObjectRef,
) -> Body {
    let mut out = BufList::new();
    let meta = format!("{{\"resourceVersion\":\"{}\"}}", obj.revision);
    push_table(
        &mut out,
        info,
        version,
        include,
        &meta,
        true,
        std::slice::from_ref(obj),
    );
    Body::segments(out)
}

/// Watch objects as one-row Tables; only the first event carries the columns.
pub struct TableView {
    info: ResourceRef,
    version: &'static str,
    include: IncludeObject,
    columns_sent: bool,
}

impl TableView {
    /// Tables of `meta.k8s.io/<version>` for `info`'s objects.
    pub fn new(info: ResourceRef, version: &'static str, include: IncludeObject) -> Self {
        TableView {
            info,
            version,
            include,
            columns_sent: false,
        }
    }
}

impl ObjectView for TableView {
    fn write(&mut self, out: &mut BufList, obj: &ObjectRef) {
        let meta = format!("{{\"resourceVersion\":\"{}\"}}", obj.revision);
        let with_columns = !self.columns_sent;
        let rows = std::slice::from_ref(obj);
        push_table(
            out,
            &self.info,
            self.version,
            self.include,
            &meta,
            with_columns,
            rows,
        );
        self.columns_sent = true;
    }
}
