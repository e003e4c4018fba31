//! `--config=FILE`: a YAML file of a command's flags, each key a flag's long name
//! (`etcd-servers: [https://10.0.0.1:2379]`, `http-address: 0.0.0.0:6443`). Its keys become
//! flags placed before those of the command line, so a flag given there overrides the
//! file's. The file is read as the command's own flags are: a key that is no flag, or a
//! value a flag does not take, is an error naming the file and the key.
//!
//! Values: a string or number is the flag's value; a list is the values of a flag that
//! takes several (joined with its delimiter, or the flag repeated); `true` gives a switch
//! and `false` leaves it off (a flag that takes a boolean gets it as its value).

use std::collections::{BTreeMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::ArgAction;
use serde_json::Value;

/// Why the configuration file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    #[error("--config {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--config {}: not a YAML mapping of flag names to values: {message}", path.display())]
    Parse { path: PathBuf, message: String },
    #[error("--config {}: {key:?} is not a flag of `{command}` (keys are flag names without the dashes, e.g. etcd-servers)", path.display())]
    UnknownKey {
        path: PathBuf,
        key: String,
        command: String,
    },
    #[error("--config {}: {key}: {message}", path.display())]
    Value {
        path: PathBuf,
        key: String,
        message: String,
    },
    #[error("--config needs a file name")]
    NoPath,
}

/// The command line `args` (the program's name first) with the flags of the file its
/// `subcommand` names with `--config` put in before the command line's own, if it names
/// one: `command` is the subcommand's definition, which says what its flags are.
pub fn expand(
    args: Vec<OsString>,
    subcommand: &str,
    command: &clap::Command,
) -> Result<Vec<OsString>, ConfigFileError> {
    // `watchd <subcommand> [flags]`: only that subcommand reads a file.
    if args.get(1).and_then(|a| a.to_str()) != Some(subcommand) {
        return Ok(args);
    }
    let Some(path) = config_path(&args[2..])? else {
        return Ok(args);
    };
    let text = std::fs::read_to_string(&path).map_err(|source| ConfigFileError::Read {
        path: path.clone(),
        source,
    })?;
    let from_file = flags(&path, &text, command, &given(&args[2..]))?;
    let mut out = Vec::with_capacity(args.len() + from_file.len());
    out.extend(args[..2].iter().cloned());
    out.extend(from_file.into_iter().map(OsString::from));
    out.extend(args[2..].iter().cloned());
    Ok(out)
}

/// The file `--config=FILE` or `--config FILE` names among `flags`.
fn config_path(flags: &[OsString]) -> Result<Option<PathBuf>, ConfigFileError> {
    let mut found = None;
    let mut it = flags.iter();
    while let Some(a) = it.next() {
        let Some(a) = a.to_str() else { continue };
        if a == "--" {
            break;
        }
        if let Some(p) = a.strip_prefix("--config=") {
            found = Some(PathBuf::from(p));
        } else if a == "--config" {
            let p = it.next().ok_or(ConfigFileError::NoPath)?;
            found = Some(PathBuf::from(p));
        }
    }
    Ok(found)
}

/// The long names of the flags given on the command line.
fn given(flags: &[OsString]) -> HashSet<String> {
    flags
        .iter()
        .filter_map(|a| a.to_str()?.strip_prefix("--"))
        .map(|a| a.split('=').next().unwrap_or(a).to_string())
        .collect()
}

