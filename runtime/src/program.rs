//! Building programs for a device: each image compiled once (`clCompileProgram`) and reused
//! by every link that needs it, the collected images linked (`clLinkProgram`), and the linked
//! program cached in memory under the kernel's name and under its set of images, so another
//! kernel of the same set links nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::cl::{Context, DeviceId, Program};
use crate::registry::{ImageId, Registry};
use crate::trace::trace;
use crate::{resolve, Error};

/// Per-device state: the context and the caches built in it.
pub(crate) struct DeviceState {
    pub id: DeviceId,
    pub name: String,
    pub context: Context,
    caches: Mutex<Caches>,
}

#[derive(Default)]
struct Caches {
    compiled: HashMap<ImageId, Arc<Program>>,
    linked: HashMap<Vec<ImageId>, Arc<Program>>,
    by_kernel: HashMap<String, Arc<Program>>,
}

impl DeviceState {
    pub(crate) fn new(id: DeviceId, name: String) -> Result<DeviceState, Error> {
        Ok(DeviceState { id, name, context: Context::new(id)?, caches: Mutex::default() })
    }

    /// The linked program that contains `kernel`. Builds are serialised per device, so many
    /// threads asking for the same kernel build it once.
    pub(crate) fn program_for(&self, registry: &Registry, kernel: &str) -> Result<Arc<Program>, Error> {
        let mut caches = self.caches.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(program) = caches.by_kernel.get(kernel) {
            trace!("cache-hit", "{kernel} on {}", self.name);
            return Ok(program.clone());
        }
        let images = resolve::collect(registry, kernel)?;
        let mut key = images.clone();
        key.sort();
        let program = match caches.linked.get(&key) {
            Some(program) => {
                trace!("cache-hit", "{kernel} on {}: program of {} image(s) already linked", self.name, key.len());
                program.clone()
            }
            None => {
                let program = Arc::new(self.build(registry, &mut caches, kernel, &images)?);
                caches.linked.insert(key, program.clone());
                program
            }
        };
        caches.by_kernel.insert(kernel.to_string(), program.clone());
        Ok(program)
    }

    fn build(&self, registry: &Registry, caches: &mut Caches, kernel: &str, images: &[ImageId]) -> Result<Program, Error> {
        let mut objects = Vec::with_capacity(images.len());
        for &id in images {
            if let Some(object) = caches.compiled.get(&id) {
                objects.push(object.clone());
                continue;
            }
            trace!("compile", "{} on {}", registry.describe(id), self.name);
            let program = Program::from_il(&self.context, &registry.image(id).data)?;
            program.compile(self.id, "").map_err(|(code, log)| Error::Build {
                device: self.name.clone(),
                what: format!("compiling {} (OpenCL error {code})", registry.describe(id)),
                log,
            })?;
            let program = Arc::new(program);
            caches.compiled.insert(id, program.clone());
            objects.push(program);
        }
        let names: Vec<String> = images.iter().map(|&id| registry.describe(id)).collect();
        trace!("link", "{kernel} on {}: {}", self.name, names.join(" + "));
        let refs: Vec<&Program> = objects.iter().map(|p| p.as_ref()).collect();
        Program::link(&self.context, self.id, &refs, "").map_err(|code| Error::Build {
            device: self.name.clone(),
            what: format!("linking {} (OpenCL error {code})", names.join(" + ")),
            log: String::new(),
        })
    }
}
