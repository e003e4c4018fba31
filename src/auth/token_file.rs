//! Static bearer tokens (`--token-auth-file`), read as kube-apiserver reads them: CSV
//! records `token,user,uid[,"group1,group2"]`, at least three columns, blank lines
//! skipped, an empty token skipped with a warning, a repeated token replacing the earlier
//! one with a warning. Also the `Authorization: Bearer` header parsing shared by every
//! token authenticator.

use std::collections::HashMap;
use std::path::Path;

use super::{ConfigError, UserInfo};

/// Users by token.
#[derive(Debug, Default)]
pub struct TokenFile {
    users: HashMap<String, UserInfo>,
}

impl TokenFile {
    /// Parses the file's text.
    pub fn parse(text: &str) -> Result<TokenFile, ConfigError> {
        let mut users = HashMap::new();
        for (i, record) in records(text)?.into_iter().enumerate() {
            let number = i + 1;
            if record.len() < 3 {
                return Err(ConfigError::ShortRecord {
                    record: number,
                    found: record.len(),
                });
            }
            if record[0].is_empty() {
                tracing::warn!(record = number, "empty token in the token file; skipped");
                continue;
            }
            let user = UserInfo {
                name: record[1].clone(),
                uid: record[2].clone(),
                groups: record
                    .get(3)
                    .map(|g| g.split(',').map(String::from).collect())
                    .unwrap_or_default(),
                ..UserInfo::default()
            };
            if users.insert(record[0].clone(), user).is_some() {
                tracing::warn!(
                    record = number,
                    "duplicate token in the token file; the later record wins"
                );
            }
        }
        Ok(TokenFile { users })
    }

    /// Reads and parses `path`, the file of `--token-auth-file`.
    pub fn load(path: &Path) -> Result<TokenFile, ConfigError> {
        const FLAG: &str = "token-auth-file";
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Unreadable {
            flag: FLAG,
            path: path.into(),
            source,
        })?;
        TokenFile::parse(&text).map_err(|e| ConfigError::InFile {
            flag: FLAG,
            path: path.into(),
            source: Box::new(e),
        })
    }

    /// The user of `token`, if the file has it.
    pub fn authenticate(&self, token: &str) -> Option<UserInfo> {
        self.users.get(token).cloned()
    }

    /// How many tokens the file holds.
    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// Whether the file holds no token.
    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }
}

/// CSV records as Go's `encoding/csv` reads them: quoted fields with `""` escapes and
/// newlines inside, records ended by `\n` or `\r\n` (a lone `\r` is data), blank lines
/// skipped.
fn records(text: &str) -> Result<Vec<Vec<String>>, ConfigError> {
    let c: Vec<char> = text.chars().collect();
    let at = |i: usize| c.get(i).copied();
    // The length of the line end at `i` (0 if none).
    let eol = |i: usize| match (at(i), at(i + 1)) {
        (Some('\n'), _) => 1,
        (Some('\r'), Some('\n')) => 2,
        _ => 0,
    };
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < c.len() {
        let n = eol(i);
        if n > 0 {
            i += n;
            line += 1;
            continue;
        }
        let mut record = Vec::new();
        loop {
            let mut field = String::new();
            if at(i) == Some('"') {
                i += 1;
                loop {
                    match at(i) {
                        Some('"') if at(i + 1) == Some('"') => {
                            field.push('"');
                            i += 2;
                        }
                        Some('"') => {
                            i += 1;
                            break;
                        }
                        Some(ch) => {
                            if ch == '\n' {
                                line += 1;
                            }
                            field.push(ch);
                            i += 1;
                        }
                        None => return Err(ConfigError::UnterminatedQuote { line }),
                    }
                }
                if at(i).is_some() && at(i) != Some(',') && eol(i) == 0 {
                    return Err(ConfigError::TextAfterQuote { line });
                }
            } else {
                while let Some(ch) = at(i) {
                    if ch == ',' || eol(i) > 0 {
                        break;
                    }
                    if ch == '"' {
                        return Err(ConfigError::BareQuote { line });
                    }
                    field.push(ch);
                    i += 1;
                }
            }
            record.push(field);
            if at(i) == Some(',') {
                i += 1;
                continue;
            }
            let n = eol(i);
            if n > 0 {
                i += n;
                line += 1;
            }
            break;
        }
        out.push(record);
    }
    Ok(out)
}

/// The token of an `Authorization` header as kube-apiserver reads it: scheme `Bearer`
/// (any case), one space, the token (text after a further space is ignored). None when
/// the header is not a bearer credential; `Some("")` for an empty token, which is
/// invalid.
pub fn bearer_token(header: &str) -> Option<&str> {
    let mut parts = header.trim().splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_with_quoted_groups_blank_lines_and_duplicates() {
        let f = TokenFile::parse(
            "t1,alice,uid-1,\"dev,ops\"\n\nt2,bob,uid-2\r\n,empty,uid-3\nt1,alice2,uid-4,admins\n",
        )
        .unwrap();
        assert_eq!(f.len(), 2);
        let a = f.authenticate("t1").unwrap();
        assert_eq!((a.name.as_str(), a.uid.as_str()), ("alice2", "uid-4"));
        assert_eq!(a.groups, ["admins"]);
        let b = f.authenticate("t2").unwrap();
        assert_eq!(b.name, "bob");
        assert!(b.groups.is_empty());
        assert_eq!(f.authenticate(""), None);
        assert_eq!(f.authenticate("t3"), None);
        // A lone carriage return is data, as in Go's reader.
        let r = TokenFile::parse("t\rx,carol,uid-5\n").unwrap();
        assert_eq!(r.authenticate("t\rx").unwrap().name, "carol");
        let q = TokenFile::parse("t,\"say \"\"hi\"\"\",u,\"a,b,c\"").unwrap();
        let u = q.authenticate("t").unwrap();
        assert_eq!(u.name, "say \"hi\"");
        assert_eq!(u.groups, ["a", "b", "c"]);
    }

    #[test]
    fn short_and_malformed_records_are_errors_with_their_position() {
        let e = TokenFile::parse("t1,alice,uid\nt2,bob\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("record 2") && e.contains("found 2"), "{e}");
        let e = TokenFile::parse("t1,\"alice,uid\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unterminated"), "{e}");
        let e = TokenFile::parse("t1,al\"ice,uid\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1"), "{e}");
    }

    #[test]
    fn load_errors_name_the_flag_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.csv");
        let e = TokenFile::load(&missing).unwrap_err();
        assert!(matches!(e, ConfigError::Unreadable { .. }), "{e:?}");
        let want = format!("--token-auth-file: reading {}: ", missing.display());
        assert!(e.to_string().starts_with(&want), "{e}");
        let short = dir.path().join("short.csv");
        std::fs::write(&short, "t1,alice\n").unwrap();
        let e = TokenFile::load(&short).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "--token-auth-file: {}: record 1 must have at least 3 columns (token, user name, user uid), found 2",
                short.display()
            )
        );
    }

    #[test]
    fn bearer_headers_are_read_as_kube_apiserver_reads_them() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer abc"), Some("abc"));
        assert_eq!(bearer_token("  BEARER abc  "), Some("abc"));
        assert_eq!(bearer_token("Bearer abc def"), Some("abc"));
        assert_eq!(
            bearer_token("Bearer  abc"),
            Some(""),
            "two spaces: empty token"
        );
        assert_eq!(bearer_token("Bearer"), None);
        assert_eq!(bearer_token("Basic dXNlcjpwYXNz"), None);
        assert_eq!(bearer_token(""), None);
    }
}