/// The file's flags, as command-line arguments, leaving out those given on the command
/// line.
fn flags(
    path: &Path,
    text: &str,
    command: &clap::Command,
    given: &HashSet<String>,
) -> Result<Vec<String>, ConfigFileError> {
    let map: BTreeMap<String, Value> = if text.trim().is_empty() {
        BTreeMap::new()
    } else {
        serde_saphyr::from_str(text).map_err(|e| ConfigFileError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?
    };
    let mut out = Vec::new();
    for (key, value) in map {
        let arg = command
            .get_arguments()
            .find(|a| a.get_long() == Some(key.as_str()) && key != "config")
            .ok_or_else(|| ConfigFileError::UnknownKey {
                path: path.to_path_buf(),
                key: key.clone(),
                command: command.get_name().to_string(),
            })?;
        if given.contains(&key) {
            continue;
        }
        let bad = |message: &str| ConfigFileError::Value {
            path: path.to_path_buf(),
            key: key.clone(),
            message: message.to_string(),
        };
        let switch = matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse);
        match value {
            Value::Null => {}
            Value::Bool(on) if switch => {
                if on {
                    out.push(format!("--{key}"));
                }
            }
            Value::Bool(b) => out.push(format!("--{key}={b}")),
            _ if switch => return Err(bad("a switch: give true or false")),
            Value::Number(n) => out.push(format!("--{key}={n}")),
            Value::String(s) => out.push(format!("--{key}={s}")),
            Value::Array(items) => {
                let items = items
                    .into_iter()
                    .map(|v| match v {
                        Value::String(s) => Ok(s),
                        Value::Number(n) => Ok(n.to_string()),
                        Value::Bool(b) => Ok(b.to_string()),
                        _ => Err(bad("a list of strings or numbers")),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let many = arg.get_num_args().is_some_and(|n| n.max_values() > 1)
                    || matches!(arg.get_action(), ArgAction::Append);
                match arg.get_value_delimiter() {
                    Some(d) => out.push(format!("--{key}={}", items.join(&d.to_string()))),
                    None if many => out.extend(items.iter().map(|i| format!("--{key}={i}"))),
                    None if items.len() == 1 => out.push(format!("--{key}={}", items[0])),
                    None => return Err(bad("takes one value, not a list")),
                }
            }
            Value::Object(_) => return Err(bad("a value or a list, not a mapping")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command() -> clap::Command {
        clap::Command::new("serve")
            .arg(
                clap::Arg::new("servers")
                    .long("servers")
                    .value_delimiter(','),
            )
            .arg(clap::Arg::new("address").long("address"))
            .arg(
                clap::Arg::new("verbose")
                    .long("verbose")
                    .action(ArgAction::SetTrue),
            )
            .arg(clap::Arg::new("tag").long("tag").action(ArgAction::Append))
            .arg(clap::Arg::new("config").long("config"))
    }

    fn expanded(file: &str, cli: &[&str]) -> Result<Vec<String>, ConfigFileError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.yaml");
        std::fs::write(&path, file).unwrap();
        let mut args: Vec<OsString> = vec!["prog".into(), "serve".into()];
        args.push(format!("--config={}", path.display()).into());
        args.extend(cli.iter().map(OsString::from));
        let out = expand(args, "serve", &command())?;
        // The program, the subcommand, the file's flags, then the command line.
        Ok(out[2..]
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .filter(|a| !a.starts_with("--config="))
            .collect())
    }

    #[test]
    fn keys_become_flags_before_the_command_lines() {
        let file = "servers: [a, b]\naddress: 127.0.0.1:1\nverbose: true\ntag: [x, z]\n";
        let out = expanded(file, &["--address=127.0.0.1:2"]).unwrap();
        assert_eq!(
            out,
            [
                "--servers=a,b",
                "--tag=x",
                "--tag=z",
                "--verbose",
                "--address=127.0.0.1:2"
            ]
        );
        // What clap reads from them: the command line's address, the file's rest.
        let m = command()
            .try_get_matches_from(["serve"].into_iter().map(String::from).chain(out))
            .unwrap();
        assert_eq!(m.get_one::<String>("address").unwrap(), "127.0.0.1:2");
        let servers: Vec<&String> = m.get_many("servers").unwrap().collect();
        assert_eq!(servers, ["a", "b"]);
        assert!(m.get_flag("verbose"));
    }

    #[test]
    fn a_switch_set_false_and_an_empty_file_give_nothing() {
        assert!(expanded("verbose: false\n", &[]).unwrap().is_empty());
        assert!(expanded("", &[]).unwrap().is_empty());
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_file_and_key() {
        let e = expanded("etcd_servers: [a]\n", &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("c.yaml") && e.contains("\"etcd_servers\" is not a flag"),
            "{e}"
        );
        let e = expanded("config: other.yaml\n", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"config\" is not a flag"), "{e}");
        let e = expanded("address: [a, b]\n", &[]).unwrap_err().to_string();
        assert!(e.contains("address: takes one value"), "{e}");
        let e = expanded("verbose: yes please\n", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("verbose: a switch"), "{e}");
        let e = expanded("- a\n- b\n", &[]).unwrap_err().to_string();
        assert!(e.contains("not a YAML mapping"), "{e}");
    }

    #[test]
    fn without_config_or_for_another_subcommand_the_args_are_unchanged() {
        let args: Vec<OsString> = ["prog", "serve", "--address=x"].map(OsString::from).into();
        assert_eq!(expand(args.clone(), "serve", &command()).unwrap(), args);
        let args: Vec<OsString> = ["prog", "version", "--config=missing.yaml"]
            .map(OsString::from)
            .into();
        assert_eq!(expand(args.clone(), "serve", &command()).unwrap(), args);
        let missing: Vec<OsString> = ["prog", "serve", "--config=/no/such/file.yaml"]
            .map(OsString::from)
            .into();
        let e = expand(missing, "serve", &command())
            .unwrap_err()
            .to_string();
        assert!(e.contains("/no/such/file.yaml"), "{e}");
    }
}
