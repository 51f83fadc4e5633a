//! File tables, as DPC++'s tools pass them around: `sycl-ld post-link` writes one row per
//! device image (code, properties, symbols), and `sycl-ld aspect-filter` drops the rows a
//! target cannot run (DPC++'s `sycl-aspect-filter`).
//!
//! A table is text: a header `[Code|Properties|Symbols]`, then one row of `|`-separated
//! paths per image (relative paths are relative to the table's directory). A properties file
//! lists each set as `[SET NAME]` followed by `name=TYPE|VALUE` lines, with DPC++'s type
//! numbers: 1 for a decimal uint32, 2 for a byte array in hex, 3 for a string. A string is
//! written with `\` as `\\` and a newline as `\n` (a `SYCL/call graph` value separates its
//! callees with newlines, a `SYCL/kernel arguments` value its parameters), so that every
//! property stays on one line.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use sycl_format::{
    sets, DeviceConfig, DeviceRequirements, Property, PropertySet, PropertyValue, Target,
};

use crate::args::{list, parse, parse_tool_args, Input};
use crate::embed::{self, Settings};
use crate::{scan, usage};

const HEADER: &str = "[Code|Properties|Symbols]";

/// `sycl-ld post-link [--split MODE] -o DIR INPUT...`
pub(crate) fn post_link(args: &[OsString]) -> Result<ExitCode> {
    let crate::args::ToolArgs { split, out: out_dir, inputs, .. } =
        parse_tool_args(args, &usage::POST_LINK)?;
    let mut line = parse(&[]);
    line.inputs = inputs.iter().cloned().map(Input::File).collect();
    let found = scan::scan(&line)?;
    if found.objects.is_empty() {
        bail!("no device objects in {} (post-link takes objects, archives and rlibs that sycl-build made)", list(&inputs));
    }
    let mut settings = Settings::of(&found.objects)?;
    if let Some(split) = split {
        settings.split = split;
    }
    settings.targets = vec![Target::Spir64];
    let (set, warnings) = embed::device_link(&found.objects, &settings, &[])?;
    for line in warnings.iter().flat_map(|w| w.lines()) {
        eprintln!("sycl-ld: {line}");
    }
    std::fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let mut table = format!("{HEADER}\n");
    for (i, image) in set.images.iter().enumerate() {
        let names =
            [format!("image_{i}.spv"), format!("image_{i}.props"), format!("image_{i}.sym")];
        let symbols: Vec<&str> =
            image.kernels.iter().map(String::as_str).chain(image.exported_symbols()).collect();
        let contents = [
            image.data.clone(),
            write_properties(&image.property_sets).into_bytes(),
            (symbols.join("\n") + "\n").into_bytes(),
        ];
        for (name, bytes) in names.iter().zip(contents) {
            let path = out_dir.join(name);
            std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        }
        let _ = writeln!(table, "{}", names.join("|"));
    }
    let path = out_dir.join("table.txt");
    std::fs::write(&path, table).with_context(|| format!("writing {}", path.display()))?;
    println!("{}", path.display());
    Ok(ExitCode::SUCCESS)
}

