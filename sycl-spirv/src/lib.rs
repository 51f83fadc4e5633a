//! SPIR-V for device linking: loading modules (including what `rspirv`'s own loader refuses),
//! reading their symbols, linking several relocatable modules into one, and the post-link that
//! turns a link unit's code into device images with exported and imported symbol lists, the
//! call graphs that let the runtime refuse recursion across images, and each kernel's
//! parameters, which let it check a launch's arguments.
//!
//! Everything here is deterministic: the same inputs in the same order give byte-identical
//! output, and the work grows linearly with the size of the input.

//!
//! Without the default `link` feature only loading, C99 inline definitions made local, symbols,
//! calls, kernel parameters, specialization constants and the feature analysis are compiled:
//! what `sycl-build` runs in every device crate's build script.

#[cfg(feature = "link")]
mod barriers;
#[cfg(feature = "link")]
mod builtins;
mod calls;
mod features;
#[cfg(feature = "link")]
mod fnptr;
mod inline;
#[cfg(feature = "link")]
mod interpose;
#[cfg(feature = "link")]
mod link;
mod load;
mod location;
mod params;
#[cfg(feature = "link")]
mod postlink;
pub mod spec;
#[cfg(feature = "link")]
pub mod vfunc;
mod symbols;

#[cfg(feature = "link")]
pub use barriers::sub_group_barriers_to_calls;
#[cfg(feature = "link")]
pub use builtins::{fuse_mad, lower_generic_builtins, lower_renamed_builtins};
pub use calls::{call_cycle, cycle_warning, function_name};
pub use features::{Features, DEVICE_HAS_SEMANTIC};
#[cfg(feature = "link")]
pub use fnptr::lower_function_pointers;
pub use inline::localize_inline_definitions;
#[cfg(feature = "link")]
pub use interpose::import_definitions;
#[cfg(feature = "link")]
pub use link::{link, LinkInput, Linked};
pub use load::{assemble, load};
pub use location::Location;
pub use params::kernel_params;
#[cfg(feature = "link")]
pub use postlink::{post_link, PostLink, PostLinkImage, PostLinkOptions, Requirements, Source};
pub use rspirv::dr;
pub use rspirv::spirv;
pub use symbols::{can_be_imported, Linkage, Symbols};

/// Why a SPIR-V module could not be loaded, linked or post-linked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The input is not SPIR-V that this crate can take apart, or a transformation found an
    /// instruction in a shape it cannot rewrite; the string says what is wrong.
    #[error("malformed SPIR-V: {0}")]
    Malformed(String),
    /// A link input exports a symbol that an earlier input already defines (a later link-once
    /// definition is dropped instead).
    #[error("symbol `{symbol}` is defined in both {first} and {second}")]
    MultipleDefinition {
        /// The linkage name defined twice.
        symbol: String,
        /// The name of the earlier link input, which defines it.
        first: String,
        /// The name of the later link input, which exports it again.
        second: String,
    },
    /// An import's function type differs from that of the export it resolves to.
    #[error("symbol `{symbol}` is declared in {importer} with a type that differs from its definition in {exporter}")]
    TypeMismatch {
        /// The linkage name of the import and the export.
        symbol: String,
        /// The name of the link input that imports it.
        importer: String,
        /// The name of the link input that exports it.
        exporter: String,
    },
    /// Two link inputs declare different addressing or memory models.
    #[error("{first} and {second} use different memory models and cannot be linked")]
    MemoryModel {
        /// The name of the first link input, whose model the others are held to.
        first: String,
        /// The name of the link input whose model differs.
        second: String,
    },
}

/// What the unit tests build modules with.
#[cfg(test)]
mod test_support {
    use rspirv::dr::Builder;
    use rspirv::spirv::{AddressingModel, Capability, MemoryModel};

    /// A builder for an OpenCL kernel module: the `Kernel` capability and `capabilities`,
    /// 64-bit physical addressing, the OpenCL memory model.
    pub(crate) fn kernel_builder(capabilities: &[Capability]) -> Builder {
        let mut b = Builder::new();
        b.capability(Capability::Kernel);
        for &c in capabilities {
            b.capability(c);
        }
        b.memory_model(AddressingModel::Physical64, MemoryModel::OpenCL);
        b
    }
}
