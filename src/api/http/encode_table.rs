//! Table output (`as=Table;g=meta.k8s.io`): what kubectl prints. Cells are computed per
//! request from the object (Tables serve people, not fan-out); rows carry the object as
//! PartialObjectMetadata, the whole object, or nothing (`includeObject`).

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use super::body::{Body, BufList};
use super::table;
use crate::api::read::ListPage;
use crate::api::status::ApiError;
use crate::api::watch::WatchEncoder;
use crate::registry::{ResourceInfo, ResourceRef};
use crate::store::event_log::JSON_FRAME_SUFFIX;
use crate::store::{EventType, ObjectRef, WatchEvent};
use crate::Revision;

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
    let value: serde_json::Value = serde_json::from_slice(&obj.json).unwrap_or_default();
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
            out.push(obj.json.clone());
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

fn push_table(
    out: &mut BufList,
    info: &ResourceInfo,
    version: &str,
    include: IncludeObject,
    list_meta: &str,
    with_columns: bool,
    rows: &[ObjectRef],
) {
    let columns = if with_columns {
        let defs: Vec<serde_json::Value> =
            table::columns(info).iter().map(|c| c.to_json()).collect();
        serde_json::to_string(&defs).unwrap_or_else(|_| "[]".into())
    } else {
        "null".into()
    };
    out.push(Bytes::from(format!(
        "{{\"kind\":\"Table\",\"apiVersion\":\"meta.k8s.io/{version}\",\"metadata\":{list_meta},\"columnDefinitions\":{columns},\"rows\":["
    )));
    let now = now_unix();
    for (i, obj) in rows.iter().enumerate() {
        if i > 0 {
            out.push_static(b",");
        }
        push_row(out, info, version, include, obj, now);
    }
    out.push_static(b"]}");
}

/// A Table of a list page.
pub fn list_table(
    info: &ResourceInfo,
    version: &str,
    include: IncludeObject,
    page: &ListPage,
) -> Body {
    let mut out = BufList::new();
    push_table(
        &mut out,
        info,
        version,
        include,
        &super::encode::list_meta(page),
        true,
        &page.items,
    );
    Body::segments(out)
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

/// Watch events whose objects are one-row Tables; only the first carries the columns.
pub struct TableLines {
    info: ResourceRef,
    version: &'static str,
    include: IncludeObject,
    columns_sent: bool,
    frame: BufList,
    items: usize,
}

impl TableLines {
    /// An encoder for `meta.k8s.io/<version>` Tables of `info`'s objects.
    pub fn new(info: ResourceRef, version: &'static str, include: IncludeObject) -> Self {
        TableLines {
            info,
            version,
            include,
            columns_sent: false,
            frame: BufList::new(),
            items: 0,
        }
    }

    fn push(&mut self, t: EventType, obj: &ObjectRef) {
        self.frame.push_static(t.json_frame_prefix());
        let meta = format!("{{\"resourceVersion\":\"{}\"}}", obj.revision);
        let with_columns = !self.columns_sent;
        push_table(
            &mut self.frame,
            &self.info,
            self.version,
            self.include,
            &meta,
            with_columns,
            std::slice::from_ref(obj),
        );
        self.columns_sent = true;
        self.frame.push_static(JSON_FRAME_SUFFIX);
        self.items += 1;
    }
}

impl WatchEncoder for TableLines {
    type Frame = BufList;

    fn event(&mut self, t: EventType, ev: &WatchEvent) {
        if let Some(obj) = ev.object_for(t) {
            let obj = obj.clone();
            self.push(t, &obj);
        }
    }

    fn initial(&mut self, obj: &ObjectRef) {
        self.push(EventType::Added, obj);
    }

    fn bookmark(&mut self, info: &ResourceInfo, rv: Revision, initial_events_end: bool) {
        self.frame
            .push(super::encode::bookmark_frame(info, rv, initial_events_end));
        self.items += 1;
    }

    fn error(&mut self, err: &ApiError) {
        self.frame.push(super::encode::error_frame(err));
        self.items += 1;
    }

    fn pending(&self) -> usize {
        self.items
    }

    fn take(&mut self) -> BufList {
        self.items = 0;
        std::mem::take(&mut self.frame)
    }
}