/// `sycl-ld aspect-filter --target T [--device-config FILE] [-o OUT] TABLE`
pub(crate) fn aspect_filter(args: &[OsString]) -> Result<ExitCode> {
    let command = &usage::ASPECT_FILTER;
    let (mut target, mut config_path, mut output, mut table) = (None, None, None, None);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |what: &str| {
            let flag = arg.to_string_lossy();
            it.next().cloned().ok_or_else(|| command.error(format!("`{flag}` needs {what}")))
        };
        match arg.to_str() {
            Some("--target") => target = Some(value("a target")?.to_string_lossy().into_owned()),
            Some("--device-config") => config_path = Some(PathBuf::from(value("a path")?)),
            Some("-o") => output = Some(PathBuf::from(value("a path")?)),
            Some(s) if s.starts_with('-') => {
                return Err(command.error(format!("unknown option `{s}`")))
            }
            _ if table.is_none() => table = Some(PathBuf::from(arg)),
            _ => return Err(command.error("more than one table given")),
        }
    }
    let target = target.ok_or_else(|| command.error("no target given (`--target`)"))?;
    let table = table.ok_or_else(|| command.error("no table given"))?;
    command.existing(&table)?;
    // Read before the table, which may not need it: a configuration named but unreadable is
    // an error whatever the table holds.
    let config = match &config_path {
        Some(path) => {
            let text = std::fs::read_to_string(command.existing(path)?)
                .with_context(|| format!("reading the device configuration {}", path.display()))?;
            // Its message is whole: as a chain, the TOML error's would come twice.
            DeviceConfig::parse(&text, &path.display().to_string()).map_err(|e| anyhow!("{e}"))?
        }
        None => DeviceConfig::default_config(),
    };
    let text =
        std::fs::read_to_string(&table).with_context(|| format!("reading {}", table.display()))?;
    let filtered = filter_table(&text, table.parent().unwrap_or(Path::new(".")), &target, &config)
        .with_context(|| table.display().to_string())?;
    match output {
        Some(path) => std::fs::write(&path, filtered)
            .with_context(|| format!("writing {}", path.display()))?,
        None => print!("{filtered}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// DPC++'s steps: a table without a Properties column passes whole; the target must have an
/// entry; a row stays when its image has no device requirements or the entry accepts them.
pub(crate) fn filter_table(
    text: &str,
    base: &Path,
    target: &str,
    config: &DeviceConfig,
) -> Result<String> {
    let mut lines = text.lines();
    let header = lines.next().ok_or_else(|| anyhow!("empty file table"))?;
    let columns =
        header.trim().strip_prefix('[').and_then(|h| h.strip_suffix(']')).ok_or_else(|| {
            anyhow!("not a file table: its first line is not a header such as `{HEADER}`")
        })?;
    let Some(props_column) = columns.split('|').position(|c| c == "Properties") else {
        return Ok(text.to_string());
    };
    let entry = config.target(target).ok_or_else(|| {
        let known: Vec<&str> = config.targets.keys().map(String::as_str).collect();
        anyhow!(
            "no entry for target `{target}` in the device configuration (entries: {})",
            known.join(", ")
        )
    })?;
    let mut out = format!("{header}\n");
    for row in lines.filter(|l| !l.trim().is_empty()) {
        let cell = row
            .split('|')
            .nth(props_column)
            .ok_or_else(|| anyhow!("row `{row}` has no Properties cell"))?;
        let path = base.join(cell);
        let props = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let sets = read_properties(&props).with_context(|| format!("{}", path.display()))?;
        let keep = match sets.iter().find(|s| s.name == sets::DEVICE_REQUIREMENTS) {
            None => true,
            Some(set) => DeviceRequirements::from_property_set(set)
                .map_err(|e| anyhow!("{}: {e}", path.display()))?
                .accepted_by(entry),
        };
        if keep {
            let _ = writeln!(out, "{row}");
        }
    }
    Ok(out)
}

pub(crate) fn write_properties(sets_in: &[PropertySet]) -> String {
    let mut out = String::new();
    for set in sets_in {
        let _ = writeln!(out, "[{}]", set.name);
        for p in &set.properties {
            let _ = match &p.value {
                PropertyValue::U32(v) => writeln!(out, "{}=1|{v}", p.name),
                PropertyValue::Bytes(b) => {
                    writeln!(
                        out,
                        "{}=2|{}",
                        p.name,
                        b.iter().map(|x| format!("{x:02x}")).collect::<String>()
                    )
                }
                PropertyValue::String(s) => writeln!(out, "{}=3|{}", p.name, escape(s)),
            };
        }
    }
    out
}

pub(crate) fn read_properties(text: &str) -> Result<Vec<PropertySet>> {
    let mut sets_out: Vec<PropertySet> = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            sets_out.push(PropertySet { name: name.to_string(), properties: vec![] });
            continue;
        }
        let bad = || anyhow!("line {}: expected `name=TYPE|VALUE` or `[set]`", n + 1);
        let set = sets_out.last_mut().ok_or_else(bad)?;
        let (name, rest) = line.split_once('=').ok_or_else(bad)?;
        let (ty, value) = rest.split_once('|').ok_or_else(bad)?;
        let value = match ty {
            "1" => PropertyValue::U32(value.parse().map_err(|_| bad())?),
            "2" if value.len() % 2 == 0 => PropertyValue::Bytes(
                (0..value.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&value[i..i + 2], 16))
                    .collect::<Result<_, _>>()
                    .map_err(|_| bad())?,
            ),
            "3" => PropertyValue::String(unescape(value).ok_or_else(bad)?),
            _ => return Err(bad()),
        };
        set.properties.push(Property::new(name, value));
    }
    Ok(sets_out)
}

