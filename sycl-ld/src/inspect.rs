//! `sycl-ld inspect FILE [--json] [--extract DIR]`: the user's window into the device images
//! of a binary or a device library file.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, Context, Result};
use serde_json::{json, Map, Value};
use sycl_format::aspects::aspect_name;
use sycl_format::cubin::Cubin;
use sycl_format::{ImageSet, ParamKind, PropertyValue, Target};

use crate::embed::Settings;
use crate::scan::FoundObject;

pub(crate) fn run(args: &[OsString]) -> Result<ExitCode> {
    let command = &crate::usage::INSPECT;
    let mut json_out = false;
    let mut file = None;
    let mut extract = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--json") => json_out = true,
            Some("--extract") => {
                let dir =
                    args.next().ok_or_else(|| command.error("--extract needs a directory"))?;
                extract = Some(PathBuf::from(dir));
            }
            Some(s) if s.starts_with('-') => {
                return Err(command.error(format!("unknown option `{s}`")))
            }
            _ if file.is_none() => file = Some(PathBuf::from(arg)),
            _ => return Err(command.error("more than one file given")),
        }
    }
    let path = file.ok_or_else(|| command.error("no file given"))?;
    command.existing(&path)?;
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let embedded = match object::File::parse(&*bytes) {
        Ok(object) => crate::scan::embedded_images(&object)
            .with_context(|| format!("{}: malformed embedded device images", path.display()))?,
        // An archive (`libsycl_device_*.a`, an rlib): its members' device objects, below.
        Err(_) if bytes.starts_with(b"!<arch>\n") => None,
        // A device library file (`sycl-ld device-lib`) is an image set as it is.
        Err(e) => Some(ImageSet::decode(&bytes).map_err(|_| {
            anyhow!(
                "{}: not an object file, an archive or a device library file: {e}",
                path.display()
            )
        })?),
    };
    let file = path.display().to_string();
    // No embedded images: device objects not linked yet (an object, an archive or an rlib
    // that sycl-build made), shown with the images a link makes of them.
    let (objects, set) = match embedded {
        Some(set) => (Vec::new(), set),
        None => linked_objects(&path)?,
    };
    if json_out {
        let mut value = to_json(&file, &set);
        if !objects.is_empty() {
            value["device_objects"] = objects.iter().map(object_json).collect();
        }
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!("{}", objects_text(&file, &objects));
        print!("{}", to_text(&file, &set));
    }
    if let Some(dir) = extract {
        let written = extract_images(&set, &dir)?;
        eprintln!("sycl-ld inspect: wrote {written} image(s) to {}", dir.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// The device objects in `path` (an object, an archive or an rlib that `sycl-build` made),
/// and the images their device link makes for `spir64`, as `post-link` makes them (none for a
/// file without device objects).
fn linked_objects(path: &Path) -> Result<(Vec<FoundObject>, ImageSet)> {
    let mut line = crate::args::parse(&[]);
    line.inputs = vec![crate::args::Input::File(path.to_path_buf())];
    let found = crate::scan::scan(&line)?;
    if found.objects.is_empty() {
        return Ok((Vec::new(), ImageSet::default()));
    }
    let mut settings = Settings::of(&found.objects)?;
    settings.targets = vec![Target::Spir64];
    let (set, warnings) = crate::embed::device_link(&found.objects, &settings, &[])?;
    for line in warnings.iter().flat_map(|w| w.lines()) {
        eprintln!("sycl-ld: {line}");
    }
    Ok((found.objects, set))
}

/// What the text output says of the device objects, before the images of their link.
fn objects_text(file: &str, objects: &[FoundObject]) -> String {
    let mut out = String::new();
    if objects.is_empty() {
        return out;
    }
    let n = objects.len();
    let _ = writeln!(
        out,
        "{file}: {n} device object{} (not linked yet: below, the spir64 images a link makes of \
         them)",
        if n == 1 { "" } else { "s" }
    );
    for found in objects {
        let o = &found.object;
        let targets =
            if o.targets.is_empty() { "default".to_string() } else { o.targets.join(", ") };
        let split = o.split.map_or("auto".to_string(), |s| s.name().to_string());
        let _ = writeln!(
            out,
            "device object {}: package {}, source {}, split {split}, targets {targets}, {} bytes \
             of SPIR-V",
            found.origin,
            o.package,
            o.source,
            o.spirv.len()
        );
    }
    out
}

/// A device object in the JSON output.
fn object_json(found: &FoundObject) -> Value {
    let o = &found.object;
    json!({
        "origin": found.origin,
        "package": o.package,
        "source": o.source,
        "split": o.split.map(|s| s.name()),
        "targets": o.targets,
        "spirv_bytes": o.spirv.len(),
    })
}

/// Writes each image's code to `dir` (made if missing) as `image-N.TARGET.EXT`, the extension
/// its format's tools expect (`spv`, `ptx`, `cubin` for an NVIDIA object, `bc`, `bin`), so
/// that `spirv-dis`, `ptxas` or `cuobjdump` read it. Returns how many it wrote.
fn extract_images(set: &ImageSet, dir: &std::path::Path) -> Result<usize> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (i, image) in set.images.iter().enumerate() {
        let extension = match image.format {
            sycl_format::ImageFormat::SpirV => "spv",
            sycl_format::ImageFormat::Ptx => "ptx",
            sycl_format::ImageFormat::SpirBitcode => "bc",
            sycl_format::ImageFormat::Native if sass_summary(image).is_some() => "cubin",
            sycl_format::ImageFormat::Native => "bin",
        };
        let path = dir.join(format!("image-{i}.{}.{extension}", image.target));
        std::fs::write(&path, &image.data)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(set.images.len())
}

/// A property's value for people: device requirements decoded (aspect names, sizes), other
/// byte arrays as numbers, a call graph node's callees as a list, a kernel's parameters as a
/// list of objects (kind, size, type, name).
fn value_json(set: &str, name: &str, value: &PropertyValue) -> Value {
    use sycl_format::requirements::{ASPECT, FIXED_TARGET, REQD_WORK_GROUP_SIZE};
    match value {
        PropertyValue::U32(v) => json!(v),
        PropertyValue::String(s) if set == sycl_format::sets::CALL_GRAPH => {
            json!(sycl_format::call_graph_callees(s).collect::<Vec<_>>())
        }
        PropertyValue::String(s) if set == sycl_format::sets::KERNEL_ARGUMENTS => {
            match sycl_format::parse_kernel_params(s) {
                Ok(params) => {
                    let objects = params.iter().map(|p| json!({ "kind": p.kind.name(), "size": p.size, "type": p.ty, "name": p.name }));
                    Value::Array(objects.collect())
                }
                Err(_) => json!(s),
            }
        }
        PropertyValue::String(s) => json!(s),
        PropertyValue::Bytes(b) if set == sycl_format::sets::DEVICE_REQUIREMENTS => {
            let Some(values) = sycl_format::aspects::decode_u32s(b) else { return json!(b) };
            match name {
                ASPECT | FIXED_TARGET => {
                    json!(values.iter().map(|a| aspect_name(*a)).collect::<Vec<_>>())
                }
                REQD_WORK_GROUP_SIZE => {
                    let set = sycl_format::PropertySet {
                        name: set.to_string(),
                        properties: vec![sycl_format::Property::new(name, value.clone())],
                    };
                    match sycl_format::DeviceRequirements::from_property_set(&set) {
                        Ok(r) => json!(r.reqd_work_group_sizes),
                        Err(_) => json!(values),
                    }
                }
                _ => json!(values),
            }
        }
        PropertyValue::Bytes(b) => json!(b),
    }
}

pub(crate) fn to_json(file: &str, set: &ImageSet) -> Value {
    let images: Vec<Value> = set
        .images
        .iter()
        .map(|image| {
            let mut properties = Map::new();
            for ps in &image.property_sets {
                let entries: Map<String, Value> = ps
                    .properties
                    .iter()
                    .map(|p| (p.name.clone(), value_json(&ps.name, &p.name, &p.value)))
                    .collect();
                properties.insert(ps.name.clone(), Value::Object(entries));
            }
            let mut out = json!({
                "format": image.format.name(),
                "target": image.target,
                "kernels": image.kernels,
                "exported": image.exported_symbols().collect::<Vec<_>>(),
                "imported": image.imported_symbols().collect::<Vec<_>>(),
                "properties": properties,
            });
            if let Some((cubin, [functions, externs, variables])) = sass_summary(image) {
                out["sass"] = json!({
                    "arch": format!("sm_{}", cubin.arch),
                    "relocatable": cubin.relocatable,
                    "functions": functions,
                    "externs": externs,
                    "variables": variables,
                });
            }
            if let Some(ptx) = ptx_summary(image) {
                out["ptx"] = json!({
                    "version": ptx.version,
                    "target": ptx.target,
                    "entries": ptx.entries,
                    "functions": ptx.functions,
                    "externs": ptx.externs,
                    "variables": ptx.variables,
                });
            }
            out
        })
        .collect();
    json!({ "file": file, "images": images })
}

/// What a PTX image declares: its kernels, exported, imported functions and visible
/// variables, as its directives say.
fn ptx_summary(image: &sycl_format::Image) -> Option<crate::ptx::Summary> {
    (image.format == sycl_format::ImageFormat::Ptx)
        .then(|| crate::ptx::Summary::of(&String::from_utf8_lossy(&image.data)))
}

/// What a native NVIDIA image holds: its architecture, whether it is relocatable, and its
/// defined functions, imported functions and visible variables, as its symbol table says.
fn sass_summary(image: &sycl_format::Image) -> Option<(Cubin<'_>, [Vec<&str>; 3])> {
    let native = sycl_format::Target::from_name(&image.target)?.cuda_arch().is_some();
    let cubin = Cubin::parse(&image.data).ok().filter(|_| native)?;
    let summary = cubin.summary();
    Some((cubin, summary))
}

/// A kernel's parameters as declared, `(global int* out, int n, struct Pt p (12 bytes))`: a
/// struct's size is not in its type text, and is what a host struct of another layout gets
/// wrong. `None` when the value is malformed (then it shows as it is).
fn params_text(value: &str) -> Option<String> {
    let params = sycl_format::parse_kernel_params(value).ok()?;
    let declarations: Vec<String> = params
        .iter()
        .map(|p| match (p.kind, p.size) {
            (ParamKind::Struct, 0) => format!("{} (size unknown)", p.declaration()),
            (ParamKind::Struct, size) => format!("{} ({size} bytes)", p.declaration()),
            _ => p.declaration(),
        })
        .collect();
    Some(format!("({})", declarations.join(", ")))
}

pub(crate) fn to_text(file: &str, set: &ImageSet) -> String {
    let mut out = String::new();
    let n = set.images.len();
    let _ = writeln!(out, "{file}: {n} device image{}", if n == 1 { "" } else { "s" });
    for (i, image) in set.images.iter().enumerate() {
        let _ = writeln!(
            out,
            "image {i}: {} {} ({} bytes)",
            image.format.name(),
            image.target,
            image.data.len()
        );
        let list =
            |items: Vec<&str>| if items.is_empty() { "-".to_string() } else { items.join(" ") };
        let _ = writeln!(
            out,
            "  kernels:  {}",
            list(image.kernels.iter().map(String::as_str).collect())
        );
        let _ = writeln!(out, "  exported: {}", list(image.exported_symbols().collect()));
        let _ = writeln!(out, "  imported: {}", list(image.imported_symbols().collect()));
        if let Some(ptx) = ptx_summary(image) {
            let names = |v: &[String]| list(v.iter().map(String::as_str).collect());
            let _ = writeln!(out, "  ptx:      .version {} .target {}", ptx.version, ptx.target);
            let _ = writeln!(out, "    .visible .entry: {}", names(&ptx.entries));
            let _ = writeln!(out, "    .visible .func:  {}", names(&ptx.functions));
            let _ = writeln!(out, "    .extern .func:   {}", names(&ptx.externs));
            let _ = writeln!(out, "    variables:       {}", names(&ptx.variables));
        }
        if let Some((cubin, [functions, externs, variables])) = sass_summary(image) {
            let kind = if cubin.relocatable { "relocatable" } else { "executable" };
            let _ = writeln!(out, "  sass:     sm_{} {kind} object", cubin.arch);
            let _ = writeln!(out, "    functions:       {}", list(functions));
            let _ = writeln!(out, "    undefined:       {}", list(externs));
            let _ = writeln!(out, "    variables:       {}", list(variables));
        }
        for ps in &image.property_sets {
            let _ = writeln!(out, "  [{}]", ps.name);
            for p in &ps.properties {
                let value = match &p.value {
                    PropertyValue::String(s) if ps.name == sycl_format::sets::KERNEL_ARGUMENTS => {
                        params_text(s)
                    }
                    _ => None,
                };
                let value =
                    value.unwrap_or_else(|| value_json(&ps.name, &p.name, &p.value).to_string());
                let _ = writeln!(out, "    {} = {value}", p.name);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALUE: &str =
        "global\t8\tglobal int*\tout\nlocal\t8\tlocal float*\t\nstruct\t12\tstruct Pt\tp";

    #[test]
    fn kernel_arguments_read_as_objects_in_json_and_as_a_parameter_list_in_text() {
        let value = PropertyValue::String(VALUE.into());
        assert_eq!(
            value_json(sycl_format::sets::KERNEL_ARGUMENTS, "k", &value),
            json!([
                { "kind": "global", "size": 8, "type": "global int*", "name": "out" },
                { "kind": "local", "size": 8, "type": "local float*", "name": "" },
                { "kind": "struct", "size": 12, "type": "struct Pt", "name": "p" },
            ])
        );
        assert_eq!(
            params_text(VALUE).unwrap(),
            "(global int* out, local float*, struct Pt p (12 bytes))"
        );
        assert_eq!(params_text("").unwrap(), "()");
    }

    #[test]
    fn a_malformed_record_shows_as_it_is() {
        let value = PropertyValue::String("pointer\t8\tint*\tp".into());
        assert_eq!(
            value_json(sycl_format::sets::KERNEL_ARGUMENTS, "k", &value),
            json!("pointer\t8\tint*\tp")
        );
        assert_eq!(params_text("pointer\t8\tint*\tp"), None);
    }
}
