//! The device images of every loaded binary, indexed once at first use: kernels and exported
//! symbols map to the images that define them, in the dynamic loader's order, so the first
//! provider found is the one the loader would pick for a host symbol.
//!
//! A binary whose embedded payload is malformed is recorded with its error and contributes
//! no images; every other binary works as usual.

use std::collections::HashMap;

use sycl_format::{Image, ImageFormat, ImageSet};

use crate::loaded::loaded_objects;
use crate::trace::trace;

/// A loaded executable or shared library that carries device images.
pub(crate) struct Binary {
    pub name: String,
    pub images: Vec<Image>,
    pub error: Option<String>,
}

/// An image: which binary (index in loader order) and which image in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ImageId {
    pub binary: usize,
    pub image: usize,
}

#[derive(Default)]
pub(crate) struct Registry {
    pub binaries: Vec<Binary>,
    kernels: HashMap<String, Vec<ImageId>>,
    exports: HashMap<String, Vec<ImageId>>,
}

impl Registry {
    pub(crate) fn discover() -> Registry {
        let mut registry = Registry::default();
        for object in loaded_objects() {
            let decoded = object.payloads.map_err(|e| e.to_string()).and_then(|payloads| {
                let mut images = Vec::new();
                for payload in payloads {
                    images.extend(ImageSet::decode(&payload).map_err(|e| e.to_string())?.images);
                }
                Ok(images)
            });
            match decoded {
                Ok(images) if images.is_empty() => {}
                Ok(images) => {
                    trace!("discover", "{}: {} image{}", object.name, images.len(), if images.len() == 1 { "" } else { "s" });
                    registry.add(Binary { name: object.name, images, error: None });
                }
                Err(error) => {
                    trace!("discover", "{}: malformed device images: {error}", object.name);
                    log::warn!("{}: malformed device images ignored: {error}", object.name);
                    registry.binaries.push(Binary { name: object.name, images: vec![], error: Some(error) });
                }
            }
        }
        registry
    }

    fn add(&mut self, binary: Binary) {
        let b = self.binaries.len();
        for (i, image) in binary.images.iter().enumerate() {
            let id = ImageId { binary: b, image: i };
            for kernel in &image.kernels {
                self.kernels.entry(kernel.clone()).or_default().push(id);
            }
            for symbol in image.exported_symbols() {
                self.exports.entry(symbol.to_string()).or_default().push(id);
            }
        }
        self.binaries.push(binary);
    }

    pub(crate) fn image(&self, id: ImageId) -> &Image {
        &self.binaries[id.binary].images[id.image]
    }

    /// `libhelpers.so image 0`, for traces and messages.
    pub(crate) fn describe(&self, id: ImageId) -> String {
        format!("{} image {}", short_name(&self.binaries[id.binary].name), id.image)
    }

    /// The first SPIR-V image, in loader order, that defines `kernel`.
    pub(crate) fn kernel(&self, kernel: &str) -> Option<ImageId> {
        self.first_spirv(self.kernels.get(kernel)?)
    }

    /// The first SPIR-V image, in loader order, that exports `symbol`.
    pub(crate) fn provider(&self, symbol: &str) -> Option<ImageId> {
        self.first_spirv(self.exports.get(symbol)?)
    }

    fn first_spirv(&self, ids: &[ImageId]) -> Option<ImageId> {
        ids.iter().copied().find(|&id| self.image(id).format == ImageFormat::SpirV)
    }

    /// The binaries searched for symbols, for error messages (unreadable ones say so).
    pub(crate) fn searched(&self) -> Vec<String> {
        self.binaries
            .iter()
            .map(|b| match &b.error {
                None => b.name.clone(),
                Some(e) => format!("{} (unreadable: {e})", b.name),
            })
            .collect()
    }
}

fn short_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}
