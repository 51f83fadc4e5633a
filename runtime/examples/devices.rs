//! Lists every device the runtime finds, as data: the table `Error::NoDevice` prints (the
//! selector that picks each device, its backend, platform, name and type), then each device's
//! limits and aspects. `cargo run --example devices -p sycl-runtime`; it links no device code,
//! so any linker will do.

use sycl_runtime::{devices, DeviceInfo};

fn main() {
    match devices() {
        Ok(devices) => print(&devices),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}

fn print(devices: &[DeviceInfo]) {
    let header = ["selector", "backend", "platform", "name", "type"];
    let rows: Vec<[String; 5]> = devices
        .iter()
        .map(|d| {
            [
                d.selector.clone(),
                d.backend.to_string(),
                d.platform.clone(),
                d.name.clone(),
                d.device_type.to_string(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let line = |cells: [&str; 5]| {
        let padded: Vec<String> =
            cells.iter().zip(widths).map(|(cell, width)| format!("{cell:width$}")).collect();
        println!("{}", padded.join("  ").trim_end());
    };
    line(header);
    for row in &rows {
        line(row.each_ref().map(String::as_str));
    }
    for d in devices {
        println!();
        println!("{}:", d.selector);
        println!("  compute units:       {}", d.compute_units);
        if let Some((major, minor)) = d.compute_capability {
            println!("  compute capability:  {major}.{minor}");
        }
        println!("  global memory:       {}", bytes(d.global_mem_bytes));
        println!("  local memory:        {}", bytes(d.local_mem_bytes));
        println!("  max work-group size: {}", d.max_work_group_size);
        let sub_groups: Vec<String> = d.sub_group_sizes.iter().map(usize::to_string).collect();
        println!(
            "  sub-group sizes:     {}",
            if sub_groups.is_empty() { "(none)".into() } else { sub_groups.join(" ") }
        );
        println!("  aspects:             {}", d.aspects.join(" "));
    }
}

/// `bytes` in the largest binary unit that keeps it at least 1, with the exact count.
fn bytes(bytes: u64) -> String {
    let units = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{value:.1} {} ({bytes} bytes)", units[unit])
    }
}
