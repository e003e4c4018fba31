//! Snapshot: several collections at one single revision, paged across them.
//!
//! The first page fixes the revision (read consistently, or the one asked for); every
//! later page lists the kept snapshot of that revision, so a client that reads all pages
//! holds the state of every collection as of one etcd revision.

use base64::Engine;
use serde::{Deserialize, Serialize};

use super::{objects, params, pb, Selected, DEFAULT_LIST_LIMIT, LIST_ENVELOPE_BYTES};
use crate::api::query::{scope_relative, ContinueToken, ListQuery, PageBound, RvParam};
use crate::api::read::{self, ReadContext};
use crate::api::status::ApiError;
use crate::Revision;

/// Where the next page starts: the revision, the selection, and the key in it.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct Token {
    rv: i64,
    selection: u32,
    /// The first key of the next page in that selection, relative to the selection's
    /// scope as a list's continue token holds it ("" for its start).
    start: String,
}

impl Token {
    fn encode(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
    }

    fn decode(s: &str, selections: usize) -> Result<Token, ApiError> {
        let bad = || ApiError::BadRequest("continue: not a token this API gave".into());
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(s)
            .map_err(|_| bad())?;
        let t: Token = serde_json::from_slice(&raw).map_err(|_| bad())?;
        // The start key is checked where every continue token is: it becomes one.
        if t.rv <= 0 || t.selection as usize >= selections {
            return Err(bad());
        }
        Ok(t)
    }
}

/// The revision a first page is at: `asked`, or the current one read consistently for
/// every selection.
async fn revision(
    read: &ReadContext,
    selections: &[Selected],
    asked: i64,
) -> Result<Revision, ApiError> {
    if asked < 0 {
        return Err(ApiError::BadRequest(format!(
            "resource_version: must not be negative, got {asked}"
        )));
    }
    if asked > 0 {
        return Ok(Revision(asked));
    }
    let stores: Vec<_> = selections.iter().map(|s| s.store.clone()).collect();
    read::wait_fresh_all(read, &stores, RvParam::Unset).await
}

/// One page of a Snapshot request.
pub async fn page(
    read: &ReadContext,
    selections: &[Selected],
    r: &pb::SnapshotRequest,
    max_message_bytes: usize,
) -> Result<pb::SnapshotResponse, ApiError> {
    let encoding = objects::encoding(r.encoding);
    let (rv, mut at, mut start) = if r.r#continue.is_empty() {
        (
            revision(read, selections, r.resource_version).await?,
            0,
            String::new(),
        )
    } else {
        let t = Token::decode(&r.r#continue, selections.len())?;
        (Revision(t.rv), t.selection as usize, t.start)
    };
    if r.limit < 0 {
        return Err(ApiError::BadRequest(format!(
            "limit: must not be negative, got {}",
            r.limit
        )));
    }
    let limit = match r.limit {
        0 => DEFAULT_LIST_LIMIT,
        n => usize::try_from(n).unwrap_or(usize::MAX),
    };
    let budget = max_message_bytes.saturating_sub(LIST_ENVELOPE_BYTES);
    let size = objects::sizer(encoding);
    let mut items = Vec::new();
    let mut bytes = 0usize;
    let mut next = None;
    while at < selections.len() {
        let s = &selections[at];
        let rv_text = rv.0.to_string();
        let token = (!start.is_empty()).then(|| ContinueToken::encode(rv, &start));
        let remaining = (limit - items.len()).to_string();
        let mut pairs = vec![
            ("labelSelector", s.label_selector.as_str()),
            ("fieldSelector", s.field_selector.as_str()),
            ("shardSelector", s.shard_selector.as_str()),
            ("limit", remaining.as_str()),
        ];
        match &token {
            Some(t) => pairs.push(("continue", t.as_str())),
            None => {
                pairs.push(("resourceVersion", rv_text.as_str()));
                pairs.push(("resourceVersionMatch", "Exact"));
            }
        }
        let q = ListQuery::parse(&s.store.info, &params(&pairs))?;
        let q = ListQuery {
            bound: Some(PageBound {
                items: limit - items.len(),
                bytes: budget.saturating_sub(bytes),
                size,
            }),
            ..q
        };
        let page = read::list_page(read, &s.store, s.namespace.as_deref(), &q).await?;
        let more_here = page.continue_token.is_some();
        let mut stopped = None;
        let mut last = None;
        for obj in page.items.iter() {
            let n = size(obj);
            // A page holds at least one object; past that, every object must fit.
            if !items.is_empty() && bytes + n > budget {
                stopped = Some(scope_relative(s.namespace.as_deref(), obj.key()).to_string());
                break;
            }
            bytes += n;
            let object = Some(objects::object(obj, encoding));
            items.push(pb::SnapshotItem {
                selection: at as u32,
                object,
            });
            last = Some(obj);
        }
        if let Some(key) = stopped {
            next = Some((at, key));
            break;
        }
        if more_here {
            // The next page of this selection starts just after its last object.
            let from = match last {
                Some(obj) => format!("{}\u{0}", scope_relative(s.namespace.as_deref(), obj.key())),
                None => std::mem::take(&mut start),
            };
            next = Some((at, from));
            break;
        }
        at += 1;
        start.clear();
        if at < selections.len() && (items.len() >= limit || bytes >= budget) {
            next = Some((at, String::new()));
            break;
        }
    }
    let r#continue = next
        .map(|(selection, start)| {
            Token {
                rv: rv.0,
                selection: selection as u32,
                start,
            }
            .encode()
        })
        .unwrap_or_default();
    Ok(pb::SnapshotResponse {
        resource_version: rv.0,
        items,
        r#continue,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_refuse_what_this_api_did_not_give() {
        let t = Token {
            rv: 42,
            selection: 1,
            start: "default/a\u{0}".into(),
        };
        assert_eq!(Token::decode(&t.encode(), 2).unwrap(), t);
        assert!(
            Token::decode(&t.encode(), 1).is_err(),
            "selection out of range"
        );
        assert!(Token::decode("not base64!", 2).is_err());
        let bad = Token { rv: 0, ..t };
        assert!(Token::decode(&bad.encode(), 2).is_err(), "revision 0");
    }
}