/// A string value on one line: `\` as `\\`, a newline as `\n`.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

fn unescape(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        out.push(match c {
            '\\' => match chars.next()? {
                'n' => '\n',
                '\\' => '\\',
                _ => return None,
            },
            c => c,
        });
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_round_trip() {
        let sets_in = vec![
            PropertySet::symbols(sets::EXPORTED_SYMBOLS, ["f", "_ZN2ns1gEi"]),
            DeviceRequirements {
                aspects: vec![5],
                reqd_sub_group_sizes: vec![16],
                ..Default::default()
            }
            .to_property_set()
            .unwrap(),
            PropertySet {
                name: "x".into(),
                properties: vec![Property::new("s", PropertyValue::String("a|b=c".into()))],
            },
            PropertySet::call_graph([("f", ["g", "back\\slash\\n"]), ("g", ["f", "h"])]),
        ];
        assert_eq!(
            write_properties(&sets_in[3..]),
            "[SYCL/call graph]\nf=3|g\\nback\\\\slash\\\\n\ng=3|f\\nh\n"
        );
        assert_eq!(read_properties(&write_properties(&sets_in)).unwrap(), sets_in);
        assert!(read_properties("k=1|2\n").is_err(), "a property before any set");
        assert!(read_properties("[s]\nk=2|abc\n").is_err(), "odd hex");
        assert!(read_properties("[s]\nk=3|a\\tb\n").is_err(), "unknown escape");
    }

    #[test]
    fn filter_keeps_what_the_target_can_run() {
        let dir = tempfile::tempdir().unwrap();
        let fp16 = DeviceRequirements { aspects: vec![5], ..Default::default() }
            .to_property_set()
            .unwrap();
        std::fs::write(dir.path().join("a.props"), write_properties(&[])).unwrap();
        std::fs::write(dir.path().join("b.props"), write_properties(&[fp16])).unwrap();
        let table = format!("{HEADER}\na.spv|a.props|a.sym\nb.spv|b.props|b.sym\n");
        let config = DeviceConfig::default_config();
        let pocl = filter_table(&table, dir.path(), Target::PoclCpu.name(), &config).unwrap();
        assert_eq!(pocl, format!("{HEADER}\na.spv|a.props|a.sym\n"));
        let intel =
            filter_table(&table, dir.path(), Target::IntelCpuX86_64.name(), &config).unwrap();
        assert_eq!(intel, table);
        assert!(filter_table(&table, dir.path(), "no_such_target", &config)
            .unwrap_err()
            .to_string()
            .contains("no entry for target `no_such_target`"));
        let no_props = "[Code|Symbols]\na.spv|a.sym\n";
        assert_eq!(
            filter_table(no_props, dir.path(), "no_such_target", &config).unwrap(),
            no_props
        );
        let not_a_table =
            filter_table("int main() {}\n", dir.path(), Target::PoclCpu.name(), &config)
                .unwrap_err()
                .to_string();
        assert!(not_a_table.starts_with("not a file table"), "{not_a_table}");
    }
}
